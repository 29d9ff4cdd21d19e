"""A watcher's background vector filling: the texts a background embedder (the semantic model) has not given vectors
yet are filled a step at a time (``Vault.fill_vectors``, about a second each) while no batch is due, until none is
left; every batch written may leave new ones."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import VaultsyncError

if TYPE_CHECKING:
    from ..vault import Vault

logger = logging.getLogger("vaultsync.live.watcher")  # the watcher's lines, under its name

FILL_SAID = 32
"""The watcher says "semantic vectors complete" when it filled more texts than this since they last were."""


class VectorFiller:
    """Whether texts may be waiting for their vectors, and one step of filling them."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self.due = True
        """Whether texts may be waiting for the vectors of a background embedder: filled a step at a time while
        no batch is due, until none is left; set again by every batch written (``written``)."""
        self.filled = 0
        """Texts this watcher gave their vectors."""
        self._run_filled = 0  # filled since the vectors were last complete

    def written(self) -> None:
        """A batch was written: its new texts may wait for vectors."""
        self.due = True

    def step(self) -> None:
        """One step of filling vectors (``Vault.fill_vectors``); none left, or a failure: stop until the next batch."""
        if not self.vault.lock.held:  # it went with a lost session: never borrowed for this
            self.due = False
            return
        try:
            filled = self.vault.fill_vectors()
        except Exception as exc:  # the model missing or broken, the database away: words alone meanwhile
            self.due = False
            why = str(exc) if isinstance(exc, VaultsyncError) else f"{type(exc).__name__}: {exc}"
            logger.warning("semantic vectors not filled (tried again after the next batch): %s", why)
            return
        self.filled += filled
        self._run_filled += filled
        if not filled:
            self.due = False
            run, self._run_filled = self._run_filled, 0
            if run:  # a backlog caught up is news; the few texts of one edit are not
                say = logger.info if run > FILL_SAID else logger.debug
                say("semantic vectors complete (%d %s filled)", run, "text" if run == 1 else "texts")

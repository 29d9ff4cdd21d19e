"""A watcher's background vector filling: the texts a background embedder (the semantic model) has not given vectors
yet are filled on a thread of their own (``Vault.fill_vectors``, a step of a few dozen texts at a time), until none
is left; every batch written may leave new ones.

A batch never waits for vectors: the filler holds the vault's batch lock only for each step's two short
transactions, never while the model embeds, and it yields while a batch is due (``busy``): between runs of a few
texts it waits until the watcher has written it, so that on a busy machine (a service at ``Nice=10``) the
processor the process gets goes to the batch first."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import VaultsyncError

if TYPE_CHECKING:
    from ..vault import Vault

logger = logging.getLogger("vaultsync.live.watcher")  # the watcher's lines, under its name

FILL_SAID = 32
"""The watcher says "semantic vectors complete" when it filled more texts than this since they last were."""

YIELD_POLL_S = 0.02
"""How often a filler that yields to a batch looks whether the batch is written."""


class VectorFiller:
    """Whether texts may be waiting for their vectors, and the thread that fills them while no batch is due."""

    def __init__(self, vault: Vault, busy: Callable[[], bool] = lambda: False) -> None:
        self.vault = vault
        self.busy = busy
        """Whether a batch is due or being written (the watcher's): the filler waits meanwhile."""
        self.due = True
        """Whether texts may be waiting for the vectors of a background embedder: filled a step at a time until
        none is left; set again by every batch written (``written``)."""
        self.filled = 0
        """Texts this watcher gave their vectors."""
        self.yielded = 0
        """How many times the filler waited for a batch in the middle of a step."""
        self._run_filled = 0  # filled since the vectors were last complete
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Fill on a thread of its own until ``stop``."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._wake.set()
        self._thread = threading.Thread(target=self._run, name="vaultsync-vectors", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the run of texts in hand (a few texts of embedding) and join the thread."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def written(self) -> None:
        """A batch was written: its new texts may wait for vectors (a step in hand looks again after it)."""
        self._wake.set()

    def pause(self) -> None:
        """Between runs of texts: wait while a batch is due (until it is written, or the filler stops)."""
        waited = False
        while self.busy() and not self._stop.is_set():
            waited = True
            self._stop.wait(YIELD_POLL_S)
        self.yielded += waited

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()  # cleared before looking: a batch written meanwhile wakes it again
            self.due = True
            while self.due and not self._stop.is_set():
                self.pause()  # a batch due goes first
                if self._stop.is_set():
                    return
                self.step()

    def step(self) -> None:
        """One step of filling vectors (``Vault.fill_vectors``); none left, or a failure: stop until the next batch."""
        if not self.vault.lock.held:  # it went with a lost session: never borrowed for this
            self.due = False
            return
        try:
            filled = self.vault.fill_vectors(pause=self.pause)
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

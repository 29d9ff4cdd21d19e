"""A watcher's retention: the configured policy (``vaultsync.retention``) applied to the stored history now and
then (``RETENTION_EVERY_S``), never during a burst (only when no batch is due), each time said in one line."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..errors import VaultsyncError

if TYPE_CHECKING:
    from ..retention import Policy
    from ..vault import Vault

logger = logging.getLogger("vaultsync.live.watcher")  # the watcher's lines, under its name

RETENTION_EVERY_S = 3600.0
"""How often a watcher applies its retention policy (the first time once it has caught up and is idle)."""
RETENTION_FIRST_S = 60.0
"""How long after the start, at the least, a watcher first applies it (a start is often a burst's catch-up)."""


class Retainer:
    """When the retention policy is due, and applying it."""

    def __init__(self, vault: Vault, policy: Policy | None, every_s: float = RETENTION_EVERY_S) -> None:
        self.vault, self.policy, self.every_s = vault, policy, every_s
        self.due_at = time.monotonic() + min(every_s, RETENTION_FIRST_S)
        """When (monotonic) the policy is next applied."""
        self.applied = 0
        """How many times this watcher applied it."""

    def wait_s(self) -> float | None:
        """How long until the policy is due (None: no policy)."""
        return None if self.policy is None else max(0.0, self.due_at - time.monotonic())

    @property
    def due(self) -> bool:
        return self.policy is not None and time.monotonic() >= self.due_at

    def step(self) -> None:
        """Apply the policy once (``Vault.purge``), log one line, and schedule the next time."""
        self.due_at = time.monotonic() + self.every_s
        if self.policy is None or not self.vault.lock.held:
            return
        try:
            result = self.vault.purge(policy=self.policy)
        except Exception as exc:  # the database away, a reader holding it: the next time tries again
            why = str(exc) if isinstance(exc, VaultsyncError) else f"{type(exc).__name__}: {exc}"
            logger.warning("retention (%s) not applied, tried again in %.0f s: %s", self.policy.text, self.every_s, why)
            return
        self.applied += 1
        say = logger.info if result.revisions_removed or result.batches_removed else logger.debug
        say(
            "retention (%s): %d batches and %d revisions removed, %d notes' history thinned; database %.1f -> %.1f MB",
            self.policy.text,
            result.batches_removed,
            result.revisions_removed,
            result.notes,
            result.database_bytes_before / 2**20,
            result.database_bytes_after / 2**20,
        )

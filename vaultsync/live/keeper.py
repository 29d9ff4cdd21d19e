"""A watcher's hold on its vault's writer lock, across lost database sessions.

On SQLite the lock is a file lock and lasts as long as the process. On PostgreSQL it lives in a database session,
and goes with it (a restart, a failover, ``pg_terminate_backend``, a network drop); the engine then refuses every
batch of this process (``store/pg/fence.py``) until the lock is taken again. ``LockKeeper`` notices the loss (a
refused batch, or ``check`` asking now and then while nothing is written), says it once, and retakes the lock
with a bounded backoff while the database is away. When another process took the lock meanwhile, the watcher stands
by as ``watch --wait`` does (said once) and takes the lock when that process stops. Paths noticed meanwhile stay
pending; once the lock is back the watcher records everything with a full scan.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from ..errors import VaultsyncError

if TYPE_CHECKING:
    from .writer_role import WriterRole

logger = logging.getLogger("vaultsync.live.watcher")  # the watcher's lines, under its name

CHECK_EVERY_S = 2.0
"""While it holds the lock and writes nothing, how often a watcher asks whether the lock is still held."""
RETRY_S = 0.25
"""The first wait before retaking a lost lock while the database is away (doubling each time)."""
MAX_RETRY_S = 2.0
"""The longest wait between two attempts to retake the lock while the database is away."""
STANDBY_TRY_S = 1.0
"""While another process holds the lock, how often a watcher tries it."""


class LockKeeper:
    """Whether this watcher still holds its vault's writer lock, and how it takes it back when it lost it."""

    def __init__(self, role: WriterRole) -> None:
        self.role = role
        self.lost_since: float | None = None
        """``time.monotonic()`` when the lock was found lost (None: held)."""
        self.why: str | None = None
        self.holder: str | None = None
        """Who holds the lock while this watcher stands by (as told to the log)."""
        self.losses = 0
        self._next_check = time.monotonic() + CHECK_EVERY_S
        self._next_try = 0.0
        self._wait = RETRY_S

    @property
    def lost(self) -> bool:
        return self.lost_since is not None

    def check(self) -> None:
        """Now and then while nothing is written: ask whether the lock is still held (a PostgreSQL round trip)."""
        now = time.monotonic()
        if self.lost or now < self._next_check:
            return
        self._next_check = now + CHECK_EVERY_S
        try:
            alive = self.role.vault.lock.alive()
        except Exception as exc:  # asking failed: the session is gone
            logger.debug("could not check the writer lock: %s", exc)
            alive = False
        if not alive:
            self.lose("its database session ended")

    def lose(self, why: str) -> None:
        """The lock is gone (a refused batch, or ``check``): say so once; retaking starts at once."""
        if self.lost:
            return
        self.lost_since, self.why, self.holder = time.monotonic(), why, None
        self.losses += 1
        self._next_try, self._wait = 0.0, RETRY_S
        logger.warning(
            "vault '%s': this watcher lost the writer lock; recording nothing until it takes the lock back "
            "(changes stay pending): %s",
            self.role.vault.name,
            why,
        )

    def retake(self) -> bool:
        """Try to take the lost lock back, at the pace allowed; True when this call took it (the watcher then
        records everything with a full scan)."""
        now = time.monotonic()
        if not self.lost or now < self._next_try:
            return False
        try:
            took = self.role.retake()
        except VaultsyncError as exc:  # the database is away: try again, waiting longer each time
            logger.debug("could not retake the writer lock: %s", exc)
            self._next_try, self._wait = now + self._wait, min(MAX_RETRY_S, self._wait * 2)
            return False
        if not took:
            self._next_try = now + STANDBY_TRY_S
            if self.holder is None:
                self.holder = self._describe_holder()
                logger.warning(
                    "vault '%s' is now watched by %s; standing by, and watching it here again when that process stops",
                    self.role.vault.name,
                    self.holder,
                )
            return False
        away = now - (self.lost_since or now)
        self.lost_since, self.why, self.holder = None, None, None
        self._next_check = time.monotonic() + CHECK_EVERY_S
        logger.warning(
            "vault '%s': took the writer lock back after %.1f s; recording what changed meanwhile",
            self.role.vault.name,
            away,
        )
        return True

    def _describe_holder(self) -> str:
        try:
            return self.role.vault.lock.holder() or "another process"
        except Exception:
            return "another process"

    def status(self) -> dict[str, Any]:
        """``lock``: held, lost (retaking) or standing by (another process holds it)."""
        if not self.lost:
            return {"lock": "held"}
        state = "standing by" if self.holder is not None else "lost, retaking"
        return {"lock": state, "lock_lost_s": round(time.monotonic() - (self.lost_since or 0), 1)}


__all__ = ["LockKeeper"]

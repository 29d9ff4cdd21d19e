"""A vault's writer lock as one object (``Vault.lock``): the engine's lock across processes, and this process's.

Two locks make "this process writes the vault": the engine's writer lock (``store.contract.Lock``: one writer
per vault across processes, held by a watcher for good or borrowed for one batch) and a re-entrant lock inside
the process (one batch at a time: the watcher's thread, the write tools). ``VaultLock`` holds both, always
taken in that order, so no batch of this process ever loses the writer lock halfway through.

Whoever takes the writer lock first puts right the write requests a writer that died left half done
(``on_taken``: ``unfinished.recover``) before anything else is written; the lock is given up again when that
fails.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import ConfigError
from ..store.contract import Lock


class VaultLock:
    """The vault's writer lock (across processes) and this process's batch lock (``local``), as one object."""

    def __init__(self, lock: Lock, *, command: str | None, readonly: bool, on_taken: Callable[[], object]) -> None:
        self._lock = lock
        self._lock.command = command
        self._readonly = readonly
        self._on_taken = on_taken
        self.local = threading.RLock()
        """One batch at a time in this process (the watcher's thread, the write tools); re-entrant."""

    @property
    def command(self) -> str | None:
        """How this process names itself to others (the writer lock, write requests); None: its arguments."""
        return self._lock.command

    @property
    def held(self) -> bool:
        """Whether this process holds the vault's writer lock."""
        return self._lock.held

    def hold(self, command: str | None = None) -> bool:
        """Take the writer lock for good if it is free (never waits); True when held afterwards.

        Taken between batches of this process, so a write in progress never loses the lock it
        borrowed; ``Vault.close()`` releases it.
        """
        with self.local:
            held = self._lock.held
            taken = self._lock.try_acquire(command, watching=True)  # held for good: by a watcher
            if taken and not held:
                self._taken()
            return taken

    def acquire(self, command: str | None = None, *, watching: bool = False) -> None:
        """Take the writer lock now, or LockedError naming its holder (``release`` gives it up)."""
        with self.local:
            self._lock.acquire(command, watching=watching)

    def take(self) -> bool:
        """``hold`` for a watcher that starts: True when this call took the lock, False when this
        process already held it; ConfigError for a read-only vault, LockedError naming the holder when
        another process holds it."""
        if self._readonly:
            raise ConfigError("the watcher needs a vault opened for writing (Vault.open(db, root=FOLDER))")
        with self.local:  # no batch of this process is borrowing it meanwhile
            if self._lock.held:
                return False
            self._lock.acquire(watching=True)
            self._taken()
            return True

    def release(self) -> None:
        """Give up the writer lock taken with ``hold`` or ``acquire`` (between batches of this process)."""
        with self.local:
            self._lock.release()

    def close(self) -> None:
        """Give up the writer lock at ``Vault.close()`` (without waiting for this process's batch lock)."""
        self._lock.release()

    def alive(self) -> bool:
        """Whether this process still holds the writer lock, asking the engine (a PostgreSQL lock goes with
        its database session; then the vault's batches are refused until the lock is taken again)."""
        return self._lock.alive()

    def holder_info(self) -> dict[str, object] | None:
        """What the other process holding the writer lock wrote about itself ({} if unreadable): pid,
        command, started, watching; None when the lock is free or this process holds it."""
        return self._lock.holder_info()

    def holder(self) -> str | None:
        """The other process holding the writer lock in one phrase (pid, command, since), or None."""
        return self._lock.holder()

    def publish(self, facts: dict[str, Any] | None) -> None:
        """Publish this holder's heartbeat for every reader of the store (``live.heartbeat``; None: withdraw it);
        nothing while this process does not hold the writer lock."""
        self._lock.publish(facts)

    def beat(self) -> tuple[dict[str, Any], float] | None:
        """The heartbeat last published for the vault by whoever held its writer lock, and its age in seconds."""
        return self._lock.beat()

    @contextlib.contextmanager
    def writing(self, command: str | None = None) -> Iterator[None]:
        """Hold this process's batch lock and the writer lock (re-entrant) while writing (``command``: how the
        lock names its holder, instead of this process's arguments); LockedError while another process holds it."""
        with self.local:  # one batch at a time in this process (watcher thread, write tools)
            held = self._lock.held
            self._lock.acquire(command)
            try:
                if not held:
                    self._taken()
                yield
            finally:
                if not held:
                    self._lock.release()

    def _taken(self) -> None:
        """This process just took the writer lock: ``on_taken`` before anything else is written; the lock is
        given up again when that fails."""
        if self._readonly:
            return
        try:
            self._on_taken()
        except BaseException:
            self._lock.release()
            raise

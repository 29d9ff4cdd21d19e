"""Who watches: the watcher of ``serve --watch`` run beside the server, one process per vault.

Any number of servers (and one ``vaultsync watch``) may be asked to watch the same vault; the vault's
writer lock decides which one does. The holder is the **watcher**: it runs ``vaultsync.watcher.Watcher``
(catch-up scan, then one batch per burst of changes). Every other ``serve --watch`` is a **reader** in
standby: it answers from the store at once, tells its subscribers about the batches the watcher
writes (``follow.BatchFollower``), and tries the lock once a second (a non-blocking ``flock``; the
OS frees it when the holder exits or is killed). The first standby server to get it becomes the
watcher and starts with the catch-up scan, which records whatever changed while nobody watched.
Readers hold no file-system watches and never scan. Exactly one process writes batches: every
batch is written under the lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .follow import POLL_S, BatchFollower

if TYPE_CHECKING:
    from ..sync import BatchSummary
    from ..vault import Vault

logger = logging.getLogger(__name__)

TAKE_OVER_EVERY_S = 1.0
"""How often a standby server tries the writer lock (one non-blocking flock)."""
RETRY_FAILED_START_S = 30.0
"""How long a server whose watcher failed to start waits before trying again (the lock is freed meanwhile)."""


class InProcessWatcher:
    """This server's part in watching a vault, and the background thread that follows the batch log.

    ``claim`` (before serving) takes the writer lock if it is free: then this server is the watcher.
    ``start`` runs one thread that starts the watcher when this server holds the lock (its first
    catch-up of a big vault takes a while; the server answers from the store meanwhile), follows
    the batch log every ``POLL_S`` and, in standby, tries the lock every ``TAKE_OVER_EVERY_S``.
    """

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = options or {}
        self.watcher: Any = None
        self.standby = False
        """Asked to watch: takes over when the watching process stops."""
        self.error: str | None = None
        """Why the watcher could not start, if it could not."""
        self.took_over_at: float | None = None
        """When this server took the watcher role from another process (time.time())."""
        self._writer: Vault | None = None
        self._holding = False
        self._starting = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def claim(self, writer: Vault) -> bool:
        """Ask to watch ``writer``'s vault: take its writer lock if free; True when this server is the watcher."""
        self.standby, self._writer = True, writer
        self._holding = writer.hold_lock()
        return self._holding

    @property
    def role(self) -> str:
        """``watcher`` (this process records the folder's changes) or ``reader`` (it only reads the store)."""
        return "watcher" if self._holding else "reader"

    def start(self, follower: BatchFollower, on_batch: Callable[[BatchSummary], None]) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(follower, on_batch), name="vaultsync-watching",
                                        daemon=True)
        self._thread.start()

    def _run(self, follower: BatchFollower, on_batch: Callable[[BatchSummary], None]) -> None:
        next_try = 0.0
        if self._holding:
            self._start_watcher(on_batch)
        while not self._stop.wait(POLL_S):
            try:
                follower.poll()
            except Exception as exc:  # a busy or vanished database: say so, keep serving, look again
                logger.debug("could not look for new batches: %s", exc)
            if not self.standby or self._holding or time.monotonic() < next_try:
                continue
            next_try = time.monotonic() + TAKE_OVER_EVERY_S
            assert self._writer is not None
            try:
                taken = self._writer.hold_lock()
            except OSError as exc:
                logger.debug("could not try the writer lock: %s", exc)
                continue
            if taken:
                self._holding = True
                try:
                    follower.catch_up()  # the previous watcher's last batches are told before ours
                except Exception as exc:  # the next poll tells them
                    logger.debug("could not tell the previous watcher's last batches: %s", exc)
                logger.warning("vault '%s': the watching process stopped; this server watches it now",
                               self._writer.name)
                self.took_over_at = time.time()
                if not self._start_watcher(on_batch):
                    next_try = time.monotonic() + RETRY_FAILED_START_S

    def _start_watcher(self, on_batch: Callable[[BatchSummary], None]) -> bool:
        """Start the watcher on the held lock (catch-up scan first); on failure free the lock for others."""
        from ..watcher import Watcher

        assert self._writer is not None
        self._starting = True
        try:
            watcher = Watcher(self._writer, on_batch=on_batch, **self.options)
            watcher.start()  # records what changed while nobody watched
        except Exception as exc:  # reported by vault_status; the server keeps answering from the store
            logger.error("the watcher could not start: %s", exc)
            self.error = str(exc)
            self._writer.release_lock()
            self._holding = False
            return False
        finally:
            self._starting = False
        self.error = None
        self.watcher = watcher
        if self._stop.is_set():  # stopping while it started: stop() may already have looked
            return True
        logger.info("watching %s", self._writer.root)
        return True

    @property
    def started(self) -> bool:
        return self._thread is not None

    def stop(self) -> None:
        """Stop following, wait for a watcher start in progress, stop the watcher and free the lock
        (blocking: call from a worker thread)."""
        thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join()
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            watcher.stop()
        if self._holding and self._writer is not None:
            self._writer.release_lock()
        self._holding, self.standby, self._writer = False, False, None

    def status(self, lock: Vault | None) -> dict[str, Any]:
        """``vault_status``'s watcher fields: this process's role and watcher, or the other process watching."""
        status: dict[str, Any] = {"running": False, "in_process": False, "other_process": None, "lag_seconds": None,
                                  "role": self.role, "standby": self.standby}
        if self.took_over_at is not None:
            status["took_over_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.took_over_at))
        watcher = self.watcher
        if self._holding and watcher is None:
            status.update(running=True, in_process=True, starting=True, last_error=None)
            return status
        if watcher is not None:
            extra = dict(watcher.status())
            status.update({k: v for k, v in extra.items() if k not in status or v is not None})
            status["running"] = bool(extra.get("running", True))
            status["in_process"] = True
            lag_ms = extra.get("lag_ms")
            status["lag_seconds"] = lag_ms / 1000 if isinstance(lag_ms, int | float) else None
            return status
        if self.error is not None:
            status["last_error"] = self.error
        holder = lock.lock_holder() if lock is not None else None
        if holder:
            status.update(running=True, other_process=holder)
        return status

    def describe(self) -> str | None:
        """One line for the server's stderr when it serves as a reader in standby (None otherwise)."""
        if not self.standby or self._holding or self._writer is None:
            return None
        holder = self._writer.lock_holder() or "another process"
        return (f"vault '{self._writer.name}' is being watched by {holder}; serving it as a reader, "
                "and watching it here if that process stops")

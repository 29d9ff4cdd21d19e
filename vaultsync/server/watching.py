"""The watcher of ``serve --watch``, run beside the server, and what ``vault_status`` reports about watchers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store.lock import WriterLock
    from ..sync import BatchSummary
    from ..vault import Vault

logger = logging.getLogger(__name__)


class InProcessWatcher:
    """Starts ``vaultsync.watcher.Watcher`` on a background thread (its first catch-up of a big vault
    takes a while, and the server answers from the store meanwhile) and stops it with the server."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = options or {}
        self.watcher: Any = None
        self.error: str | None = None
        """Why the watcher could not start, if it could not."""
        self._starter: threading.Thread | None = None

    def start(self, writer: Vault, on_batch: Callable[[BatchSummary], None]) -> None:
        self._starter = threading.Thread(target=self._run, args=(writer, on_batch), name="vaultsync-watcher-start",
                                         daemon=True)
        self._starter.start()

    def _run(self, writer: Vault, on_batch: Callable[[BatchSummary], None]) -> None:
        from ..watcher import Watcher

        watcher = Watcher(writer, on_batch=on_batch, **self.options)
        try:
            watcher.start()  # takes the writer lock and records what changed while nobody watched
        except Exception as exc:  # reported by vault_status; the server keeps answering from the store
            logger.error("the watcher could not start: %s", exc)
            self.error = str(exc)
            return
        self.watcher = watcher
        logger.info("watching %s", writer.root)

    @property
    def started(self) -> bool:
        return self._starter is not None

    def stop(self) -> None:
        """Wait for a start in progress, then stop the watcher (blocking: call from a worker thread)."""
        starter, self._starter = self._starter, None
        if starter is not None:
            starter.join()
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            watcher.stop()

    def status(self, lock: WriterLock | None) -> dict[str, Any]:
        """``vault_status``'s watcher fields: this process's watcher, or another process holding ``lock``."""
        status: dict[str, Any] = {"running": False, "in_process": False, "other_process": None, "lag_seconds": None}
        if self._starter is not None and self.watcher is None:
            starting = self.error is None
            status.update(running=starting, in_process=True, starting=starting, last_error=self.error)
            return status
        if self.watcher is not None:
            extra = dict(self.watcher.status())
            status.update({k: v for k, v in extra.items() if k not in status or v is not None})
            status["running"] = bool(extra.get("running", True))
            status["in_process"] = True
            lag_ms = extra.get("lag_ms")
            status["lag_seconds"] = lag_ms / 1000 if isinstance(lag_ms, int | float) else None
            return status
        holder = lock.holder() if lock is not None else None
        if holder:
            status.update(running=True, other_process=holder)
        return status

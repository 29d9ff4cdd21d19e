"""What a running server holds (its vaults, the watcher beside it, who to notify) and its lifespan."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread

from ..sync import BatchSummary
from ..vault import Vault
from .follow import BatchFollower
from .notifications import Notifier
from .vaults import ServeConfig, ServedVaults
from .watching import InProcessWatcher


class Runtime:
    """One server process: ``vaults`` (reader and writer), ``watcher`` (its part in watching, see
    ``watching``), ``follower`` (the batch log) and ``notifier`` (subscribers), started and stopped
    together by ``running()``, the server's lifespan.
    """

    def __init__(self, source: Vault | ServeConfig, *, allow_writes: bool = False, watch: bool = False,
                 watcher_options: dict[str, Any] | None = None) -> None:
        config = source if isinstance(source, ServeConfig) else None
        self.allow_writes = allow_writes or (config.allow_writes if config else False)
        self.watch = watch or (config.watch if config else False)
        self.vaults = ServedVaults(source, need_writer=self.allow_writes or self.watch)
        self.watcher = InProcessWatcher(watcher_options)
        self.notifier = Notifier()
        self.follower = BatchFollower(self.vaults.reading, self.notifier.tell)
        self._users = 0

    # the parts the tools use, by their short names

    @property
    def reader(self) -> Vault | None:
        return self.vaults.reader

    @property
    def writer(self) -> Vault | None:
        return self.vaults.writer

    def open(self) -> None:
        """Open the vaults and, with ``watch``, claim the watcher role (idempotent)."""
        self.vaults.open()
        if self.watch and not self.watcher.standby:
            assert self.vaults.writer is not None
            self.watcher.claim(self.vaults.writer)

    def reading(self) -> contextlib.AbstractContextManager[Vault]:
        return self.vaults.reading()

    def listing(self, as_of: int | None = None, prefix: str = "", valid_at: int | None = None,
                tag: str | None = None) -> list[Any]:
        return self.vaults.listing(as_of, prefix, valid_at, tag)

    def on_batch(self, summary: BatchSummary) -> None:
        """After this process wrote a batch: tell subscribers (through the batch log, so each batch once)."""
        self.follower.catch_up()

    def watcher_status(self) -> dict[str, Any]:
        return self.watcher.status(self.vaults.writer_lock)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Runtime]:
        """The server lifespan: open, start the watcher, and stop it before the event loop ends.

        Re-entrant: each client of an in-process server enters it; the last one out stops everything.
        """
        self._users += 1
        try:
            if self._users == 1:
                await anyio.to_thread.run_sync(self.open)
                await anyio.to_thread.run_sync(self.follower.start)
                self.notifier.attach()
                self.watcher.start(self.follower, self.on_batch)
            yield self
        finally:
            self._users -= 1
            if self._users == 0:
                with anyio.CancelScope(shield=True):
                    if self.watcher.started:
                        await anyio.to_thread.run_sync(self.watcher.stop)
                    self.notifier.detach()
                    if self.vaults.owned:
                        self.vaults.close()

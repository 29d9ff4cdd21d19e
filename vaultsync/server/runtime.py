"""What a running server holds: the vaults it reads and writes, the watcher beside it, who to notify."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged, ResourceUpdated
from mcp.shared.uri_template import UriTemplate

from ..errors import ConfigError, LockedError
from ..sync import BatchSummary
from ..vault import Vault

logger = logging.getLogger(__name__)

NOTE_TEMPLATE = "note://{+path}"
_TEMPLATE = UriTemplate.parse(NOTE_TEMPLATE)


def note_uri(path: str) -> str:
    """The canonical ``note://`` URI of a vault path (RFC 6570 reserved expansion)."""
    return _TEMPLATE.expand({"path": path})


def uri_path(uri: str) -> str | None:
    """The vault path a ``note://`` URI names, or None for any other URI."""
    text = str(uri)
    if not text.startswith("note://") or len(text) <= len("note://"):
        return None
    return unquote(text[len("note://"):])


@dataclass(frozen=True)
class ServeConfig:
    """How ``vaultsync serve`` was asked to run (loaded once at the edge, passed down)."""

    db: Path
    root: Path | None = None
    """The vault folder; needed for writes and the watcher."""
    vault: str | None = None
    """Vault name in the database (default: the folder's name, or the only vault)."""
    allow_writes: bool = False
    watch: bool = False


class Runtime:
    """The open vaults, the optional watcher and the subscribers of one server process.

    Reads go through ``reader`` (read-only unless writes or the watcher need the writer), one at a
    time; the writer is the process's single write path, shared by the watcher and the write tools.
    Separate SQLite connections mean a query never sees a half-applied batch.
    """

    def __init__(self, source: Vault | ServeConfig, *, allow_writes: bool = False, watch: bool = False,
                 watcher_options: dict[str, Any] | None = None) -> None:
        self.config = source if isinstance(source, ServeConfig) else None
        self.allow_writes = allow_writes or (self.config.allow_writes if self.config else False)
        self.watch = watch or (self.config.watch if self.config else False)
        self.watcher_options = watcher_options or {}
        self._given = source if isinstance(source, Vault) else None
        self.reader: Vault | None = None
        self.writer: Vault | None = None
        self.watcher: Any = None
        self._starter: threading.Thread | None = None
        self.watcher_error: str | None = None
        self.bus = InMemorySubscriptionBus()
        self.legacy: dict[str, dict[int, Any]] = {}
        self._read_lock = threading.Lock()
        self._listings: dict[tuple[Any, ...], list[Any]] = {}
        self.write_lock = threading.Lock()
        self._token: Any = None
        self._users = 0

    # ------------------------------------------------------------ opening and closing

    def open(self) -> None:
        """Open the vaults (idempotent). Errors are VaultsyncErrors with a message for the user."""
        if self.reader is not None:
            return
        if self._given is not None:
            self.reader = self._given
            self.writer = self._given if (self.allow_writes or self.watch) else None
            return
        cfg = self.config
        assert cfg is not None
        if self.allow_writes or self.watch:
            if cfg.root is None:
                raise ConfigError("writes and the watcher need the vault folder: vaultsync serve VAULT")
            self.writer = Vault.open(cfg.db, root=cfg.root, name=cfg.vault)
            name = self.writer.name
            holder = self.writer.lock.holder() if self.watch else None
            if holder:
                self.writer.close()
                self.writer = None
                raise LockedError(f"vault '{name}' is already being watched by {holder}; stop it, or serve "
                                  "without --watch (that watcher keeps the index current)")
        else:
            name = cfg.vault or (cfg.root.expanduser().resolve().name if cfg.root is not None else None)
        try:
            self.reader = Vault.open(cfg.db, name=name, readonly=True)
        except ConfigError as exc:
            if cfg.root is not None and str(exc).startswith("no vault '"):
                raise ConfigError(f"{exc}; import it first (vaultsync import {cfg.root}) or serve with --watch") from None
            raise

    def close(self) -> None:
        if self._given is not None:
            self.reader = self.writer = None
            return
        for vault in {id(v): v for v in (self.reader, self.writer) if v is not None}.values():
            vault.close()
        self.reader = self.writer = None

    @contextlib.asynccontextmanager
    async def running(self) -> Any:
        """The server lifespan: open, start the watcher, and stop it before the event loop ends."""
        self._users += 1
        try:
            if self._users == 1:
                await anyio.to_thread.run_sync(self.open)
                self._token = anyio.lowlevel.current_token()
                if self.watch:  # in the background: the first catch-up of a big vault takes a while
                    self._starter = threading.Thread(target=self._start_watcher, name="vaultsync-watcher-start",
                                                     daemon=True)
                    self._starter.start()
            yield self
        finally:
            self._users -= 1
            if self._users == 0:
                with anyio.CancelScope(shield=True):
                    if self._starter is not None:
                        await anyio.to_thread.run_sync(self._stop_watcher)
                    self._token = None
                    self.legacy.clear()
                    if self.config is not None:
                        self.close()

    def _start_watcher(self) -> None:
        from ..watcher import Watcher

        assert self.writer is not None
        watcher = Watcher(self.writer, on_batch=self.on_batch, **self.watcher_options)
        try:
            watcher.start()  # takes the writer lock and records what changed while nobody watched
        except Exception as exc:  # reported by vault_status; the server keeps answering from the store
            logger.error("the watcher could not start: %s", exc)
            self.watcher_error = str(exc)
            return
        self.watcher = watcher
        logger.info("watching %s", self.writer.root)

    def _stop_watcher(self) -> None:
        starter, self._starter = self._starter, None
        if starter is not None:
            starter.join()
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            watcher.stop()

    # ------------------------------------------------------------ reading

    @contextlib.contextmanager
    def reading(self) -> Iterator[Vault]:
        """The reader vault, one caller at a time (one SQLite connection)."""
        if self.reader is None:
            self.open()
        assert self.reader is not None
        with self._read_lock:
            yield self.reader

    def listing(self, as_of: int | None = None, prefix: str = "") -> list[Any]:
        """``Vault.ls`` with a small cache: the store is append-only, so a listing stays valid until
        the next batch (``last_known_at`` moves); paging through a big vault lists it once."""
        with self.reading() as vault:
            key = (as_of, prefix, vault.store.last_known_at(vault.id))
            found = self._listings.get(key)
            if found is None:
                found = vault.ls(as_of=as_of, prefix=prefix)
                if len(self._listings) >= 4:
                    self._listings.pop(next(iter(self._listings)))
                self._listings[key] = found
            return found

    def watcher_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {"running": False, "in_process": False, "other_process": None, "lag_seconds": None}
        if self._starter is not None and self.watcher is None:
            starting = self.watcher_error is None
            status.update(running=starting, in_process=True, starting=starting, last_error=self.watcher_error)
            return status
        if self.watcher is not None:
            extra = dict(self.watcher.status()) if hasattr(self.watcher, "status") else {}
            status.update({k: v for k, v in extra.items() if k not in status or v is not None})
            status["running"] = bool(extra.get("running", True))
            status["in_process"] = True
            lag_ms = extra.get("lag_ms")
            status["lag_seconds"] = lag_ms / 1000 if isinstance(lag_ms, int | float) else None
            return status
        lock = (self.writer or self.reader).lock if (self.writer or self.reader) else None
        holder = lock.holder() if lock is not None else None
        if holder:
            status.update(running=True, other_process=holder)
        return status

    # ------------------------------------------------------------ notifications

    def on_batch(self, summary: BatchSummary) -> None:
        """Called on any worker thread after a batch: tell subscribers which notes changed."""
        if not summary.paths or self._token is None:
            return
        listed = bool(summary.added or summary.deleted or summary.renamed)
        try:
            anyio.from_thread.run(self.publish, list(summary.paths), listed, token=self._token)
        except Exception:  # the loop is gone or closing: nobody is left to tell
            logger.debug("could not publish batch notifications", exc_info=True)

    async def publish(self, paths: list[str], list_changed: bool = False) -> None:
        """Send resource-updated events to 2026 listen streams and legacy subscribers."""
        for path in paths:
            uri = note_uri(path)
            await self.bus.publish(ResourceUpdated(uri=uri))
            if ("note://" + path) != uri:
                await self.bus.publish(ResourceUpdated(uri="note://" + path))
            for key, session in list(self.legacy.get(uri, {}).items()):
                try:
                    await session.send_resource_updated(uri)
                except Exception:
                    logger.debug("dropping a legacy subscriber of %s", uri, exc_info=True)
                    self.legacy.get(uri, {}).pop(key, None)
        if list_changed:
            await self.bus.publish(ResourcesListChanged())

    def subscribe_legacy(self, uri: str, session: Any) -> str:
        path = uri_path(uri)
        if path is None:
            raise ValueError(f"{uri!r} is not a note:// URI")
        canonical = note_uri(path)
        self.legacy.setdefault(canonical, {})[_connection_key(session)] = session
        return canonical

    def unsubscribe_legacy(self, uri: str, session: Any) -> None:
        path = uri_path(uri)
        if path is not None:
            self.legacy.get(note_uri(path), {}).pop(_connection_key(session), None)


def _connection_key(session: Any) -> int:
    """Sessions are per request; the connection behind them is what subscribes."""
    return id(getattr(session, "_connection", session))

"""The served vault: what one server process holds of its vault, opened and closed by the server's lifespan.

Reads go through ``reader`` (read-only unless a writer is needed), one at a time; ``writer`` (when
writes or watching need one) is the process's single write path, shared by the watcher and the
write tools. Separate SQLite connections mean a query never sees a half-applied batch. Who writes
is ``role`` (a ``vaultsync.live.writer_role.WriterRole``): with ``watch``, the server that gets the vault's
writer lock runs the **watcher** (``vaultsync.live.watcher.Watcher``: catch-up scan, then one batch per
burst of changes); every other one serves as a reader in standby, follows the batches the watcher
writes (``feed``), and takes the lock over when the watching process stops (the OS frees it when
the holder exits or is killed), then starts its own watcher with a catch-up scan. Readers hold no
file-system watches and never scan.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ..errors import ConfigError, VaultNotFound, VaultsyncError
from ..live.heartbeat import UNKNOWN, Currency, currency
from ..live.watcher import Watcher
from ..live.writer_role import WriterRole, public_holder
from ..sync import BatchSummary
from ..vault import Note, Vault
from .feed import POLL_S, ChangeFeed

if TYPE_CHECKING:
    from ..hardened.manifest import Manifest

logger = logging.getLogger(__name__)

RETRY_FAILED_START_S = 30.0
"""How long a server whose watcher failed to start waits before trying again (the lock is freed meanwhile)."""


@dataclass(frozen=True)
class ServeConfig:
    """How a server was asked to run (loaded once at the edge, passed down); ``build_server`` takes it."""

    db: Path | str | None = None
    """The database file or a ``postgresql://`` URI (None: the ``given`` vault's)."""
    root: Path | None = None
    """The vault folder; needed for writes and the watcher."""
    vault: str | None = None
    """Vault name in the database (default: the folder's name, or the only vault)."""
    allow_writes: bool = False
    """Offer the write tools (``registry.names(writes=True)``: create, append, edit, restore)."""
    watch: bool = False
    """Run the watcher in this process (or stand by to, while another process watches)."""
    lock_command: str | None = None
    """How the writer lock file names this server (None: its command line; the hardened mode never
    records argv)."""
    page_size: int = 100
    """Notes per ``resources/list`` page."""
    watcher_options: Mapping[str, Any] | None = None
    """Keyword arguments for the watcher (``step_ms``, ``debounce_ms``, ``polling``, ...)."""
    name: str = "vaultsync"
    """The server's name in ``initialize``."""
    manifest: Manifest | None = None
    """The hardened mode's operator manifest (``vaultsync.hardened.manifest``); None: the plain server."""
    given: Vault | None = None
    """An open vault to serve as reader and writer, left open (tests, embedding); None: opened from
    ``db``/``root``/``vault`` in the lifespan and closed after."""
    oauth: bool = False
    """Served behind an OAuth resource server's gate: tools listed and allowed by the token's scopes."""
    announce: Callable[[ServedVault], object] | None = None
    """Called once the vault is open, before the first request (the command line says what it serves)."""
    await_vault: bool = False
    """A reader (no watcher, no writes) of a vault the database does not hold yet starts anyway: its calls answer
    that the vault is not there yet (``missing``) until a watcher records it (a hosted server's other vaults)."""

    @classmethod
    def of(cls, vault: Vault, **options: Any) -> ServeConfig:
        """Serve the open ``vault`` (kept open) with these options."""
        return cls(given=vault, root=vault.root, vault=vault.name, **options)


class ServedVault:
    """One vault as a server serves it: ``reader``, ``writer``, ``role``, ``watcher`` (while this process
    watches) and ``feed``, opened and stopped together by ``running()``, the server's lifespan."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.reader: Vault | None = None
        self.writer: Vault | None = None
        self.role: WriterRole | None = None
        self.watcher: Watcher | None = None
        """The watcher, while this process is the one watching."""
        self.error: str | None = None
        """Why the watcher could not start, if it could not."""
        self.missing: str | None = None
        """Why the vault is not served yet (``await_vault``: the database does not hold it), None once it is."""
        self.audit: Any = None
        """The audit log its tool calls are recorded in (``hardened.audit.AuditLog``), if the manifest keeps one."""
        self.feed = ChangeFeed(self.reading)
        self._read_lock = threading.Lock()
        self._listings: dict[tuple[Any, ...], list[Any]] = {}
        self._users = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._starting = False

    @property
    def allow_writes(self) -> bool:
        return self.config.allow_writes

    # ------------------------------------------------------------ opening and closing

    def open(self) -> None:
        """Open the vaults and, with ``watch``, take the writer lock or stand by. Errors are VaultsyncErrors
        with a message for the user."""
        cfg = self.config
        need_writer = cfg.allow_writes or cfg.watch
        if cfg.given is not None:
            self.reader, self.writer = cfg.given, cfg.given if need_writer else None
        else:
            self._open_from(cfg, need_writer)
        vault = self.writer or self.reader
        assert vault is not None
        self.role = WriterRole(vault, on_batch=self.on_batch)
        if cfg.watch:
            self.role.stand_by()

    def _open_from(self, cfg: ServeConfig, need_writer: bool) -> None:
        name: str | None
        if need_writer:
            if cfg.root is None:
                raise ConfigError("writes and the watcher need the vault folder", argument="root")
            self.writer = Vault.open(cfg.db, root=cfg.root, name=cfg.vault, lock_command=cfg.lock_command)
            name = self.writer.name
        else:
            name = cfg.vault or (cfg.root.expanduser().resolve().name if cfg.root is not None else None)
        try:
            self.reader = Vault.open(cfg.db, name=name, readonly=True)
        except VaultNotFound as exc:
            # the database exists but does not hold this vault: say how to fill it
            if cfg.root is None:
                raise
            raise VaultNotFound(
                f"{exc}; import it first, or watch the vault folder",
                argument="watch",
                remedy="sync",
                remedy_args={"root": cfg.root},
            ) from None

    def close(self) -> None:
        if self.config.given is None:
            for vault in {id(v): v for v in (self.reader, self.writer) if v is not None}.values():
                vault.close()
        self.reader = self.writer = self.role = None

    def _open_or_await(self) -> bool:
        """``open``, or (``await_vault``) remember that the database does not hold the vault yet: False."""
        try:
            self.open()
        except VaultNotFound as exc:
            if not self.config.await_vault or self.config.watch or self.config.allow_writes:
                raise
            self.missing = str(exc)
            return False
        self.missing = None
        return True

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ServedVault]:
        """The server lifespan: open, follow the batch log, start the watcher (or stand by), and stop
        everything before the event loop ends. Re-entrant: each client of an in-process server
        enters it; the last one out stops everything."""
        self._users += 1
        try:
            if self._users == 1:
                opened = await anyio.to_thread.run_sync(self._open_or_await)
                await self.feed.open(start=opened)
                if self.config.announce is not None:
                    self.config.announce(self)
                self._start_following()
            yield self
        finally:
            self._users -= 1
            if self._users == 0:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._stop_following)
                    self.feed.close()
                    self.close()

    # ------------------------------------------------------------ reading

    @contextlib.contextmanager
    def reading(self) -> Iterator[Vault]:
        """The reader vault, one caller at a time (one SQLite connection)."""
        if self.reader is None:
            if self.missing is not None:
                raise VaultNotFound(self.missing)
            raise ConfigError("the vault is not open: the server is not running")
        with self._read_lock:
            yield self.reader

    def database_answers(self, wait_s: float = 1.0) -> bool:
        """Whether the database answers the reader now (one round trip; a lost connection is opened again first).
        While another request holds the reader longer than ``wait_s``, what the last request learned."""
        vault = self.reader
        if vault is None:
            return False
        if not self._read_lock.acquire(timeout=wait_s):
            return vault.database_unreachable_s() == 0
        try:
            _ = vault.last_batch_id  # a read that reaches the database
            return True
        except Exception:
            return False
        finally:
            self._read_lock.release()

    def currency(self, wait_s: float = 1.0) -> Currency:
        """Whether the vault is current (``live.heartbeat``): from the watcher running here, or from the heartbeat
        the process holding the writer lock published (unknown while the store cannot be asked)."""
        watcher = self.watcher
        if watcher is not None and watcher.running and watcher.vault.lock.held:
            return currency((watcher.beat_facts(), 0.0))
        vault = self.reader
        if vault is None or not self._read_lock.acquire(timeout=wait_s):
            return UNKNOWN
        try:
            return currency(vault.lock.beat())
        except Exception as exc:
            logger.debug("could not read the heartbeat: %s", exc)
            return UNKNOWN
        finally:
            self._read_lock.release()

    def read(self, path: str) -> Note:
        with self.reading() as vault:
            return vault.read(path)

    def listing(
        self, as_of: int | str | None = None, prefix: str = "", valid_at: int | None = None, tag: str | None = None
    ) -> list[Any]:
        """``Vault.ls`` with a small cache: the store is append-only, so a listing stays valid until
        the next batch or purge (``generation`` moves); paging through a big vault lists it once."""
        with self.reading() as vault:
            key = (as_of, prefix, valid_at, tag, vault.generation)
            found = self._listings.get(key)
            if found is None:
                found = vault.ls(as_of=as_of, prefix=prefix, valid_at=valid_at, tag=tag)
                if len(self._listings) >= 4:
                    self._listings.pop(next(iter(self._listings)))
                self._listings[key] = found
            return found

    # ------------------------------------------------------------ writing

    def write(self, path: str, text: str, *, append: bool, expected: str | None = None) -> Note:
        """Write a note and return it as recorded (``WriterRole.write``; ``expected``: the revision it replaces)."""
        if self.role is None:
            self.writing_vault()
        assert self.role is not None
        return self.role.write(path, text, append=append, read=self.read, expected=expected)

    def writing_vault(self) -> Vault:
        """The vault opened for writing, or ConfigError when the server was started without writes."""
        if self.writer is None or self.role is None:
            raise ConfigError("writes are disabled; the server was started without --allow-writes")
        return self.writer

    def on_batch(self, summary: BatchSummary) -> None:
        """After this process wrote a batch: tell subscribers (through the batch log, so each batch once; when the
        reader cannot read it yet, just after the database came back, the next poll tells it)."""
        try:
            self.feed.catch_up()
        except VaultsyncError as exc:
            logger.debug("could not tell batch %s yet: %s", summary.batch_id, exc)

    # ------------------------------------------------------------ following, standing by, watching

    def _start_following(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._follow, name="vaultsync-following", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        """Start the watcher when this process holds the lock (its first catch-up of a big vault takes a
        while; the server answers from the store meanwhile), then follow the batch log every
        ``POLL_S`` and, standing by, try to take the lock over. A vault not in the database yet is looked for
        every ``POLL_S`` first."""
        while self.missing is not None:
            if self._stop.wait(POLL_S):
                return
            try:
                if self._open_or_await():
                    self.feed.start()
                    logger.info("the vault %s is in the database now: serving it", self.config.vault)
            except Exception as exc:  # a busy or vanished database: look again
                logger.debug("could not look for the vault yet: %s", exc)
        role = self.role
        assert role is not None
        if role.holding:
            self._start_watcher(role)
        with self.reading() as vault:
            wakeup = vault.wakeup()  # its own session (PostgreSQL): waiting holds no reader
        while True:
            wakeup.wait(POLL_S, self._stop)  # ends early when the engine announces a commit (PostgreSQL)
            if self._stop.is_set():
                wakeup.close()
                return
            try:
                self.feed.poll()
            except Exception as exc:  # a busy or vanished database: say so, keep serving, look again
                logger.debug("could not look for new batches: %s", exc)
            if role.take_over():
                try:
                    self.feed.catch_up()  # the previous watcher's last batches are told before ours
                except Exception as exc:  # the next poll tells them
                    logger.debug("could not tell the previous watcher's last batches: %s", exc)
                if not self._start_watcher(role):
                    role.back_off(RETRY_FAILED_START_S)

    def _start_watcher(self, role: WriterRole) -> bool:
        """Start the watcher on the held lock (catch-up scan first); on failure free the lock for others."""
        self._starting = True
        try:
            watcher = Watcher(role.vault, on_batch=self.on_batch, role=role, **(self.config.watcher_options or {}))
            watcher.start()  # records what changed while nobody watched
        except Exception as exc:  # reported by vault_status; the server keeps answering from the store
            logger.error("the watcher could not start: %s", exc)
            self.error = str(exc)
            role.release()
            return False
        finally:
            self._starting = False
        self.error = None
        self.watcher = watcher
        if not self._stop.is_set():  # stopping while it started: stop may already have looked
            logger.info("watching %s", role.vault.root)
        return True

    def _stop_following(self) -> None:
        """Stop following, wait for a watcher start in progress, stop the watcher and free the lock."""
        thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join()
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            watcher.stop()
        if self.role is not None:
            self.role.stop()

    def watcher_status(self) -> dict[str, Any]:
        """``vault_status``'s watcher fields: this process's role and watcher, or the other process watching, and
        whether the vault is current (``currency``)."""
        role = self.role
        assert role is not None
        told = self.currency()
        status: dict[str, Any] = {
            "running": False,
            "in_process": False,
            "other_process": None,
            "lag_seconds": told.lag_s,
            "current": told.current,
            "state": told.state,
            "heartbeat_age_seconds": told.heartbeat_age_s,
            **role.status(),
        }
        watcher = self.watcher
        if role.holding and watcher is None:
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
        holder = role.holder()
        if holder is not None:  # what it does and since when: never its pid or command line (in the log)
            status.update(running=True, other_process=public_holder(holder))
        return status

    def describe(self) -> str | None:
        """One line for the operator while this server serves as a reader in standby (None otherwise)."""
        return self.role.describe_standby() if self.role is not None else None

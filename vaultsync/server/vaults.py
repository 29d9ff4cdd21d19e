"""The vaults a server reads and writes: opened once, read one caller at a time, listings cached."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, VaultNotFound
from ..vault import Vault


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
    lock_command: str | None = None
    """How the writer lock file names this server (None: its command line; the hardened mode never
    records argv)."""


class ServedVaults:
    """A reader and, when writes or the watcher need one, a writer over the same vault.

    Reads go through ``reader`` (read-only unless a writer is needed), one at a time; the writer is
    the process's single write path, shared by the watcher and the write tools. Separate SQLite
    connections mean a query never sees a half-applied batch. A ``Vault`` given directly (tests)
    serves as both and is left open.
    """

    def __init__(self, source: Vault | ServeConfig, *, need_writer: bool) -> None:
        self.config = source if isinstance(source, ServeConfig) else None
        self.need_writer = need_writer
        self.reader: Vault | None = None
        self.writer: Vault | None = None
        self._given = source if isinstance(source, Vault) else None
        self._read_lock = threading.Lock()
        self._listings: dict[tuple[Any, ...], list[Any]] = {}

    @property
    def owned(self) -> bool:
        """True when the vaults were opened here (from a ``ServeConfig``) and are closed here."""
        return self._given is None

    def open(self) -> None:
        """Open the vaults (idempotent). Errors are VaultsyncErrors with a message for the user."""
        if self.reader is not None:
            return
        if self._given is not None:
            self.reader = self._given
            self.writer = self._given if self.need_writer else None
            return
        cfg = self.config
        assert cfg is not None
        if self.need_writer:
            if cfg.root is None:
                raise ConfigError("writes and the watcher need the vault folder: vaultsync serve VAULT")
            self.writer = Vault.open(cfg.db, root=cfg.root, name=cfg.vault)
            self.writer.lock.command = cfg.lock_command
            name = self.writer.name
        else:
            name = cfg.vault or (cfg.root.expanduser().resolve().name if cfg.root is not None else None)
        try:
            self.reader = Vault.open(cfg.db, name=name, readonly=True)
        except VaultNotFound as exc:
            # the database exists but does not hold this vault: say how to fill it
            if cfg.root is None:
                raise
            raise VaultNotFound(f"{exc}; import it first (vaultsync import {cfg.root}) or serve with --watch") from None

    def close(self) -> None:
        if self.owned:
            for vault in {id(v): v for v in (self.reader, self.writer) if v is not None}.values():
                vault.close()
        self.reader = self.writer = None

    @contextlib.contextmanager
    def reading(self) -> Iterator[Vault]:
        """The reader vault, one caller at a time (one SQLite connection)."""
        if self.reader is None:
            self.open()
        assert self.reader is not None
        with self._read_lock:
            yield self.reader

    def listing(self, as_of: int | None = None, prefix: str = "", valid_at: int | None = None,
                tag: str | None = None) -> list[Any]:
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

    @property
    def writer_lock(self) -> Any:
        """The vault's writer lock (to ask who holds it), or None before the vaults are open."""
        vault = self.writer or self.reader
        return vault.lock if vault is not None else None

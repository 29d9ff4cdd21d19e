"""The append-only temporal store: SQLite schema, batch writes, as-of reads."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError
from ..times import now_micros
from . import codec
from .db import Database
from .lock import WriterLock
from .schema import MIGRATIONS, migrate, schema_version
from .write import BatchWriter, ChunkRow, Indexer

__all__ = ["BatchWriter", "ChunkRow", "Database", "Indexer", "Store", "WriterLock"]


class Store:
    """One database file holding any number of vaults."""

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False) -> None:
        self.path = str(path)
        self.readonly = readonly
        self.db = Database(path, readonly=readonly)
        version = schema_version(self.db.con)
        try:
            if version > len(MIGRATIONS):
                raise ConfigError(f"{path} was written by a newer vaultsync (schema {version}); upgrade vaultsync")
            if readonly:
                if version == 0:
                    raise ConfigError(f"{path} is not a vaultsync database (or is empty)")
                if version < len(MIGRATIONS):
                    raise ConfigError(f"{path} was written by an older vaultsync (schema {version}); "
                                      "run `vaultsync import VAULT` once to upgrade it")
            else:
                if version == 0 and self.db.scalar("SELECT count(*) FROM sqlite_schema"):
                    raise ConfigError(f"{path} is another program's SQLite database; pass --db a new file")
                migrate(self.db.con)
        except BaseException:
            self.db.close()
            raise
        codec.load(self.db.con)
        self.indexers: list[Indexer] = []

    def close(self) -> None:
        self.db.close()

    def vault_names(self) -> list[str]:
        return [r[0] for r in self.db.query("SELECT name FROM vaults ORDER BY name")]

    def vault(self, name: str) -> tuple[int, str] | None:
        """(id, root) of the vault called ``name``."""
        row = self.db.one("SELECT id, root FROM vaults WHERE name = ?", (name,))
        return None if row is None else (row[0], row[1])

    def ensure_vault(self, name: str, root: Path) -> int:
        found = self.vault(name)
        if found is not None:
            vault_id, known_root = found
            if known_root != str(root):
                with self.db.atomic() as con:
                    con.execute("UPDATE vaults SET root = ? WHERE id = ?", (str(root), vault_id))
            return vault_id
        with self.db.atomic() as con:
            con.execute("INSERT INTO vaults (name, root, created_at) VALUES (?,?,?)", (name, str(root), now_micros()))
            return con.last_insert_rowid()

    def last_known_at(self, vault_id: int) -> int | None:
        return self.db.scalar("SELECT max(known_at) FROM batches WHERE vault_id = ?", (vault_id,))

    def writer_lock(self, vault: str) -> WriterLock:
        return WriterLock(self.path, vault)

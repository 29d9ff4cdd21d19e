"""Opening a vault: which database, which vault in it, and whether the vault folder may be recorded there.

``Vault.open`` calls ``open_vault`` and builds itself from what it returns. A vault is opened for writing by its
folder (``root``; registered in the database if new) or for reading by its name; every refusal is a
``ConfigError`` or ``VaultNotFound`` saying what to choose instead, raised before anything is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..config import default_db_path
from ..disk import vaultfs
from ..dsn import database
from ..errors import ConfigError, VaultNotFound
from ..store import Engine, is_dsn, open_store


def open_vault(
    db_path: str | os.PathLike[str] | None,
    *,
    root: str | os.PathLike[str] | None,
    name: str | None,
    readonly: bool,
    embedder: str | None,
) -> tuple[Engine, str, int, Path]:
    """The opened store, the vault's name, id and folder (see ``Vault.open`` for the arguments); the store is
    closed again when the vault cannot be opened."""
    db: Any = default_db_path() if db_path is None else database(db_path)
    vault_root: Path | None = None
    if root is not None:
        vaultfs.check_root(os.fspath(root))  # before anything touches it: a UNC path sends credentials
        vault_root = Path(root).expanduser().resolve()
        if not vault_root.is_dir():
            raise ConfigError(f"vault folder {root} does not exist or is not a folder")
        if not is_dsn(db) and db.resolve().is_relative_to(vault_root):
            raise ConfigError(
                f"the database {db} must not live inside the vault (sync services corrupt it); "
                "choose a database path elsewhere"
            )
    store = open_store(db, readonly=readonly, embedder=embedder)
    try:
        if vault_root is not None:
            vault_name = name or vault_root.name
            found = store.vault(vault_name)
            if found is not None and found.root != str(vault_root) and Path(found.root).is_dir():
                raise ConfigError(
                    f"a vault named '{vault_name}' already lives at {found.root}; give this one another name",
                    argument="name",
                )
            if readonly:
                if found is None:
                    raise VaultNotFound(f"no vault '{vault_name}' in {db}")
                vault_id = found.id
            else:
                vault_id = store.ensure_vault(vault_name, vault_root)
            return store, vault_name, vault_id, vault_root
        names = [v.name for v in store.vaults()]
        if name is None:
            if len(names) != 1:
                listed = ", ".join(names) if names else "none yet"
                raise ConfigError(f"{db} holds {len(names)} vaults ({listed}); choose one by name", argument="name")
            name = names[0]
        record_ = store.vault(name)
        if record_ is None:
            raise VaultNotFound(f"no vault '{name}' in {db} (known: {', '.join(names) or 'none'})")
    except BaseException:
        store.close()
        raise
    return store, name, record_.id, Path(record_.root)

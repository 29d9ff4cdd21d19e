"""The search side of ``Vault``: the methods ``Vault.search``/``export``/``reindex``/``reembed`` call."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..embed import get_embedder
from ..errors import ConfigError
from . import engine
from .embedding import reembed
from .index import SearchIndexer
from .schema import drop_schema, ensure_schema

if TYPE_CHECKING:
    from ..store import Store
    from ..vault import TimeLike, Vault


def attach(store: Store) -> SearchIndexer:
    """Register the search indexer on a store opened for writing (once)."""
    for indexer in store.indexers:
        if isinstance(indexer, SearchIndexer):
            return indexer
    indexer = SearchIndexer(store.db.con)
    store.indexers.append(indexer)
    return indexer


def search(vault: Vault, query: str, *, as_of: TimeLike = None, valid_at: TimeLike = None, mode: str = "hybrid",
           limit: int = 10, prefix: str | None = None, tags: Sequence[str] | None = None,
           where: dict[str, str] | None = None) -> dict[str, Any]:
    from ..vault import as_micros

    when, at = as_micros(as_of, "--as-of"), as_micros(valid_at, "--valid-at")
    with vault.store.db.atomic() as con:
        result = engine.search(con, vault.id, vault.name, query, as_of=when, valid_at=at, mode=mode, limit=limit,
                               prefix=prefix, tags=tags, where=where)
    return result


def export(vault: Vault, as_of: TimeLike = None, valid_at: TimeLike = None) -> Iterator[dict[str, Any]]:
    from ..vault import as_micros

    when, at = as_micros(as_of, "--as-of"), as_micros(valid_at, "--valid-at")
    with vault.store.db.atomic() as con:
        yield from engine.export(con, vault.id, vault.name, as_of=when, valid_at=at)


def reindex(vault: Vault, *, full: bool = False) -> dict[str, Any]:
    """Index every batch the search index has not seen (``full``: drop and rebuild the whole index)."""
    if vault.store.readonly:
        raise ConfigError("reindex needs the database opened for writing")
    con = vault.store.db.con
    held = vault.lock.held
    vault.lock.acquire()
    try:
        if full:
            vault.store.indexers[:] = [i for i in vault.store.indexers if not isinstance(i, SearchIndexer)]
            drop_schema(con)
        ensure_schema(con)
        indexer = attach(vault.store)
        with vault.store.db.atomic():
            done = indexer.catch_up(con, vault.id)
            if full:  # the index is shared: rebuild the other vaults of the database too
                for (other,) in con.execute("SELECT id FROM vaults WHERE id != ?", (vault.id,)).fetchall():
                    indexer.catch_up(con, other)
    finally:
        if not held:
            vault.lock.release()
    return {"vault": vault.name, "batches_indexed": done, "full": full}


def reembed_vault(vault: Vault, embedder_name: str) -> dict[str, Any]:
    """Replace every vector in the store with those of another embedder (all vaults of the database)."""
    embedder = get_embedder(embedder_name)
    held = vault.lock.held
    vault.lock.acquire()
    try:
        count = reembed(vault.store.db.con, embedder)
        vault.store.indexers[:] = [i for i in vault.store.indexers if not isinstance(i, SearchIndexer)]
        attach(vault.store)
    finally:
        if not held:
            vault.lock.release()
    return {"embedder": embedder.signature, "docs_embedded": count}

"""Copy every vault of one database into another, whatever their engines (``vaultsync copy SRC DST``).

The history goes through the store's contract only, so it works both ways between SQLite and PostgreSQL
(and from one file to another). Each vault is replayed batch by batch, in order, each batch with its own ``known_at``,
source, detail and caller, and within a batch its revisions in the order they were written: new content goes
through the parser again (the same text gives the same chunks, links, title and validity; the destination
embeds with the source's embedder) and renames and deletions are written as such, so every answer at every time
(read, ls, history, changes, export,
search) is the source's. The file states (what lets the next sync skip unchanged files) and the git
commits already imported follow. Into PostgreSQL, each copied vault's search index is built once, after its
batches (``PgStore.deferred_index``, ``pg/bulk.py``: the tables the batch-by-batch indexer would leave).

A purged vault is copied as its history now is (the purged revisions as they were rewritten), followed by
its purge records, verbatim (so the retention horizon, the ``purges`` a view lists and the provenance of
the purge travel with it). The hardened audit log heads of the database follow the vaults, so ``vaultsync
audit verify`` of a log against the copy answers as against the source. These two are rows no batch
writes: they are read and written with the SQL both engines speak (``db.query``, ``db.atomic``: the
PostgreSQL engine runs it through ``pg.compat``), the one place here below the store's contract.

Each vault is copied in one transaction of the destination (its batches are savepoints inside it): a copy
stopped anywhere (killed, the database restarted, the disk full) leaves nothing of the vault it was copying, and
the vaults it had finished whole; run again into a database that does not hold those, or copy them elsewhere.

Refused rather than dropped: a destination that already holds the vault, or a different head for an
audit log the source also has.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..disk.attachments import Body, is_attachment, text_of
from ..errors import ConfigError
from ..parsers import parse_file
from .contract import Change, Engine
from .read import Revision

if TYPE_CHECKING:
    from . import StoredVault


@dataclass(slots=True)
class Copied:
    """What a copy wrote, per vault: batches and revisions."""

    vaults: dict[str, dict[str, int]] = field(default_factory=dict)


def copy_databases(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    progress: Callable[[str, int, int], None] | None = None,
    bulk: bool = True,
) -> Copied:
    """Open the database ``src`` (read-only) and ``dst`` (a file or a ``postgresql://`` URI, created as needed)
    and copy every vault of one into the other."""
    from . import is_dsn, open_store

    source = open_store(src, readonly=True)
    try:
        target = open_store(dst, embedder=_embedder(source))
        try:
            done = copy_database(source, target, progress=progress, bulk=bulk)
            if not is_dsn(dst):  # a SQLite file: one self-contained file, no -wal or -shm beside it
                target.single_file()  # type: ignore[attr-defined]  # the SQLite engine's (not in the contract)
            return done
        finally:
            target.close()
    finally:
        source.close()


def copy_database(
    src: Engine, dst: Engine, *, progress: Callable[[str, int, int], None] | None = None, bulk: bool = True
) -> Copied:
    """Copy every vault of ``src`` (read) into ``dst`` (opened for writing); see the module docstring. ``bulk``
    (PostgreSQL): build each copied vault's search index once, after its batches (False: batch by batch)."""
    done = Copied()
    heads = _audit_heads(src)
    theirs = {h[0]: h for h in _audit_heads(dst)}
    clash = [h[0] for h in heads if h[0] in theirs and theirs[h[0]] != h]
    if clash:
        raise ConfigError(
            f"the destination already has another head for audit log {clash[0]}; copy into a "
            "database that does not hold that log"
        )
    for stored in src.vaults():
        found = dst.vault(stored.name)
        if found is not None and dst.last_batch(found.id) is not None:
            raise ConfigError(
                f"the destination already holds a vault '{stored.name}' with history; copy into a "
                "database (or schema) that does not hold it (other vaults there are kept)"
            )
    deferred = getattr(dst, "deferred_index", None)  # PostgreSQL: each copied vault's index built once, at the end
    atomic = dst.db.atomic  # type: ignore[attr-defined]  # both engines' own database (not in the contract)
    for stored in src.vaults():
        # one transaction a vault (each batch a savepoint in it): stopped anywhere, the copy leaves none of it
        with atomic(), deferred() if deferred is not None and bulk else contextlib.nullcontext():
            done.vaults[stored.name] = _copy_vault(src, dst, stored, progress)
            _copy_purges(src, dst, stored)
    with dst.db.atomic() as con:  # type: ignore[attr-defined]  # both engines' own database (not in the contract)
        for head in heads:
            if head[0] not in theirs:
                con.execute(f"INSERT INTO audit_heads ({HEAD_COLUMNS}) VALUES (?,?,?,?,?)", head)
    return done


PURGE_COLUMNS = (
    "at, command, detail, horizon, revisions_changed, revisions_removed, notes, batches_removed, scrubbed_at"
)
HEAD_COLUMNS = "log_id, path, records, head, updated_at"


def _embedder(engine: Engine) -> str | None:
    """The registry name of the embedder whose vectors ``engine`` keeps (the copy's vectors are made by the
    same one, so vector search and a fusing default mode answer alike; None: no search index)."""
    from .schema import has_table
    from .search.schema import meta

    with engine.db.atomic() as con:  # type: ignore[attr-defined]  # both engines' own database (not in the contract)
        return meta(con, "embedder") if has_table(con, "search_meta") else None


def _audit_heads(engine: Engine) -> list[tuple]:
    from .schema import has_table

    with engine.db.atomic() as con:  # type: ignore[attr-defined]  # both engines' own database (not in the contract)
        if not has_table(con, "audit_heads"):  # an older SQLite database read as it is
            return []
        return [tuple(r) for r in con.execute(f"SELECT {HEAD_COLUMNS} FROM audit_heads ORDER BY log_id")]


def _copy_purges(src: Engine, dst: Engine, stored: StoredVault) -> None:
    """The vault's purge records, oldest first, after its history (see the module docstring)."""
    if not src.purge_count(stored.id):
        return
    db = src.db  # type: ignore[attr-defined]  # both engines' own database (not in the contract)
    rows = db.query(f"SELECT {PURGE_COLUMNS} FROM purges WHERE vault_id = ? ORDER BY id", (stored.id,))
    dst_id = dst.vault(stored.name).id  # type: ignore[union-attr]  # _copy_vault registered it
    with dst.db.atomic() as con:  # type: ignore[attr-defined]  # both engines' own database (not in the contract)
        for row in rows:
            con.execute(f"INSERT INTO purges (vault_id, {PURGE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)", (dst_id, *row))


def _copy_vault(
    src: Engine, dst: Engine, stored: StoredVault, progress: Callable[[str, int, int], None] | None
) -> dict[str, int]:
    from pathlib import Path

    name, src_id = stored.name, stored.id
    dst_id = dst.ensure_vault(name, Path(stored.root))
    ids: dict[int, int] = {}
    """Source revision id → destination revision id."""
    commits = src.git_commits(src_id)
    batches = revisions = 0
    last = 0
    total = src.last_batch_id(src_id)
    while True:
        news = src.batches_after(src_id, last)
        if not news:
            break
        for item in news:
            last = item.batch_id
            info = src.batch_info(src_id, item.batch_id)
            assert info is not None, f"batch {item.batch_id} was listed but is not there"
            written = sorted(src.written_by(src_id, item.batch_id), key=lambda r: r.note_id)
            with src.view(src_id, name) as view:
                texts = {r.note_id: view.content(r) for r in written if not r.deleted}
            with dst.batch(
                dst_id, known_at=info["known_at"], source=info["source"], detail=info["detail"], caller=info["caller"]
            ) as batch:
                for r in written:
                    if r.deleted:
                        batch.add_tombstone(r.path, ids[r.prev_id], renamed_to=r.renamed_to)  # type: ignore[index]  # a tombstone always has a prev_id
                        continue
                    text = texts[r.note_id]
                    prev = None if r.prev_id is None else ids[r.prev_id]
                    change = Change(
                        r.path,
                        r.kind,
                        text,
                        r.content_hash or "",
                        r.size or 0,
                        None,
                        prev if r.kind == "modified" else None,
                        prev,
                        r.renamed_from,
                    )
                    if is_attachment(r.path):  # its bytes first, streamed from the source (``_body``)
                        body = _body(src, src_id, name, r)
                        batch.store_body(body)
                        change.text = text = text_of(r.path, body)
                    batch.add_revision(change, parse_file(text, r.path))
                sha = info["detail"] if info["detail"] in commits else None
                if sha is not None:
                    batch.record_git_commit(sha, info["known_at"])
                    commits.discard(sha)
            copied = sorted(
                dst.written_by(dst_id, batch.batch_id),  # type: ignore[arg-type]  # None: the batch held nothing
                key=lambda r: r.note_id,
            )
            if [(r.path, r.kind) for r in copied] != [(r.path, r.kind) for r in written]:
                raise ConfigError(f"batch {item.batch_id} of vault '{name}' did not copy as it was written")
            ids.update({a.note_id: b.note_id for a, b in zip(written, copied)})
            batches, revisions = batches + 1, revisions + len(written)
            if progress is not None:
                progress(name, item.batch_id, total)
    with dst.batch(dst_id, source="copy") as batch:  # file states and commits that changed nothing: no batch row
        for path, (size, mtime_ns, content_hash) in src.file_states(src_id).items():
            batch.set_file_state(path, size, mtime_ns, content_hash)
        for sha in sorted(commits):
            batch.record_git_commit(sha, 0)
    return {"batches": batches, "revisions": revisions}


def _body(src: Engine, src_id: int, name: str, r: Revision) -> Body:
    """An attachment revision's bytes in the source, to store in the destination: read piece by piece from a view of
    the source each time they are asked for (its hash and size as recorded; ``keep`` False when the source kept
    none)."""
    assert r.content_hash is not None and r.size is not None

    def pieces() -> Iterator[bytes]:
        with src.view(src_id, name) as view:
            yield from view.body(r) or ()

    with src.view(src_id, name) as view:
        kept = view.body(r) is not None
    return Body(r.content_hash, r.size, pieces, keep=kept)

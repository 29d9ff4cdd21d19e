"""Copy every vault of one database into another, whatever their engines (``vaultsync copy SRC DST``).

Only the store's contract is used, so it works both ways between SQLite and PostgreSQL (and from one
file to another). Each vault is replayed batch by batch, in order, each batch with its own ``known_at``,
source, detail and caller, and within a batch its revisions in the order they were written: new content goes
through the parser again (the same text gives the same chunks, links, title and validity) and renames
and deletions are written as such, so every answer at every time (read, ls, history, changes, export,
search) is the source's. The file states (what lets the next sync skip unchanged files) and the git
commits already imported follow.

Not copied, and refused rather than dropped: a vault that has been purged (its purge records and
retention horizon cannot be written through a batch) and a destination that already holds the vault.
Audit log heads are not copied (a hardened server's log is tied to its database: start a new log).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..parsers import parse_note
from .contract import Change, Engine


@dataclass(slots=True)
class Copied:
    """What a copy wrote, per vault: batches and revisions."""

    vaults: dict[str, dict[str, int]] = field(default_factory=dict)


def copy_databases(src: object, dst: object, *, progress: Callable[[str, int, int], None] | None = None) -> Copied:
    """Open the database ``src`` (read-only) and ``dst`` (a file or a ``postgresql://`` URI, created as needed)
    and copy every vault of one into the other."""
    from . import open_store

    source = open_store(src, readonly=True)  # type: ignore[arg-type]
    try:
        target = open_store(dst)  # type: ignore[arg-type]
        try:
            return copy_database(source, target, progress=progress)
        finally:
            target.close()
    finally:
        source.close()


def copy_database(src: Engine, dst: Engine, *, progress: Callable[[str, int, int], None] | None = None) -> Copied:
    """Copy every vault of ``src`` (read) into ``dst`` (opened for writing); see the module docstring."""
    done = Copied()
    for stored in src.vaults():
        if src.purge_count(stored.id):
            raise ConfigError(f"vault '{stored.name}' was purged: its purge records cannot be copied yet")
        found = dst.vault(stored.name)
        if found is not None and dst.last_batch(found.id) is not None:
            raise ConfigError(f"the destination already holds a vault '{stored.name}'; copy into an empty database")
        done.vaults[stored.name] = _copy_vault(src, dst, stored, progress)
    return done


def _copy_vault(src: Engine, dst: Engine, stored: object, progress: Callable[[str, int, int], None] | None
                ) -> dict[str, int]:
    from pathlib import Path

    name, src_id = stored.name, stored.id  # type: ignore[attr-defined]
    dst_id = dst.ensure_vault(name, Path(stored.root))  # type: ignore[attr-defined]
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
            info = src.batch_info(src_id, item.batch_id)  # type: ignore[attr-defined]
            written = sorted(src.written_by(src_id, item.batch_id), key=lambda r: r.note_id)  # type: ignore[attr-defined]
            with src.view(src_id, name) as view:
                texts = {r.note_id: view.content(r) for r in written if not r.deleted}
            with dst.batch(dst_id, known_at=info["known_at"], source=info["source"], detail=info["detail"],
                           caller=info["caller"]) as batch:
                for r in written:
                    if r.deleted:
                        batch.add_tombstone(r.path, ids[r.prev_id], renamed_to=r.renamed_to)  # type: ignore[index]
                        continue
                    text = texts[r.note_id]
                    prev = None if r.prev_id is None else ids[r.prev_id]
                    change = Change(r.path, r.kind, text, r.content_hash or "", r.size or 0, None,
                                    prev if r.kind == "modified" else None, prev, r.renamed_from)
                    batch.add_revision(change, parse_note(text, r.path))
                sha = info["detail"] if info["detail"] in commits else None
                if sha is not None:
                    batch.record_git_commit(sha, info["known_at"])
                    commits.discard(sha)
            copied = sorted(dst.written_by(dst_id, batch.batch_id), key=lambda r: r.note_id)  # type: ignore[attr-defined]
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

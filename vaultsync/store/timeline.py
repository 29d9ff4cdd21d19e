"""The vault's batches over time, and where notes went afterwards: reads for the timeline of ``vaultsync ui``."""

from __future__ import annotations

from collections.abc import Iterable

import apsw

from .read import VISIBLE


def batch_times(con: apsw.Connection, vault_id: int, upto_batch: int) -> list[tuple[int, int, int]]:
    """Every batch up to ``upto_batch`` as ``(batch id, known_at, revisions written)``, oldest first
    (rename tombstones not counted: a rename is one change)."""
    rows = con.execute(
        """SELECT b.id, b.known_at,
                  (SELECT count(*) FROM notes n WHERE n.vault_id = b.vault_id AND n.batch_id = b.id
                     AND NOT (n.kind = 'deleted' AND n.renamed_to IS NOT NULL))
           FROM batches b WHERE b.vault_id = ? AND b.id <= ? ORDER BY b.id""",
        (vault_id, upto_batch),
    ).fetchall()
    return [(i, known_at, count) for i, known_at, count in rows]


def fates(con: apsw.Connection, vault_id: int, after_batch: int, paths: Iterable[str]) -> dict[str, str | None]:
    """For each of ``paths`` (live at ``after_batch``) that a later batch ended: the path the note has
    now (renamed since, following every later rename) or None (deleted since). Paths never ended are
    left out."""
    later: dict[str, list[tuple[int, str | None]]] = {}
    rows = con.execute(
        """SELECT path, batch_id, renamed_to FROM notes WHERE vault_id = ? AND batch_id > ? AND kind = 'deleted'
           ORDER BY batch_id, id""",
        (vault_id, after_batch),
    )
    for path, batch_id, renamed_to in rows:
        later.setdefault(path, []).append((batch_id, renamed_to))
    ends: dict[str, str | None] = {}
    for path in paths:
        if path not in later:
            continue
        current: str | None = path
        since, hops = after_batch, 0
        while current is not None and hops < 10_000:
            end = next(((b, to) for b, to in later.get(current, []) if b > since), None)
            if end is None:
                break
            since, current, hops = end[0], end[1], hops + 1
        ends[path] = current
    return ends


def listing(con: apsw.Connection, vault_id: int, batch: int) -> list[tuple[str, str | None, str | None]]:
    """``(path, title, content hash)`` of every note that existed at ``batch``, by path: ``read.revisions_at``
    without decoding each revision's frontmatter, tags and aliases (most of its cost)."""
    rows = con.execute(
        f"""SELECT n.path, n.title, n.content_hash FROM notes n LEFT JOIN note_ends e ON e.note_id = n.id
            WHERE n.vault_id = :v AND {VISIBLE} ORDER BY n.path""",
        {"v": vault_id, "b": batch},
    ).fetchall()
    return [(path, title, content_hash) for path, title, content_hash in rows]

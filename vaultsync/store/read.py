"""Temporal reads: what the store knew as of a batch cutoff (batch ids grow with known_at per vault)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import apsw

from ..revisions import revision_id, short_revision
from ..times import format_time
from .codec import unpack

HASH_PREFIX = 12
"""How many characters of a content hash ``notes_by_hash`` (``schema.m009_moves``) holds."""

VISIBLE = "n.batch_id <= :b AND n.kind != 'deleted' AND (e.batch_id IS NULL OR e.batch_id > :b)"
"""The one visibility rule: revision ``n`` (joined to its end ``e`` in ``note_ends``) exists at batch ``:b``."""

LATEST = 1 << 62
"""A batch id after every batch: ``VISIBLE`` at it means "exists now"."""

_NOTE_COLUMNS = """n.id, n.path, n.kind, n.prev_id, n.renamed_from, n.renamed_to, n.content_hash, n.size,
    n.title, n.frontmatter, n.tags, n.aliases, n.warnings, n.valid_from, n.valid_to,
    n.batch_id, b.known_at"""


@dataclass(slots=True)
class Revision:
    """One note revision (or tombstone) as stored."""

    note_id: int
    path: str
    kind: str
    prev_id: int | None
    renamed_from: str | None
    renamed_to: str | None
    content_hash: str | None
    size: int | None
    title: str | None
    frontmatter: dict[str, Any] | None
    tags: list[str]
    aliases: list[str]
    links: list[dict[str, Any]]
    """Outgoing links; filled only by ``attach_links`` (reads that need them)."""
    warnings: list[str]
    valid_from: int | None
    valid_to: int | None
    batch_id: int
    known_at: int

    @property
    def deleted(self) -> bool:
        return self.kind == "deleted"

    def summary(self, fields: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The revision as JSON, the one shape every door prints: ``fields`` (default ``HISTORY_FIELDS``,
        what ``history --json`` and the MCP history and change lists give), in that order, each
        always written the same way (times as ``format_time``)."""
        return {name: _JSON_FIELDS[name](self) for name in (fields or HISTORY_FIELDS)}


HISTORY_FIELDS = ("path", "kind", "known_at", "id", "revision", "content_hash", "size", "renamed_from")
"""A revision in ``history --json``, ``note_history`` and ``list_changes``."""
CHANGE_FIELDS = ("path", "kind", "known_at", "renamed_from", "id", "revision", "content_hash", "batch")
"""A revision in ``changes --json``."""
LISTED_FIELDS = ("path", "known_at", "revision", "content_hash", "size", "title")
"""A note in ``ls --json`` (``list_notes`` adds ``tags``)."""

_JSON_FIELDS: dict[str, Any] = {
    "path": lambda r: r.path,
    "kind": lambda r: r.kind,
    "known_at": lambda r: format_time(r.known_at),
    "content_hash": lambda r: r.content_hash,
    "id": revision_id,
    "revision": lambda r: short_revision(r.content_hash),
    "batch": lambda r: r.batch_id,
    "size": lambda r: r.size,
    "renamed_from": lambda r: r.renamed_from,
    "renamed_to": lambda r: r.renamed_to,
    "title": lambda r: r.title,
    "tags": lambda r: r.tags,
}
"""How each JSON field of a revision is written (the one place)."""


def _revision(row: tuple) -> Revision:
    (
        note_id,
        path,
        kind,
        prev_id,
        renamed_from,
        renamed_to,
        content_hash,
        size,
        title,
        frontmatter,
        tags,
        aliases,
        warnings,
        valid_from,
        valid_to,
        batch_id,
        known_at,
    ) = row
    return Revision(
        note_id,
        path,
        kind,
        prev_id,
        renamed_from,
        renamed_to,
        content_hash,
        size,
        title,
        json.loads(frontmatter) if frontmatter else None,
        json.loads(tags) if tags else [],
        json.loads(aliases) if aliases else [],
        [],
        json.loads(warnings) if warnings else [],
        valid_from,
        valid_to,
        batch_id,
        known_at,
    )


def cutoff(con: apsw.Connection, vault_id: int, as_of: int | None) -> int:
    """The last batch id of the vault with known_at <= as_of (0 when none); None means now."""
    if as_of is None:
        row = con.execute("SELECT max(id) FROM batches WHERE vault_id = ?", (vault_id,)).fetchone()
    else:
        row = con.execute(
            "SELECT max(id) FROM batches WHERE vault_id = ? AND known_at <= ?", (vault_id, as_of)
        ).fetchone()
    return row[0] or 0


def revision_at(con: apsw.Connection, vault_id: int, path: str, batch: int) -> Revision | None:
    """The latest revision (possibly a tombstone) of ``path`` at or before ``batch``."""
    row = con.execute(
        f"""SELECT {_NOTE_COLUMNS} FROM notes n JOIN batches b ON b.id = n.batch_id
            WHERE n.vault_id = ? AND n.path = ? AND n.batch_id <= ?
            ORDER BY n.batch_id DESC, n.id DESC LIMIT 1""",
        (vault_id, path, batch),
    ).fetchone()
    return None if row is None else _revision(row)


def revision_by_id(con: apsw.Connection, note_id: int) -> Revision | None:
    row = con.execute(
        f"SELECT {_NOTE_COLUMNS} FROM notes n JOIN batches b ON b.id = n.batch_id WHERE n.id = ?", (note_id,)
    ).fetchone()
    return None if row is None else _revision(row)


def valid(revision: Revision, at: int) -> bool:
    """Whether ``revision``'s validity interval (half-open; open ends unbounded) contains ``at``."""
    return (revision.valid_from is None or revision.valid_from <= at) and (
        revision.valid_to is None or at < revision.valid_to
    )


def effective(con: apsw.Connection, revision: Revision | None, at: int) -> Revision | None:
    """The revision that applies at validity time ``at`` when ``revision`` is the one visible: itself if
    valid then, else the newest earlier revision at the same path (since the note last appeared there)
    that is; None when none is. The interval overlay of ``search.snapshot.take``, for one note."""
    while revision is not None and not revision.deleted:
        if valid(revision, at):
            return revision
        if revision.prev_id is None:
            return None
        earlier = revision_by_id(con, revision.prev_id)
        if earlier is None or earlier.path != revision.path:
            return None
        revision = earlier
    return None


def revisions_at(con: apsw.Connection, vault_id: int, batch: int, prefix: str = "") -> list[Revision]:
    """Every note that existed at ``batch``, by path."""
    rows = con.execute(
        f"""SELECT {_NOTE_COLUMNS} FROM notes n JOIN batches b ON b.id = n.batch_id
            LEFT JOIN note_ends e ON e.note_id = n.id
            WHERE n.vault_id = :v AND {VISIBLE} AND substr(n.path, 1, :n) = :p
            ORDER BY n.path""",
        {"v": vault_id, "b": batch, "n": len(prefix), "p": prefix},
    ).fetchall()
    return [_revision(r) for r in rows]


def revisions_of_path(
    con: apsw.Connection, vault_id: int, path: str, before_batch: int | None = None
) -> list[Revision]:
    """All revisions ever stored at ``path`` (up to and including ``before_batch``), oldest first."""
    rows = con.execute(
        f"""SELECT {_NOTE_COLUMNS} FROM notes n JOIN batches b ON b.id = n.batch_id
            WHERE n.vault_id = ? AND n.path = ? AND n.batch_id <= ? ORDER BY n.batch_id, n.id""",
        (vault_id, path, before_batch if before_batch is not None else LATEST),
    ).fetchall()
    return [_revision(r) for r in rows]


_BETWEEN = """n.vault_id = ? AND n.batch_id > ? AND n.batch_id <= ?
              AND NOT (n.kind = 'deleted' AND n.renamed_to IS NOT NULL)"""


def revisions_between(
    con: apsw.Connection, vault_id: int, after_batch: int, upto_batch: int, limit: int | None = None
) -> list[Revision]:
    """Revisions written in batches ``after_batch < id <= upto_batch``, in order (the first ``limit``);
    rename tombstones left out."""
    rows = con.execute(
        f"""SELECT {_NOTE_COLUMNS} FROM notes n JOIN batches b ON b.id = n.batch_id
            WHERE {_BETWEEN} ORDER BY n.batch_id, n.path LIMIT ?""",
        (vault_id, after_batch, upto_batch, -1 if limit is None else limit),
    ).fetchall()
    return [_revision(r) for r in rows]


@dataclass(frozen=True, slots=True)
class BatchNews:
    """What one batch touched, for telling subscribers: its paths, and whether the note list changed."""

    batch_id: int
    paths: tuple[str, ...]
    """Every path the batch wrote a revision for (a rename: old and new path)."""
    listed: bool
    """True when a note appeared, disappeared or moved (the listing changed)."""


def batches_after(con: apsw.Connection, vault_id: int, after_batch: int, limit: int) -> list[BatchNews]:
    """The vault's batches with ``id > after_batch``, oldest first, at most ``limit`` of them."""
    ids = [
        r[0]
        for r in con.execute(
            "SELECT id FROM batches WHERE vault_id = ? AND id > ? ORDER BY id LIMIT ?", (vault_id, after_batch, limit)
        )
    ]
    if not ids:
        return []
    found: dict[int, tuple[list[str], bool]] = {i: ([], False) for i in ids}
    rows = con.execute(
        "SELECT batch_id, path, kind FROM notes WHERE vault_id = ? AND batch_id BETWEEN ? AND ? "
        "ORDER BY batch_id, path",
        (vault_id, ids[0], ids[-1]),
    )
    for batch_id, path, kind in rows:
        paths, listed = found[batch_id]
        paths.append(path)
        found[batch_id] = (paths, listed or kind != "modified")
    return [BatchNews(i, tuple(found[i][0]), found[i][1]) for i in ids]


def kinds_between(con: apsw.Connection, vault_id: int, after_batch: int, upto_batch: int) -> dict[str, int]:
    """How many revisions of each kind ``revisions_between`` holds (counted, not loaded)."""
    rows = con.execute(
        f"SELECT n.kind, count(*) FROM notes n WHERE {_BETWEEN} GROUP BY n.kind", (vault_id, after_batch, upto_batch)
    ).fetchall()
    return {kind: count for kind, count in rows}


def text(con: apsw.Connection, text_id: int) -> str:
    return unpack(con.execute("SELECT body FROM texts WHERE id = ?", (text_id,)).fetchone()[0])


def content(con: apsw.Connection, note_id: int) -> str:
    """A revision's exact text: its chunks joined in order (an attachment's name chunk is not its text: a file
    without text has none)."""
    rows = con.execute(
        "SELECT t.body FROM chunks c JOIN texts t ON t.id = c.text_id WHERE c.note_id = ? AND c.kind != 'name' "
        "ORDER BY c.ord",
        (note_id,),
    ).fetchall()
    return "".join(unpack(r[0]) for r in rows)


def contents(con: apsw.Connection, note_ids: list[int]) -> dict[int, str]:
    """Several revisions' exact texts in one query (``content`` of each): what reads many at once, such as
    ``check``, asks instead of one query a revision."""
    parts: dict[int, list[str]] = {note_id: [] for note_id in note_ids}
    rows = con.execute(
        """SELECT c.note_id, t.body FROM chunks c JOIN texts t ON t.id = c.text_id
           WHERE c.note_id IN (SELECT value FROM json_each(?)) AND c.kind != 'name' ORDER BY c.note_id, c.ord""",
        (json.dumps(note_ids),),
    ).fetchall()
    for note_id, body in rows:
        parts[note_id].append(unpack(body))
    return {note_id: "".join(texts) for note_id, texts in parts.items()}


def attach_links(con: apsw.Connection, revisions: list[Revision]) -> list[Revision]:
    """Fill each revision's ``links`` from its chunks' stored link lists (absolute lines again)."""
    by_id = {r.note_id: r for r in revisions}
    if not by_id:
        return revisions
    for r in revisions:
        r.links = []
    rows = con.execute(
        """SELECT c.note_id, c.line_start, b.body FROM chunks c JOIN blobs b ON b.id = c.links_id
           WHERE c.note_id IN (SELECT value FROM json_each(?)) AND c.kind != 'name' ORDER BY c.note_id, c.ord""",
        (json.dumps(list(by_id)),),
    ).fetchall()
    for note_id, line_start, body in rows:
        for link in json.loads(unpack(body)):
            link["line"] += line_start - 1
            by_id[note_id].links.append(link)
    return revisions


def current_state(con: apsw.Connection, vault_id: int, paths: list[str] | None = None) -> dict[str, tuple[int, str]]:
    """Path → (live revision id, content hash) for every note that exists now (or for those of ``paths``)."""
    if paths is None:
        rows = con.execute(
            f"""SELECT n.path, n.id, n.content_hash FROM notes n LEFT JOIN note_ends e ON e.note_id = n.id
                WHERE n.vault_id = :v AND {VISIBLE}""",
            {"v": vault_id, "b": LATEST},
        ).fetchall()
    else:  # one index probe per path (notes_by_path), whatever the vault's size: CROSS JOIN keeps the
        # paths the outer loop (a plain JOIN lets the planner scan the vault's notes instead)
        rows = con.execute(
            f"""SELECT n.path, n.id, n.content_hash FROM json_each(:paths) j
                CROSS JOIN notes n ON n.vault_id = :v AND n.path = j.value LEFT JOIN note_ends e ON e.note_id = n.id
                WHERE {VISIBLE}""",
            {"v": vault_id, "b": LATEST, "paths": json.dumps(paths)},
        ).fetchall()
    return {path: (note_id, content_hash) for path, note_id, content_hash in rows}


def live_with_hashes(con: apsw.Connection, vault_id: int, hashes: list[str]) -> dict[str, tuple[int, str]]:
    """Path → (live revision id, content hash) of the notes that exist now with one of ``hashes``: an index
    probe per hash (``notes_by_hash``, on a prefix of it), whatever the vault's size."""
    rows = con.execute(
        f"""SELECT n.path, n.id, n.content_hash FROM json_each(:hashes) j
            CROSS JOIN notes n INDEXED BY notes_by_hash ON n.vault_id = :v
                                AND substr(n.content_hash, 1, {HASH_PREFIX}) = substr(j.value, 1, {HASH_PREFIX})
            LEFT JOIN note_ends e ON e.note_id = n.id
            WHERE n.content_hash = j.value AND {VISIBLE}""",
        {"v": vault_id, "b": LATEST, "hashes": json.dumps(sorted(hashes))},
    ).fetchall()
    return {path: (note_id, content_hash) for path, note_id, content_hash in rows}


def live_under(con: apsw.Connection, vault_id: int, folders: list[str]) -> list[str]:
    """The live notes below any of ``folders`` (vault-relative, no trailing slash), by path.

    ``folder/`` .. ``folder0`` is exactly the range of paths starting with ``folder/`` ('0' follows
    '/'), so each folder is one index range (notes_by_path), not a scan of the vault.
    """
    rows = con.execute(
        f"""SELECT DISTINCT n.path FROM json_each(:folders) j
            CROSS JOIN notes n ON n.vault_id = :v AND n.path > j.value || '/' AND n.path < j.value || '0'
            LEFT JOIN note_ends e ON e.note_id = n.id
            WHERE {VISIBLE} ORDER BY n.path""",
        {"v": vault_id, "b": LATEST, "folders": json.dumps(folders)},
    ).fetchall()
    return [r[0] for r in rows]


def file_stamp(size: int, mtime_ns: int) -> int:
    """One exact int for a file's (size, mtime_ns): what a full scan compares, compactly (``live_index``)."""
    return (size << 64) | (mtime_ns & 0xFFFF_FFFF_FFFF_FFFF)


UNSTAMPED = -1
"""``live_index`` value of a live note with no usable file state: it must be read."""


def live_index(con: apsw.Connection, vault_id: int) -> dict[str, int]:
    """Path → ``file_stamp`` of every live note whose file, as last read, had its live content.

    A live note without such a file state (never read from disk, or read with other content) maps
    to ``UNSTAMPED``. One small int per note: 12 MB for a 65,710-note vault.
    """
    rows = con.execute(
        f"""SELECT n.path, f.size, f.mtime_ns FROM notes n LEFT JOIN note_ends e ON e.note_id = n.id
            LEFT JOIN file_state f ON f.vault_id = n.vault_id AND f.path = n.path
                                  AND f.content_hash = n.content_hash
            WHERE n.vault_id = :v AND {VISIBLE}""",
        {"v": vault_id, "b": LATEST},
    )
    return {path: UNSTAMPED if size is None else file_stamp(size, mtime_ns) for path, size, mtime_ns in rows}


def file_states(con: apsw.Connection, vault_id: int, paths: list[str] | None = None) -> dict[str, tuple[int, int, str]]:
    """Path → (size, mtime_ns, content hash) as last read from disk (of ``paths`` only, when given)."""
    if paths is None:
        rows = con.execute(
            "SELECT path, size, mtime_ns, content_hash FROM file_state WHERE vault_id = ?", (vault_id,)
        ).fetchall()
    else:
        rows = con.execute(
            """SELECT f.path, f.size, f.mtime_ns, f.content_hash FROM json_each(?) j
               CROSS JOIN file_state f ON f.vault_id = ? AND f.path = j.value""",
            (json.dumps(paths), vault_id),
        ).fetchall()
    return {path: (size, mtime_ns, h) for path, size, mtime_ns, h in rows}

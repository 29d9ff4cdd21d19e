"""What is visible at a cutoff: the batch, the validity overlay, filters, and the exported chunks."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw

from ...embed.tokenizer import indexed_text
from ...search_filter import SearchFilter
from ...times import format_time, now_micros
from ..codec import unpack
from ..read import VISIBLE, cutoff


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The chunks a query may see: revisions visible at ``batch``, with the validity overlay at ``valid_at``."""

    vault_id: int
    batch: int
    latest: bool
    as_of: int | None
    valid_at: int
    removed: frozenset[int] = field(default_factory=frozenset)
    """Visible revisions whose validity interval excludes ``valid_at``."""
    added: frozenset[int] = field(default_factory=frozenset)
    """Earlier revisions of the same path that apply at ``valid_at`` instead."""

    @property
    def live(self) -> bool:
        """True when the visible set is exactly the current chunks (the live index applies)."""
        return self.latest and not self.removed and not self.added


def _valid(valid_from: int | None, valid_to: int | None, at: int) -> bool:
    return (valid_from is None or valid_from <= at) and (valid_to is None or at < valid_to)


def take(
    con: apsw.Connection,
    vault_id: int,
    as_of: int | None,
    valid_at: int | None,
    *,
    bounded: Sequence[int] | None = None,
    batch: int | None = None,
) -> Snapshot:
    """The snapshot at knowledge cutoff ``as_of`` (None: now) and validity time ``valid_at``
    (None: the cutoff, or now). ``bounded`` lists the visible revisions that declare validity;
    by default they are found through the search index's ``search_bounded`` table. ``batch``: the cutoff's
    batch when the caller knows it exactly (a revision id's), else the last batch known at ``as_of``.
    """
    batch = cutoff(con, vault_id, as_of) if batch is None else batch
    last = cutoff(con, vault_id, None)
    at = valid_at if valid_at is not None else (as_of if as_of is not None else now_micros())
    if bounded is None:
        bounded = [
            r[0]
            for r in con.execute(
                f"""SELECT n.id FROM search_bounded s JOIN notes n ON n.id = s.note_id
                LEFT JOIN note_ends e ON e.note_id = n.id WHERE s.vault_id = :v AND {VISIBLE}""",
                {"v": vault_id, "b": batch},
            )
        ]
    removed: set[int] = set()
    added: set[int] = set()
    for note_id in bounded:
        path, valid_from, valid_to, prev_id = con.execute(
            "SELECT path, valid_from, valid_to, prev_id FROM notes WHERE id = ?", (note_id,)
        ).fetchone()
        if _valid(valid_from, valid_to, at):
            continue
        removed.add(note_id)
        # an interval overlay: outside its interval, the revision it replaced (same path) applies
        while prev_id is not None:
            row = con.execute(
                "SELECT path, valid_from, valid_to, prev_id, kind FROM notes WHERE id = ?", (prev_id,)
            ).fetchone()
            if row is None or row[0] != path or row[4] == "deleted":
                break
            if _valid(row[1], row[2], at):
                added.add(prev_id)
                break
            prev_id = row[3]
    return Snapshot(vault_id, batch, batch == last, as_of, at, frozenset(removed), frozenset(added))


def bounded_from_core(con: apsw.Connection, vault_id: int, batch: int) -> list[int]:
    """Visible revisions declaring validity, read from the revision tables alone (no search index)."""
    return [
        r[0]
        for r in con.execute(
            f"""SELECT n.id FROM notes n LEFT JOIN note_ends e ON e.note_id = n.id
            WHERE n.vault_id = :v AND {VISIBLE} AND (n.valid_from IS NOT NULL OR n.valid_to IS NOT NULL)""",
            {"v": vault_id, "b": batch},
        )
    ]


def _ids(values: Sequence[int] | frozenset[int] | set[int]) -> str:
    return json.dumps(sorted(values))


def visible_notes(con: apsw.Connection, snap: Snapshot, prefix: str = "") -> list[tuple]:
    """(id, path, tags JSON, frontmatter JSON) of every note revision visible in the snapshot."""
    params = {
        "v": snap.vault_id,
        "b": snap.batch,
        "rm": _ids(snap.removed),
        "add": _ids(snap.added),
        "n": len(prefix),
        "p": prefix,
    }
    return con.execute(
        f"""SELECT n.id, n.path, n.tags, n.frontmatter FROM notes n LEFT JOIN note_ends e ON e.note_id = n.id
            WHERE n.vault_id = :v AND {VISIBLE} AND substr(n.path, 1, :n) = :p
              AND n.id NOT IN (SELECT value FROM json_each(:rm))
            UNION ALL
            SELECT n.id, n.path, n.tags, n.frontmatter FROM notes n
            WHERE n.id IN (SELECT value FROM json_each(:add)) AND substr(n.path, 1, :n) = :p""",
        params,
    ).fetchall()


def allowed_notes(con: apsw.Connection, snap: Snapshot, filters: SearchFilter | None) -> set[int] | None:
    """The visible revisions ``filters`` admit (None: no filter, every one). Each condition is read from the
    revision visible in the snapshot (its path, tags and frontmatter then), never from a later one."""
    if not filters:
        return None
    rows = visible_notes(con, snap, filters.prefix or "")
    return {note_id for note_id, path, tags_json, fm_json in rows if filters.admits(path, tags_json, fm_json)}


DOCS_PARAM = "SELECT value FROM json_each(:docs)"


def rows_source(snap: Snapshot, allowed: set[int] | None, *, docs: str | None = None) -> tuple[str, dict[str, Any]]:
    """SQL selecting ``(id, doc_id, note_id)`` of the visible chunk rows (of allowed notes, if given).

    With ``docs`` (SQL selecting one column ``value``, e.g. ``DOCS_PARAM``), only rows using those docs,
    looked up by doc.
    """
    if allowed is not None:
        sql = "SELECT id, doc_id, note_id FROM search_rows WHERE note_id IN (SELECT value FROM json_each(:allowed))"
        if docs:
            sql += f" AND doc_id IN ({docs})"
        return sql, {"allowed": _ids(allowed)}
    if docs:
        head = (
            f"SELECT r.id, r.doc_id, r.note_id FROM ({docs}) j "
            "JOIN search_rows r INDEXED BY search_rows_by_doc ON r.doc_id = j.value WHERE r.vault_id = :v"
        )
    elif snap.live:
        head = "SELECT r.id, r.doc_id, r.note_id FROM search_rows r INDEXED BY search_rows_live WHERE r.vault_id = :v"
    else:
        head = "SELECT r.id, r.doc_id, r.note_id FROM search_rows r INDEXED BY search_rows_at WHERE r.vault_id = :v"
    params: dict[str, Any] = {"v": snap.vault_id}
    if snap.live:
        return head + " AND r.died IS NULL", params
    sql = head + " AND r.born <= :b AND (r.died IS NULL OR r.died > :b)"
    params["b"] = snap.batch
    if snap.removed:
        sql += " AND r.note_id NOT IN (SELECT value FROM json_each(:rm))"
        params["rm"] = _ids(snap.removed)
    if snap.added:
        sql += (
            " UNION ALL SELECT id, doc_id, note_id FROM search_rows"
            " WHERE note_id IN (SELECT value FROM json_each(:add))"
        )
        if docs:
            sql += f" AND doc_id IN ({docs})"
        params["add"] = _ids(snap.added)
    return sql, params


# ---------------------------------------------------------------- export

CHUNK_COLUMNS = """n.id, n.path, n.title, n.aliases, n.content_hash, b.known_at, c.id, c.ord, c.chunk_id,
    c.heading_path, c.line_start, c.line_end, c.kind, t.body"""


def chunk_record(row: tuple) -> dict[str, Any]:
    (
        note_id,
        path,
        title,
        aliases,
        content_hash,
        known_at,
        row_id,
        ord_,
        chunk_id,
        heading_path,
        line_start,
        line_end,
        kind,
        body,
    ) = row
    heading = json.loads(heading_path)
    text = unpack(body)
    return {
        "path": path,
        "chunk_id": chunk_id,
        "ord": ord_,
        "heading_path": heading,
        "lines": [line_start, line_end],
        "kind": kind,
        "title": title,
        "known_at": format_time(known_at),
        "content_hash": content_hash,
        "indexed_text": indexed_text(title, json.loads(aliases or "[]"), heading, text),
        "text": text,
        "_row": row_id,
        "_note": note_id,
    }


def export_rows(con: apsw.Connection, snap: Snapshot) -> Iterator[dict[str, Any]]:
    """Every chunk visible in the snapshot, by path then position, read from the revision tables alone."""
    params = {"v": snap.vault_id, "b": snap.batch, "rm": _ids(snap.removed), "add": _ids(snap.added)}
    rows = con.execute(
        f"""SELECT {CHUNK_COLUMNS} FROM notes n JOIN batches b ON b.id = n.batch_id
              LEFT JOIN note_ends e ON e.note_id = n.id
              JOIN chunks c ON c.note_id = n.id JOIN texts t ON t.id = c.text_id
            WHERE n.vault_id = :v AND (({VISIBLE} AND n.id NOT IN (SELECT value FROM json_each(:rm)))
                  OR n.id IN (SELECT value FROM json_each(:add)))
            ORDER BY n.path, c.ord""",
        params,
    )
    for row in rows:
        yield chunk_record(row)

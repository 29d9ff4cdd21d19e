"""The one write path: a batch of note revisions and tombstones appended in one transaction
(the SQLite ``Batch`` of ``store.contract``)."""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw

from ..disk.attachments import Body
from ..parsers import ParsedNote
from ..parsers.attachment import is_pdf
from ..times import next_stamp, now_micros
from . import codec, files
from .contract import AheadWork, Change, Indexer

DICTIONARY_SAMPLE = 1024
"""A database without a compression dictionary trains one from up to this many of a batch's first notes."""
HELD_CHARS = 16_000_000
"""The dictionary is trained sooner once the revisions held for it pass this much text (a batch of large
notes is not held whole in memory)."""


IN_CHUNK = 512
"""Hashes looked up in one ``IN (...)`` statement (far below SQLite's limit on parameters)."""


def padded(values: list[Any]) -> list[Any]:
    """``values`` repeated at the end up to the next power of two: an ``IN (?, ...)`` lookup then comes in a
    few lengths only, each prepared once and kept in the connection's statement cache."""
    size = 1 << max(len(values) - 1, 0).bit_length()
    return values + values[-1:] * (size - len(values))


def by_hash(con: Any, table: str, columns: str, keys: list[bytes]) -> dict[bytes, tuple]:
    """hash → ``columns`` of the rows of ``table`` whose ``hash`` is one of ``keys``: one ``IN`` lookup per
    ``IN_CHUNK`` distinct hashes, not one statement per key."""
    found: dict[bytes, tuple] = {}
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), IN_CHUNK):
        part = padded(unique[start : start + IN_CHUNK])
        for key, *values in con.execute(
            f"SELECT hash, {columns} FROM {table} WHERE hash IN ({','.join('?' * len(part))})", part
        ):
            found[bytes(key)] = tuple(values)
    return found


def insert_rows(con: Any, sql: str, rows: list[tuple]) -> list[int]:
    """Run ``sql`` (an INSERT of one row) for each of ``rows`` and return the new rows' ids, in order: the engine's
    own ``insert_many`` where it has one (PostgreSQL: the statements sent together, not one round trip each), else
    one statement each, as the ids come (``last_insert_rowid``)."""
    many = getattr(con, "insert_many", None)
    if many is not None:
        return list(many(sql, rows))
    ids = []
    for row in rows:
        con.execute(sql, row)
        ids.append(con.last_insert_rowid())
    return ids


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def dumps(value: Any) -> str:
    """Compact JSON (one encoder made once: ``json.dumps`` with options builds a new one per call)."""
    return _ENCODER.encode(value)


_STRING = json.encoder.encode_basestring  # what the encoder uses for a str (no ensure_ascii)


def dumps_strings(values: Sequence[str]) -> str:
    """``dumps`` of a list of strings (tags, aliases, a heading path), the same text: each string through the
    encoder's own string function, without the encoder's per-call work (a chunk's heading path is one each)."""
    if all(type(value) is str for value in values):
        return "[" + ",".join(map(_STRING, values)) + "]"
    return dumps(list(values))


@dataclass(slots=True)
class ChunkRow:
    """A chunk revision as written, handed to indexers inside the batch's transaction."""

    row_id: int
    note_id: int
    path: str
    chunk_id: str
    text_id: int
    text: str
    heading_path: tuple[str, ...]
    title: str
    aliases: tuple[str, ...]


@dataclass
class BatchWriter:
    """Collects one batch inside an open transaction. The batch row is created on first change.

    While the database has no compression dictionary, the first ``DICTIONARY_SAMPLE`` revisions (at most
    ``HELD_CHARS`` of text) are held back, a dictionary is trained from their texts, and then they are
    written (``finish`` writes what is still held when the batch is smaller).
    """

    con: apsw.Connection
    vault_id: int
    known_at: int
    source: str
    detail: str | None = None
    caller: str | None = None
    """The MCP caller the batch is done for (``vaultsync.write_caller``), None for every other door."""
    indexers: list[Indexer] = field(default_factory=list)
    batch_id: int | None = None
    text_dict: bytes | None = None
    """Key of the dictionary new chunk texts are compressed with (see ``codec``)."""
    counts: dict[str, int] = field(default_factory=lambda: {"created": 0, "modified": 0, "renamed": 0, "deleted": 0})
    at_commit: bool = False
    """``known_at`` is taken by ``stamp`` as the batch commits (the time it becomes visible), not given: until
    then it is only a lower bound. False: a ``known_at`` the caller asserted (``--known-at``, a git commit's time,
    a copied batch), written as it is."""
    restamp: Callable[[Any, int, Callable[[], int]], None] | None = None
    """How the engine sets the time ``(con, batch_id, take_time)`` on the batch row written at the first change
    (PostgreSQL, whose foreign keys are checked at once), calling ``take_time`` as late as it can. None: the row
    itself waits for ``stamp``, so it is written once, with its final time (SQLite: the engine leaves foreign keys
    unchecked in the batch's transaction, ``Database.atomic``; nested in another transaction they are checked at
    its commit, ``PRAGMA defer_foreign_keys``)."""
    created_at: int | None = None
    """When the batch's first change was written (``batches.created_at``: information only)."""

    def _batch(self) -> int:
        if self.batch_id is None:
            self.created_at = now_micros()
            if self.at_commit and self.restamp is None:  # its row is written by ``stamp``, just before commit
                if self.con.execute("PRAGMA foreign_keys").fetchone()[0]:  # (a batch nested in a transaction)
                    self.con.execute("PRAGMA defer_foreign_keys = ON")  # checked at commit (reset by SQLite then)
                row = self.con.execute("SELECT coalesce(max(id), 0) + 1 FROM batches").fetchone()
                self.batch_id = int(row[0])  # what SQLite gives a new row (no AUTOINCREMENT)
                return self.batch_id
            self._insert_row()
        assert self.batch_id is not None
        return self.batch_id

    def _insert_row(self) -> None:
        if self.batch_id is None:
            self.con.execute(
                "INSERT INTO batches (vault_id, known_at, source, detail, caller, created_at) VALUES (?,?,?,?,?,?)",
                (self.vault_id, self.known_at, self.source, self.detail, self.caller, self.created_at),
            )
            self.batch_id = self.con.last_insert_rowid()
        else:
            self.con.execute(
                "INSERT INTO batches (id, vault_id, known_at, source, detail, caller, created_at) "
                "VALUES (?,?,?,?,?,?,?)",
                (self.batch_id, self.vault_id, self.known_at, self.source, self.detail, self.caller, self.created_at),
            )

    def stamp(self) -> None:
        """Take the batch's ``known_at`` now, as it commits (engines call this last, after ``finish``, just before
        the commit): the moment its revisions become visible, strictly after the vault's last batch whatever the
        wall clock does (stepped back, or two batches in one microsecond). Nothing to do for a batch that wrote
        nothing or whose time was asserted.

        The window left between this time and the commit's visibility is the commit itself: SQLite's pages are
        flushed into the write-ahead log first (``cache_flush``), so only the batch row's page and the commit
        record remain; PostgreSQL's commit is the flush of its commit record."""
        if self.batch_id is None or not self.at_commit:
            return
        flush = getattr(self.con, "cache_flush", None)
        if flush is not None:  # SQLite: do the commit's work now, not after the stamp
            self.con.execute("SAVEPOINT stamp; RELEASE stamp")  # FTS5 writes the terms it holds in memory
            flush()  # and the pages the batch changed go to the write-ahead log
        row = self.con.execute(
            "SELECT known_at FROM batches WHERE vault_id = ? AND id <> ? ORDER BY known_at DESC LIMIT 1",
            (self.vault_id, self.batch_id),
        ).fetchone()
        last = None if row is None else int(row[0])

        def take_time() -> int:
            self.known_at = next_stamp(last)
            return self.known_at

        if self.restamp is not None:
            self.restamp(self.con, self.batch_id, take_time)
        else:
            take_time()
            self._insert_row()

    _held: list[tuple[Change, ParsedNote]] | None = None
    """Revisions held back to train the dictionary from (None: not holding)."""

    def __post_init__(self) -> None:
        self.text_dict = codec.load(self.con)
        if self.text_dict is None:
            self._held = []

    def _train_dictionary(self) -> None:
        """Train the database's dictionary from the held revisions' texts (none when they are too few to
        train on), then write them."""
        held, self._held = self._held or [], None
        trained = codec.train([change.text for change, _ in held if not is_pdf(change.path)])  # a PDF's: its bytes
        if trained is not None:
            self.con.execute("INSERT INTO dictionaries (hash, body) VALUES (?, ?)", (codec.key_of(trained), trained))
            self.text_dict = codec.register(trained)
        for change, parsed in held:
            self._write_revision(change, parsed)

    def finish(self) -> None:
        """Write whatever is still held back, here and by the indexers (the engine calls this before the batch
        commits)."""
        if self._held is not None:
            self._train_dictionary()
        for indexer in self.indexers:
            flush = getattr(indexer, "flush", None)
            if flush is not None:
                flush(self.con)

    # ------------------------------------------------------------ parse workers' pre-work

    def ahead(self) -> tuple[AheadWork, ...]:
        """The work parse workers may do per note for this batch's indexers (e.g. embedding its chunks)."""
        return tuple(ix.ahead for ix in self._ahead_indexers() if ix.ahead is not None)

    def take_ahead(self, payloads: Sequence[Any]) -> None:
        """One note's results of ``ahead()``'s work, in the same order."""
        for indexer, payload in zip(self._ahead_indexers(), payloads):
            indexer.take_ahead(payload)

    def forget_ahead(self) -> None:
        """Drop pre-work the batch did not use, and whatever every indexer keeps for the batch (the engine calls
        this when the batch ends, however it ends). Every indexer is told, not only those that work ahead: one whose
        embedder fills its vectors after the batch keeps batch state too, and a batch rolled back must take it along
        (else the next batch, given the same id, trusts state that was never committed)."""
        for indexer in self.indexers:
            indexer.forget_ahead()

    def _ahead_indexers(self) -> list[Indexer]:
        return [ix for ix in self.indexers if getattr(ix, "ahead", None) is not None]

    def _end(self, note_id: int | None) -> None:
        if note_id is None:
            return
        batch_id = self._batch()
        self.con.execute("INSERT INTO note_ends (note_id, batch_id) VALUES (?, ?)", (note_id, batch_id))
        for indexer in self.indexers:
            indexer.on_end(self.con, batch_id, note_id)

    def _ids(self, table: str, values: list[str], key: bytes | None) -> list[int]:
        """The row of ``table`` (``texts`` or ``blobs``) holding each value, adding the values it lacks
        (packed with dictionary ``key``) in order of first appearance: one lookup for all hashes, not one each
        (the inserts stay one statement each: ``last_insert_rowid`` is what both engines answer)."""
        keys = [codec.content_key(value) for value in values]
        found = {h: row[0] for h, row in by_hash(self.con, table, "id", keys).items()}
        missing = {h: value for h, value in zip(keys, values) if h not in found}
        if missing:
            rows = [(h, codec.pack(value, key)) for h, value in missing.items()]
            found.update(zip(missing, insert_rows(self.con, f"INSERT INTO {table} (hash, body) VALUES (?, ?)", rows)))
        return [found[h] for h in keys]

    def add_revision(self, change: Change, parsed: ParsedNote) -> None:
        """Append a revision of ``change.path``; ``change.live_id`` is the revision it replaces there, if any."""
        if self._held is not None:
            self._held.append((change, parsed))
            if len(self._held) >= DICTIONARY_SAMPLE or sum(len(c.text) for c, _ in self._held) >= HELD_CHARS:
                self._train_dictionary()
            return
        self._write_revision(change, parsed)

    def _write_revision(self, change: Change, parsed: ParsedNote) -> int:
        path, kind = change.path, change.kind
        batch_id = self._batch()
        self._end(change.live_id)
        self.con.execute(
            """INSERT INTO notes (vault_id, batch_id, path, kind, prev_id, renamed_from, content_hash, size,
                   title, frontmatter, tags, aliases, warnings, valid_from, valid_to, mtime_ns)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
            (
                self.vault_id,
                batch_id,
                path,
                kind,
                change.prev_id,
                change.renamed_from,
                change.hash,
                change.size,
                parsed.title,
                None if parsed.frontmatter is None else dumps(parsed.frontmatter),
                dumps_strings(parsed.tags),
                dumps_strings(parsed.aliases),
                dumps_strings(parsed.warnings),
                parsed.valid_from,
                parsed.valid_to,
                change.mtime_ns,
            ),
        )
        note_id = self.con.last_insert_rowid()
        rows = self.write_chunks(note_id, path, parsed)
        for indexer in self.indexers:
            indexer.on_revision(self.con, batch_id, note_id, rows)
        self.counts[kind] += 1
        return note_id

    def write_chunks(self, note_id: int, path: str, parsed: ParsedNote) -> list[ChunkRow]:
        """Store the chunks (texts, link lists) of revision ``note_id``; the rows handed to indexers."""
        links = [dumps(found) if found else None for found in links_by_chunk(parsed)]
        text_ids = self._ids("texts", [chunk.text for chunk in parsed.chunks], self.text_dict)
        listed = [value for value in links if value is not None]
        link_ids = iter(self._ids("blobs", listed, codec.LINKS_KEY) if listed else ())
        links_ids = [None if value is None else next(link_ids) for value in links]
        values = [
            (
                note_id,
                ord_,
                chunk.chunk_id,
                text_id,
                dumps_strings(chunk.heading_path),
                chunk.line_start,
                chunk.line_end,
                chunk.kind,
                links_id,
            )
            for ord_, (chunk, text_id, links_id) in enumerate(zip(parsed.chunks, text_ids, links_ids))
        ]
        row_ids = insert_rows(
            self.con,
            """INSERT INTO chunks (note_id, ord, chunk_id, text_id, heading_path, line_start, line_end, kind,
                   links_id) VALUES (?,?,?,?,?,?,?,?,?)""",
            values,
        )
        return [
            ChunkRow(
                row_id,
                note_id,
                path,
                chunk.chunk_id,
                text_id,
                chunk.text,
                chunk.heading_path,
                parsed.title,
                parsed.aliases,
            )
            for row_id, chunk, text_id in zip(row_ids, parsed.chunks, text_ids)
        ]

    def store_body(self, body: Body) -> None:
        """Store an attachment's bytes once by their hash (``files.store``)."""
        files.store(self.con, body)

    def add_tombstone(self, path: str, live_id: int, renamed_to: str | None = None) -> int:
        """Record that ``path`` stopped existing (or was renamed to ``renamed_to``)."""
        self.finish()  # after the revisions held back, as they came
        batch_id = self._batch()
        self._end(live_id)
        self.con.execute(
            "INSERT INTO notes (vault_id, batch_id, path, kind, prev_id, renamed_to) VALUES (?,?,?,?,?,?)",
            (self.vault_id, batch_id, path, "deleted", live_id, renamed_to),
        )
        if renamed_to is None:
            self.counts["deleted"] += 1
        return self.con.last_insert_rowid()

    def set_file_state(self, path: str, size: int, mtime_ns: int, content_hash: str) -> None:
        self.con.execute(
            "INSERT OR REPLACE INTO file_state (vault_id, path, size, mtime_ns, content_hash) VALUES (?,?,?,?,?)",
            (self.vault_id, path, size, mtime_ns, content_hash),
        )

    def drop_file_state(self, path: str) -> None:
        self.con.execute("DELETE FROM file_state WHERE vault_id = ? AND path = ?", (self.vault_id, path))

    def record_git_commit(self, sha: str, committed_at: int) -> None:
        self.finish()  # the batch's id is known once its revisions are written
        self.con.execute(
            "INSERT INTO git_commits (vault_id, sha, committed_at, batch_id) VALUES (?,?,?,?)",
            (self.vault_id, sha, committed_at, self.batch_id),
        )


def links_by_chunk(parsed: ParsedNote) -> list[list[dict[str, Any]]]:
    """Each chunk's links, their ``line`` made relative to the chunk (1 = its first line).

    Stored per chunk, an unchanged chunk's links are the same value in every revision and so
    are stored once; ``read.attach_links`` puts them back together.
    """
    out: list[list[dict[str, Any]]] = [[] for _ in parsed.chunks]
    starts = [chunk.line_start for chunk in parsed.chunks]
    for link in parsed.links:
        if not starts:
            break
        index = max(bisect_right(starts, link.line) - 1, 0)
        entry = link_dict(link)
        entry["line"] = link.line - starts[index] + 1
        out[index].append(entry)
    return out


def link_dict(link: Any) -> dict[str, Any]:
    """A Link as a compact JSON object (empty fields left out)."""
    out: dict[str, Any] = {"target": link.target, "kind": link.kind}
    for name in ("heading", "block", "alias"):
        value = getattr(link, name)
        if value:
            out[name] = value
    if link.embed:
        out["embed"] = True
    out["line"] = link.line
    return out

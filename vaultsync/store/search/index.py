"""The search index, kept in lock-step with the revision tables inside each batch's transaction.

Tables (all derived from the revision tables; ``vaultsync reindex --full`` rebuilds them):

- ``search_docs`` + ``search_fts``: every distinct ``indexed_text`` ever seen, indexed once
  (contentless FTS5, rowid = doc id, which grows with time), with its token count.
- ``search_rows``: one row per chunk revision (id = ``chunks.id``): its doc, and the batches in
  which it became visible (``born``) and stopped being visible (``died``).
- ``search_live_<vault>``: a contentless FTS5 table holding exactly the chunks visible now
  (insert on appear, the FTS5 ``'delete'`` command with the exact old text on end), so ``bm25()``
  on it is that of a fresh table over the current chunks.
- ``search_stats``: per batch, the change in visible chunk rows and tokens (cutoff statistics).
- ``search_vectors``: one int8 embedding per distinct doc; ``search_meta`` names the embedder.
- ``search_bounded``: note revisions that declare a validity interval.
"""

from __future__ import annotations

import functools
import json
import logging

import apsw

from ...embed.embedders import DEFAULT_EMBEDDER, EMBEDDERS, Embedder, default_embedder, get_embedder
from ...embed.tokenizer import TOKENIZE, indexable, indexed_text
from ...errors import ProviderError
from ..codec import content_key, unpack
from ..contract import AheadWork
from ..write import ChunkRow, by_hash
from .embedding import AHEAD, check_embedder, embed_ahead, stored_text, take_ahead, unknown_embedder, write_vectors
from .schema import check_text_version, has_schema, live_table, meta, set_meta

logger = logging.getLogger(__name__)

__all__ = ["SearchIndexer", "index_lag", "live_table"]


_TEXTS: dict[bytes, str] = {}
"""Doc hash → the ``indexed_text`` it was indexed with, for docs this process indexed: ending a live row hands
FTS5 the exact text again, and a note's next revision usually ends rows whose text was just written. Keyed by
the content hash, so an entry can never name another text (a purge may delete a doc and its id be reused)."""

_TEXTS_LIMIT = 32_768
"""Entries kept; emptied when full (a chunk's text is about a kilobyte: a bound near 30 MB)."""

HOLD_ROWS = 4096
"""New docs (and new live rows) a batch holds back before handing them to FTS5 in one go (``SearchIndexer.flush``).

FTS5 writes what it holds in memory to a new segment whenever any statement opens a savepoint (each insert into
``search_rows``, whose trigger fills ``search_spans``, does): inserted note by note, each table got one small segment
per note and merged them again and again. Held back, they go in as a few large segments, for about a quarter of
the writer's CPU on a large import. The index holds the same rows, ids and statistics either way."""


def _varint(blob: bytes) -> int:
    """The first SQLite varint of an FTS5 ``%_docsize`` record (the row's token count)."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return value


class SearchIndexer:
    """The ``Indexer`` the batch writer calls: docs, rows, live table, statistics and vectors."""

    take_ahead = staticmethod(take_ahead)
    ahead: AheadWork | None
    """Work a parse worker may do for this indexer (see ``sync.parse_stream``); ``take_ahead`` receives it."""
    _checked: int | None
    _max_doc: tuple[int, int] | None
    """(batch id, highest doc id) while that batch is written: only this indexer adds docs inside it."""

    def forget_ahead(self) -> None:
        """The batch ended (the engine calls this however it ends): drop its pre-work and what was cached for it
        (and what it held back: a batch that committed wrote it in ``flush``, one rolled back never wrote it)."""
        AHEAD.clear()
        self._max_doc = None
        self._drop_held()
        self._checked = None  # a batch rolled back took its search_state row and a live table it created with it
        self._live_ready.clear()

    def __init__(self, con: apsw.Connection, embedder: Embedder | None = None) -> None:
        check_text_version(con)
        with con:
            name = meta(con, "embedder")
            if name is None:
                fresh = con.execute("SELECT 1 FROM search_docs LIMIT 1").fetchone() is None  # else: hashed vectors
                name = embedder.embedder_id if embedder else default_embedder() if fresh else DEFAULT_EMBEDDER
                set_meta(con, "embedder", name)
                set_meta(con, "embedder_signature", (embedder or get_embedder(name)).signature)
        if embedder is None and name not in EMBEDDERS:
            self.embedder = get_embedder(DEFAULT_EMBEDDER)
            self.mismatch: ProviderError | None = unknown_embedder(name)
        else:
            self.embedder = embedder or get_embedder(name)
            self.mismatch = check_embedder(con, self.embedder)
        if embedder is not None and self.mismatch:
            raise self.mismatch
        self.ahead = (
            None
            if self.embedder.background  # filled after the batch (``backfill``), not by parse workers
            else functools.partial(embed_ahead, self.embedder.embedder_id, con.db_filename("main") or None)
        )
        self._checked = None
        self._live_ready: set[int] = set()
        self._max_doc = None
        self._held_docs: list[tuple[int, bytes, str]] = []
        """New docs (id, hash, indexed text) not yet in ``search_fts`` and ``search_docs`` (see ``HOLD_ROWS``)."""
        self._held_ids: dict[bytes, int] = {}
        self._held_uses: dict[tuple[int, int], list[int]] = {}
        """(vault id, batch id) → held docs its new rows use: their tokens join ``search_stats`` once counted."""
        self._held_live: dict[str, list[tuple[int, str]]] = {}
        """Live table → rows (id, indexed text) not yet inserted there."""
        self._held_notes: set[int] = set()
        """Revisions whose rows are held back (ending one first writes what is held)."""
        self._next_doc: int | None = None

    # ------------------------------------------------------------ the Indexer hooks

    def on_revision(self, con: apsw.Connection, batch_id: int, note_id: int, chunks: list[ChunkRow]) -> None:
        if self.mismatch:
            raise self.mismatch
        vault_id, valid_from, valid_to = con.execute(
            "SELECT vault_id, valid_from, valid_to FROM notes WHERE id = ?", (note_id,)
        ).fetchone()
        self._catch_up_before(con, vault_id, batch_id)
        self._add(
            con,
            vault_id,
            batch_id,
            note_id,
            [
                (c.row_id, indexed_text(c.title, c.aliases, c.heading_path, c.text))
                for c, keep in zip(chunks, indexable([c.text for c in chunks]))
                if keep
            ],
            bounded=valid_from is not None or valid_to is not None,
        )

    def on_end(self, con: apsw.Connection, batch_id: int, note_id: int) -> None:
        vault_id = con.execute("SELECT vault_id FROM notes WHERE id = ?", (note_id,)).fetchone()[0]
        self._catch_up_before(con, vault_id, batch_id)
        self._end(con, vault_id, batch_id, note_id)

    # ------------------------------------------------------------ the work

    def _live(self, con: apsw.Connection, vault_id: int) -> str:
        name = live_table(vault_id)
        if vault_id not in self._live_ready:
            con.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5(indexed_text, content='', tokenize='{TOKENIZE}')"
            )
            self._live_ready.add(vault_id)
        return name

    def _doc(self, con: apsw.Connection, text: str, new_docs: list[tuple[int, str]]) -> tuple[int, int]:
        """(doc id, token count) of one text, a new one indexed at once (a purge's repair, outside a batch's own
        path; it is appended to ``new_docs``)."""
        self.flush(con)
        self._max_doc = None  # nothing cached holds
        _TEXTS.clear()  # nor keep in memory texts a purge is taking out
        doc_id, length = self._hold_docs(con, [text], new_docs)[0]
        return (doc_id, self.flush(con)[doc_id]) if length < 0 else (doc_id, length)

    def _add(
        self,
        con: apsw.Connection,
        vault_id: int,
        batch_id: int,
        note_id: int,
        rows: list[tuple[int, str]],
        *,
        bounded: bool,
    ) -> None:
        live = self._live(con, vault_id)
        new_docs: list[tuple[int, str]] = []
        docs = self._hold_docs(con, [text for _, text in rows], new_docs, batch_id)
        if new_docs and not self.embedder.background:  # a background embedder's are filled after (``backfill``)
            write_vectors(con, self.embedder, new_docs)
        tokens = sum(length for _, length in docs if length >= 0)
        held = [doc_id for doc_id, length in docs if length < 0]
        if held:
            self._held_uses.setdefault((vault_id, batch_id), []).extend(held)
        con.executemany(
            "INSERT INTO search_rows (id, vault_id, note_id, doc_id, born) VALUES (?,?,?,?,?)",
            [(row_id, vault_id, note_id, doc_id, batch_id) for (row_id, _), (doc_id, _) in zip(rows, docs)],
        )
        held_live = self._held_live.setdefault(live, [])
        held_live.extend(rows)
        self._held_notes.add(note_id)
        con.executemany(
            """INSERT INTO search_live_vectors (vault_id, doc_id, refs, embedding)
               SELECT ?, doc_id, 1, embedding FROM search_vectors WHERE doc_id = ?
               ON CONFLICT (vault_id, doc_id) DO UPDATE SET refs = refs + 1""",
            [(vault_id, doc_id) for doc_id, _ in docs],
        )
        if bounded:
            con.execute("INSERT OR IGNORE INTO search_bounded (note_id, vault_id) VALUES (?, ?)", (note_id, vault_id))
        self._stats(con, vault_id, batch_id, len(rows), tokens)
        if len(self._held_docs) >= HOLD_ROWS or len(held_live) >= HOLD_ROWS:
            self.flush(con)

    def _hold_docs(
        self, con: apsw.Connection, texts: list[str], new_docs: list[tuple[int, str]], batch_id: int | None = None
    ) -> list[tuple[int, int]]:
        """``_docs`` for a batch's own path: (doc id, token count) of each text, a new text given the next id and
        held back (its count -1 until ``flush`` learns it from FTS5) and appended to ``new_docs``."""
        keys = [content_key(text) for text in texts]
        held = self._held_ids
        found: dict[bytes, tuple[int, int]] = by_hash(
            con, "search_docs", "id, length", [key for key in keys if key not in held]
        )
        fresh = False
        for key, text in zip(keys, texts):
            if key in found:
                continue
            doc_id = held.get(key)
            if doc_id is None:
                if self._next_doc is None:
                    self._next_doc = con.execute("SELECT coalesce(max(id), 0) + 1 FROM search_docs").fetchone()[0]
                doc_id, self._next_doc = self._next_doc, self._next_doc + 1
                held[key] = doc_id
                self._held_docs.append((doc_id, key, text))
                new_docs.append((doc_id, text))
                fresh = True
            found[key] = (doc_id, -1)
        if fresh and batch_id is not None:
            self._max_doc = (batch_id, self._held_docs[-1][0])
        if len(_TEXTS) + len(keys) > _TEXTS_LIMIT:
            _TEXTS.clear()
        _TEXTS.update(zip(keys, texts))
        return [found[key] for key in keys]

    def flush(self, con: apsw.Connection) -> dict[int, int]:
        """Write what the batch held back (see ``HOLD_ROWS``): the new docs into ``search_fts`` and ``search_docs``
        with their token counts (and those counts into the totals and the batches' statistics), the new live rows
        into their live tables. Called before anything reads them, and by the batch before it commits. Returns the
        new docs' token counts by id."""
        docs, lengths = self._held_docs, {}
        if docs:
            con.executemany(
                "INSERT INTO search_fts (rowid, indexed_text) VALUES (?, ?)",
                [(doc_id, text) for doc_id, _, text in docs],
            )
            sizes = dict(
                con.execute("SELECT id, sz FROM search_fts_docsize WHERE id BETWEEN ? AND ?", (docs[0][0], docs[-1][0]))
            )
            lengths = {doc_id: _varint(sizes[doc_id]) if sizes.get(doc_id) else 0 for doc_id, _, _ in docs}
            con.executemany(
                "INSERT INTO search_docs (id, hash, length) VALUES (?, ?, ?)",
                [(doc_id, key, lengths[doc_id]) for doc_id, key, _ in docs],
            )
            con.execute(
                "UPDATE search_doc_totals SET docs = docs + ?, tokens = tokens + ? WHERE id = 1",
                (len(docs), sum(lengths.values())),
            )
            con.executemany(
                "UPDATE search_stats SET tokens = tokens + ? WHERE vault_id = ? AND batch_id = ?",
                [
                    (sum(map(lengths.__getitem__, uses)), vault_id, batch_id)
                    for (vault_id, batch_id), uses in self._held_uses.items()
                ],
            )
        for table, rows in self._held_live.items():
            con.executemany(f"INSERT INTO {table} (rowid, indexed_text) VALUES (?, ?)", rows)
        self._drop_held()
        return lengths

    def _drop_held(self) -> None:
        self._held_docs = []
        self._held_ids.clear()
        self._held_uses.clear()
        self._held_live.clear()
        self._held_notes.clear()
        self._next_doc = None

    def _end(self, con: apsw.Connection, vault_id: int, batch_id: int, note_id: int) -> None:
        if note_id in self._held_notes:  # its rows are held back (a catch-up replaying batches): write them first
            self.flush(con)  # (a revision of an earlier batch has its rows, docs and live rows written)
        live = self._live(con, vault_id)
        rows = con.execute(
            """SELECT c.id, c.heading_path, t.body, n.title, n.aliases, d.length, d.id, d.hash
               FROM chunks c JOIN texts t ON t.id = c.text_id JOIN notes n ON n.id = c.note_id
               JOIN search_rows r ON r.id = c.id JOIN search_docs d ON d.id = r.doc_id
               WHERE c.note_id = ? AND r.died IS NULL""",
            (note_id,),
        ).fetchall()
        deletes, docs, tokens = [], [], 0
        for row_id, heading_path, body, title, aliases, length, doc_id, key in rows:
            text = _TEXTS.get(bytes(key))  # the text a doc was indexed with, by its hash: no decoding again
            if text is None:
                text = stored_text(title, aliases, heading_path, body)
            deletes.append((row_id, text))
            docs.append((vault_id, doc_id))
            tokens += length
        if rows:
            con.executemany(f"INSERT INTO {live} ({live}, rowid, indexed_text) VALUES ('delete', ?, ?)", deletes)
            con.executemany("UPDATE search_live_vectors SET refs = refs - 1 WHERE vault_id = ? AND doc_id = ?", docs)
            con.executemany(
                "DELETE FROM search_live_vectors WHERE vault_id = ? AND doc_id = ? AND refs <= 0",
                list(dict.fromkeys(docs)),
            )
        con.execute("UPDATE search_rows SET died = ? WHERE note_id = ? AND died IS NULL", (batch_id, note_id))
        self._stats(con, vault_id, batch_id, -len(rows), -tokens)

    def _stats(self, con: apsw.Connection, vault_id: int, batch_id: int, rows: int, tokens: int) -> None:
        if self._max_doc is not None and self._max_doc[0] == batch_id:
            max_doc = self._max_doc[1]
        elif self._held_docs:  # held back (a replay of several batches): the highest id given so far
            max_doc = self._held_docs[-1][0]
            self._max_doc = (batch_id, max_doc)
        else:
            max_doc = con.execute("SELECT max(id) FROM search_docs").fetchone()[0] or 0
            self._max_doc = (batch_id, max_doc)
        con.execute(
            """INSERT INTO search_stats (vault_id, batch_id, rows, tokens, max_doc) VALUES (?,?,?,?,?)
               ON CONFLICT (vault_id, batch_id) DO UPDATE SET rows = rows + excluded.rows,
                   tokens = tokens + excluded.tokens, max_doc = excluded.max_doc""",
            (vault_id, batch_id, rows, tokens, max_doc),
        )

    # ------------------------------------------------------------ catching up

    def _catch_up_before(self, con: apsw.Connection, vault_id: int, batch_id: int) -> None:
        """Index any earlier batch written without this indexer (e.g. a database from before search)."""
        if self._checked == batch_id:
            return
        self.catch_up(con, vault_id, upto=batch_id - 1)
        con.execute("INSERT OR REPLACE INTO search_state (vault_id, last_batch) VALUES (?, ?)", (vault_id, batch_id))
        self._checked = batch_id

    def catch_up(self, con: apsw.Connection, vault_id: int, upto: int | None = None) -> int:
        """Index the vault's batches after the last indexed one, up to ``upto`` (default all); return how many.

        A batch whose index part is there already (its statistics row: every batch the indexer sees gets one, in
        the batch's own transaction) is only marked as indexed, never written twice: an index whose mark fell
        behind its rows (as a rolled-back batch once left it) is repaired, not refused."""
        row = con.execute("SELECT last_batch FROM search_state WHERE vault_id = ?", (vault_id,)).fetchone()
        last = row[0] if row else 0
        batches = [
            r[0]
            for r in con.execute(
                "SELECT id FROM batches WHERE vault_id = ? AND id > ? AND id <= ? ORDER BY id",
                (vault_id, last, upto if upto is not None else 1 << 62),
            )
        ]
        seen = {
            r[0]
            for r in con.execute(
                "SELECT batch_id FROM search_stats WHERE vault_id = ? AND batch_id > ?", (vault_id, last)
            )
        }
        for batch_id in batches:
            if batch_id not in seen:
                self._replay(con, vault_id, batch_id)
            con.execute(
                "INSERT OR REPLACE INTO search_state (vault_id, last_batch) VALUES (?, ?)", (vault_id, batch_id)
            )
        self.flush(con)
        if batches:
            logger.info("search index: caught up %d batches of vault %d", len(batches), vault_id)
        return len(batches)

    def _replay(self, con: apsw.Connection, vault_id: int, batch_id: int) -> None:
        for (note_id,) in con.execute(
            "SELECT note_id FROM note_ends WHERE batch_id = ? ORDER BY note_id", (batch_id,)
        ).fetchall():
            self._end(con, vault_id, batch_id, note_id)
        notes = con.execute(
            """SELECT id, title, aliases, valid_from, valid_to FROM notes
               WHERE batch_id = ? AND kind != 'deleted' ORDER BY id""",
            (batch_id,),
        ).fetchall()
        for note_id, title, aliases, valid_from, valid_to in notes:
            alias_list = json.loads(aliases or "[]")
            found = [
                (row_id, json.loads(heading_path), unpack(body))
                for row_id, heading_path, body in con.execute(
                    """SELECT c.id, c.heading_path, t.body FROM chunks c JOIN texts t ON t.id = c.text_id
                   WHERE c.note_id = ? ORDER BY c.ord""",
                    (note_id,),
                )
            ]
            rows = [
                (row_id, indexed_text(title, alias_list, heading, text))
                for (row_id, heading, text), keep in zip(found, indexable([f[2] for f in found]))
                if keep
            ]
            self._add(con, vault_id, batch_id, note_id, rows, bounded=valid_from is not None or valid_to is not None)


def index_lag(con: apsw.Connection, vault_id: int) -> int:
    """How many of the vault's batches the search index has not seen (-1: no search index at all)."""
    if not has_schema(con):
        return -1
    row = con.execute("SELECT last_batch FROM search_state WHERE vault_id = ?", (vault_id,)).fetchone()
    last = row[0] if row else 0
    return con.execute("SELECT count(*) FROM batches WHERE vault_id = ? AND id > ?", (vault_id, last)).fetchone()[0]

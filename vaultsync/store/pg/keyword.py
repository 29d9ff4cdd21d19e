"""Keyword index on PostgreSQL: what BM25 at any cutoff needs, written inside each batch's transaction.

PostgreSQL's own text search is neither FTS5's tokenizer nor BM25, so none of it is used. Each chunk's
``indexed_text`` (``tokenizer.indexed_text``: NFKC, CJK pairs) goes through FTS5's own tokenizer (the
``unicode61 remove_diacritics 2`` that the SQLite index uses, from apsw) in Python, so terms, positions
and document lengths are the SQLite engine's by construction. Tables (``pg/schema.py`` m002):

- ``search_docs``: every distinct indexed text (id, hash, length in tokens);
- the postings (``pg/postings.py``, m013): each doc's term ids, frequencies and packed positions in one
  row, under a GIN index of the ids' buckets (m015), with a dictionary of terms (m002's ``search_postings``,
  one row per term and doc, before it);
- ``search_rows``: one row per indexed chunk revision with the batches it was born and died in, and
  ``search_bounded`` (revisions declaring validity), as in the SQLite engine, so ``search.snapshot``'s
  visibility rules (the cutoff and the validity overlay) run unchanged on them.

Queries are ranked on these tables in ``pg/ranking.py`` (BM25 at any cutoff, equal to a fresh FTS5 index
over the visible chunks); m005 adds ``search_stats``, kept here per batch (visible rows and their tokens;
m006: the highest doc so far), and m006 the live set (``pg/live.py``), kept here with the rows.
"""

from __future__ import annotations

import json
from typing import Any

from ...embed.tokenizer import indexable, indexed_text
from ..codec import content_key
from ..write import ChunkRow
from . import dictionary, live, postings
from .ranking import rank, rank_default, tokens, whole_phrase

__all__ = ["PgKeywordIndexer", "lag", "rank", "rank_default", "reindex", "whole_phrase"]


class PgKeywordIndexer:
    """The ``Indexer`` of this engine: docs, postings, vectors (``pg/vectors.py``), rows and validity, inside
    each batch's transaction. ``embedder``: whose vectors new docs get (None: none, as before m004);
    ``mismatch``: why this store's vectors cannot be extended (raised at the first revision, as SQLite does)."""

    ahead = None

    def __init__(self, embedder: Any = None, mismatch: Exception | None = None) -> None:
        self.embedder = embedder
        self.mismatch = mismatch
        self.writer: postings.Writer | None = None  # the batch's postings (its new terms written by ``flush``)

    def take_ahead(self, payload: Any) -> None: ...

    def forget_ahead(self) -> None:
        self.writer = None

    def flush(self, con: Any) -> None:
        """The batch's new terms written to the dictionary (before it commits)."""
        if self.writer is not None:
            self.writer.flush()

    def on_revision(self, con: Any, batch_id: int, note_id: int, chunks: list[ChunkRow]) -> None:
        from ..search.embedding import write_vectors

        if self.mismatch:
            raise self.mismatch
        vault_id, valid_from, valid_to = con.raw.execute(
            "SELECT vault_id, valid_from, valid_to FROM notes WHERE id = %s", (note_id,)
        ).fetchone()
        rows = [
            (c.row_id, indexed_text(c.title, c.aliases, c.heading_path, c.text))
            for c, keep in zip(chunks, indexable([c.text for c in chunks]))
            if keep
        ]
        new: list[tuple[int, str]] = []
        fresh: list[tuple[int, dict[str, list[int]]]] = []
        found = [self._doc(con, text, new, fresh) for _, text in rows]
        docs = [doc for doc, _ in found]
        if self.writer is None or self.writer.raw is not con.raw:
            self.writer = postings.Writer(con.raw)
        self.writer.write(fresh, live=True)  # (the rows using them are current)
        if new and self.embedder is not None and not self.embedder.background:  # else filled after (``backfill``)
            write_vectors(con, self.embedder, new)
        with con.raw.cursor() as cur:
            cur.executemany(
                "INSERT INTO search_rows (id, vault_id, note_id, doc_id, born) VALUES (%s,%s,%s,%s,%s)",
                [(row_id, vault_id, note_id, doc, batch_id) for (row_id, _), doc in zip(rows, docs)],
            )
        live.add(con, vault_id, batch_id, docs, dict(found))
        _count(con, vault_id, batch_id, len(found), sum(length for _, length in found), max(docs, default=None))
        if valid_from is not None or valid_to is not None:
            con.raw.execute(
                "INSERT INTO search_bounded (note_id, vault_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (note_id, vault_id),
            )
        con.raw.execute(
            "INSERT INTO search_state (vault_id, last_batch) VALUES (%s, %s) ON CONFLICT (vault_id) "
            "DO UPDATE SET last_batch = excluded.last_batch",
            (vault_id, batch_id),
        )

    def on_end(self, con: Any, batch_id: int, note_id: int) -> None:
        (vault_id,) = con.raw.execute("SELECT vault_id FROM notes WHERE id = %s", (note_id,)).fetchone()
        died = con.raw.execute(
            "WITH k AS (UPDATE search_rows SET died = %s WHERE note_id = %s AND died IS NULL RETURNING doc_id) "
            "SELECT k.doc_id, d.length FROM k JOIN search_docs d ON d.id = k.doc_id",
            (batch_id, note_id),
        ).fetchall()
        live.remove(con, vault_id, batch_id, [int(doc) for doc, _ in died])
        _count(con, vault_id, batch_id, -len(died), -sum(int(length) for _, length in died))
        con.raw.execute(
            "INSERT INTO search_state (vault_id, last_batch) VALUES (%s, %s) "
            "ON CONFLICT (vault_id) DO UPDATE SET last_batch = excluded.last_batch",
            (vault_id, batch_id),
        )

    def _doc(
        self, con: Any, text: str, new: list[tuple[int, str]], fresh: list[tuple[int, dict[str, list[int]]]]
    ) -> tuple[int, int]:
        """The doc of ``text`` (made when new: then added to ``new``, and its terms' positions to ``fresh``, the
        postings the caller writes) and its length."""
        key = content_key(text)
        row = con.raw.execute("SELECT id, length FROM search_docs WHERE hash = %s", (key,)).fetchone()
        if row is not None:
            return int(row[0]), int(row[1])
        terms = tokens(text)
        doc = int(
            con.raw.execute(
                "INSERT INTO search_docs (hash, length) VALUES (%s, %s) RETURNING id", (key, len(terms))
            ).fetchone()[0]
        )
        new.append((doc, text))
        fresh.append((doc, postings.by_term(terms)))
        return doc, len(terms)


def _count(con: Any, vault_id: int, batch_id: int, rows: int, tokens: int, max_doc: int | None = None) -> None:
    """Add to ``search_stats``' row of the batch (made from the vault's previous one) ``rows`` visible chunk
    rows holding ``tokens`` tokens (negative: rows that died); ``max_doc``: the highest doc of the rows born
    (m006: the vault's highest doc so far, the bound a past cutoff's docs are under)."""
    if rows == 0 and tokens == 0:
        return
    con.raw.execute(
        """INSERT INTO search_stats (vault_id, batch_id, rows, tokens, max_doc)
           SELECT %(v)s, %(b)s, coalesce(s.rows, 0) + %(r)s, coalesce(s.tokens, 0) + %(t)s,
                  greatest(s.max_doc, %(m)s::bigint) FROM (SELECT 1) AS one
           LEFT JOIN LATERAL (SELECT rows, tokens, max_doc FROM search_stats WHERE vault_id = %(v)s
                              AND batch_id < %(b)s ORDER BY batch_id DESC LIMIT 1) AS s ON true
           ON CONFLICT (vault_id, batch_id) DO UPDATE SET rows = search_stats.rows + %(r)s,
               tokens = search_stats.tokens + %(t)s, max_doc = greatest(search_stats.max_doc, %(m)s::bigint)""",
        {"v": vault_id, "b": batch_id, "r": rows, "t": tokens, "m": max_doc},
    )


def reindex(con: Any, embedder: Any = None) -> None:
    """Rebuild every vault's search index (keyword, and ``embedder``'s vectors) from the revision tables (after
    a purge), in the caller's transaction."""
    live.clear(con)
    for table in (
        "search_vectors",
        "search_doc_terms",
        "search_live_terms",
        "search_rows",
        "search_bounded",
        "search_state",
        "search_stats",
        "search_docs",
    ):
        con.raw.execute(f"DELETE FROM {table}")
    dictionary.clear(con.raw)
    con.raw.execute("DELETE FROM search_meta WHERE key = 'vectors_pending'")
    indexer = PgKeywordIndexer(embedder)
    for batch_id, vault_id in con.raw.execute("SELECT id, vault_id FROM batches ORDER BY id").fetchall():
        for (note_id,) in con.raw.execute(
            "SELECT note_id FROM note_ends WHERE batch_id = %s ORDER BY note_id", (batch_id,)
        ).fetchall():
            indexer.on_end(con, batch_id, note_id)
        for (note_id,) in con.raw.execute(
            "SELECT id FROM notes WHERE batch_id = %s AND kind != 'deleted' ORDER BY id", (batch_id,)
        ).fetchall():
            indexer.on_revision(con, batch_id, note_id, _chunk_rows(con, note_id))
        con.raw.execute(
            "INSERT INTO search_state (vault_id, last_batch) VALUES (%s, %s) ON CONFLICT (vault_id) "
            "DO UPDATE SET last_batch = excluded.last_batch",
            (vault_id, batch_id),
        )
    indexer.flush(con)


def _chunk_rows(con: Any, note_id: int) -> list[ChunkRow]:
    from ..codec import unpack

    out = []
    for row_id, path, chunk_id, text_id, heading, body, title, aliases in con.raw.execute(
        """SELECT c.id, n.path, c.chunk_id, c.text_id, c.heading_path, t.body, n.title, n.aliases
               FROM chunks c JOIN notes n ON n.id = c.note_id JOIN texts t ON t.id = c.text_id
               WHERE c.note_id = %s ORDER BY c.ord""",
        (note_id,),
    ).fetchall():
        out.append(
            ChunkRow(
                row_id,
                note_id,
                path,
                chunk_id,
                text_id,
                unpack(body),
                tuple(json.loads(heading)),
                title,
                tuple(json.loads(aliases or "[]")),
            )
        )
    return out


def lag(con: Any, vault_id: int) -> int:
    """How many of the vault's batches the keyword index has not seen (written with ``search=False``)."""
    row = con.raw.execute("SELECT last_batch FROM search_state WHERE vault_id = %s", (vault_id,)).fetchone()
    return int(
        con.raw.execute(
            "SELECT count(*) FROM batches WHERE vault_id = %s AND id > %s", (vault_id, row[0] if row else 0)
        ).fetchone()[0]
    )

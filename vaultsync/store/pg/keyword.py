"""Keyword search on PostgreSQL: BM25 at any cutoff, equal to a fresh FTS5 index over the visible chunks.

PostgreSQL's own text search is neither FTS5's tokenizer nor BM25, so none of it is used. Each chunk's
``indexed_text`` (``tokenizer.indexed_text``: NFKC, CJK pairs) goes through FTS5's own tokenizer (the
``unicode61 remove_diacritics 2`` that the SQLite index uses, from apsw) in Python, so terms, positions
and document lengths are the SQLite engine's by construction. Tables (``pg/schema.py`` m002):

- ``search_docs``: every distinct indexed text (id, hash, length in tokens);
- ``search_postings``: (term ``COLLATE "C"``, doc, tf, positions) — what a phrase or a prefix needs,
  indexed by the term's first 256 characters (a token may be longer than a btree entry);
- ``search_rows``: one row per indexed chunk revision with the batches it was born and died in, and
  ``search_bounded`` (revisions declaring validity), as in the SQLite engine, so ``search.snapshot``'s
  visibility rules (the cutoff and the validity overlay) run unchanged on them.

A query (``tokenizer.parse_query``: phrases, OR-ed) is scored as FTS5's ``bm25()`` would on a fresh table
of exactly the visible rows: N and the total tokens of every visible row of the vault, each phrase's
number of visible rows holding it, each doc's occurrences of each phrase (consecutive positions; a
prefix phrase's last token any term starting with it, in byte order as FTS5 compares). The score is
summed phrase by phrase in query order with ``keyword.bm25``, FTS5's own floating-point order, and ties
are broken by path and position as in the SQLite engine (``keyword._top``).
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from typing import Any

from ...tokenizer import TOKENIZE, KeywordQuery, indexable, indexed_text
from ..codec import content_key
from ..search.keyword import Scored, _top, bm25, idf
from ..search.snapshot import DOCS_PARAM, Snapshot, rows_source
from ..write import ChunkRow


KEY_CHARS = 256
"""How much of a term the postings index holds (``search_postings_by_term``)."""


@functools.lru_cache(maxsize=1)
def _fts5() -> Any:
    import apsw

    name, *args = TOKENIZE.split()
    return apsw.Connection(":memory:").fts5_tokenizer(name, args)


def tokens(text: str, *, query: bool = False) -> list[str]:
    """The terms FTS5 indexes ``text`` as (or reads a query phrase as), in order: one per position."""
    import apsw

    reason = apsw.FTS5_TOKENIZE_QUERY if query else apsw.FTS5_TOKENIZE_DOCUMENT
    out = _fts5()(text.encode("utf-8", "surrogatepass"), reason, None, include_offsets=False)
    return [t[0] if isinstance(t, tuple) else t for t in out]


class PgKeywordIndexer:
    """The ``Indexer`` of this engine: docs, postings, vectors (``pg/vectors.py``), rows and validity, inside
    each batch's transaction. ``embedder``: whose vectors new docs get (None: none, as before m004);
    ``mismatch``: why this store's vectors cannot be extended (raised at the first revision, as SQLite does)."""

    ahead = None

    def __init__(self, embedder: Any = None, mismatch: Exception | None = None) -> None:
        self.embedder = embedder
        self.mismatch = mismatch

    def take_ahead(self, payload: Any) -> None: ...

    def forget_ahead(self) -> None: ...

    def on_revision(self, con: Any, batch_id: int, note_id: int, chunks: list[ChunkRow]) -> None:
        from ..search.embedding import write_vectors

        if self.mismatch:
            raise self.mismatch
        vault_id, valid_from, valid_to = con.raw.execute(
            "SELECT vault_id, valid_from, valid_to FROM notes WHERE id = %s", (note_id,)).fetchone()
        rows = [(c.row_id, indexed_text(c.title, c.aliases, c.heading_path, c.text))
                for c, keep in zip(chunks, indexable([c.text for c in chunks])) if keep]
        new: list[tuple[int, str]] = []
        docs = [self._doc(con, text, new) for _, text in rows]
        if new and self.embedder is not None:
            write_vectors(con, self.embedder, new)
        with con.raw.cursor() as cur:
            cur.executemany("INSERT INTO search_rows (id, vault_id, note_id, doc_id, born) VALUES (%s,%s,%s,%s,%s)",
                            [(row_id, vault_id, note_id, doc, batch_id) for (row_id, _), doc in zip(rows, docs)])
        if valid_from is not None or valid_to is not None:
            con.raw.execute("INSERT INTO search_bounded (note_id, vault_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                            (note_id, vault_id))
        con.raw.execute("INSERT INTO search_state (vault_id, last_batch) VALUES (%s, %s) ON CONFLICT (vault_id) "
                        "DO UPDATE SET last_batch = excluded.last_batch", (vault_id, batch_id))

    def on_end(self, con: Any, batch_id: int, note_id: int) -> None:
        con.raw.execute("UPDATE search_rows SET died = %s WHERE note_id = %s AND died IS NULL", (batch_id, note_id))
        con.raw.execute("INSERT INTO search_state (vault_id, last_batch) SELECT vault_id, %s FROM notes WHERE id = %s "
                        "ON CONFLICT (vault_id) DO UPDATE SET last_batch = excluded.last_batch", (batch_id, note_id))

    def _doc(self, con: Any, text: str, new: list[tuple[int, str]]) -> int:
        key = content_key(text)
        row = con.raw.execute("SELECT id FROM search_docs WHERE hash = %s", (key,)).fetchone()
        if row is not None:
            return int(row[0])
        terms = tokens(text)
        doc = int(con.raw.execute("INSERT INTO search_docs (hash, length) VALUES (%s, %s) RETURNING id",
                                  (key, len(terms))).fetchone()[0])
        new.append((doc, text))
        positions: dict[str, list[int]] = defaultdict(list)
        for i, term in enumerate(terms):
            positions[term].append(i)
        with con.raw.cursor() as cur:
            cur.executemany("INSERT INTO search_postings (term, doc, tf, positions) VALUES (%s, %s, %s, %s)",
                            [(term, doc, len(p), p) for term, p in positions.items()])
        return doc


def reindex(con: Any, embedder: Any = None) -> None:
    """Rebuild every vault's search index (keyword, and ``embedder``'s vectors) from the revision tables (after
    a purge), in the caller's transaction."""
    for table in ("search_vectors", "search_postings", "search_rows", "search_bounded", "search_state",
                  "search_docs"):
        con.raw.execute(f"DELETE FROM {table}")
    con.raw.execute("DELETE FROM search_meta WHERE key = 'vectors_pending'")
    indexer = PgKeywordIndexer(embedder)
    for batch_id, vault_id in con.raw.execute("SELECT id, vault_id FROM batches ORDER BY id").fetchall():
        for (note_id,) in con.raw.execute("SELECT note_id FROM note_ends WHERE batch_id = %s ORDER BY note_id",
                                          (batch_id,)).fetchall():
            indexer.on_end(con, batch_id, note_id)
        for (note_id,) in con.raw.execute("SELECT id FROM notes WHERE batch_id = %s AND kind != 'deleted' "
                                          "ORDER BY id", (batch_id,)).fetchall():
            indexer.on_revision(con, batch_id, note_id, _chunk_rows(con, note_id))
        con.raw.execute("INSERT INTO search_state (vault_id, last_batch) VALUES (%s, %s) ON CONFLICT (vault_id) "
                        "DO UPDATE SET last_batch = excluded.last_batch", (vault_id, batch_id))


def _chunk_rows(con: Any, note_id: int) -> list[ChunkRow]:
    from ..codec import unpack

    out = []
    for row_id, path, chunk_id, text_id, heading, body, title, aliases in con.raw.execute(
            """SELECT c.id, n.path, c.chunk_id, c.text_id, c.heading_path, t.body, n.title, n.aliases
               FROM chunks c JOIN notes n ON n.id = c.note_id JOIN texts t ON t.id = c.text_id
               WHERE c.note_id = %s ORDER BY c.ord""", (note_id,)).fetchall():
        out.append(ChunkRow(row_id, note_id, path, chunk_id, text_id, unpack(body), tuple(json.loads(heading)),
                            title, tuple(json.loads(aliases or "[]"))))
    return out


# ---------------------------------------------------------------- ranking


def _phrase_freqs(con: Any, wanted: list[str], prefixes: list[bool]) -> dict[int, int]:
    """doc → occurrences of the phrase of terms ``wanted`` at consecutive positions (a term flagged in
    ``prefixes``: any term starting with it, in byte order as FTS5 compares), for every doc holding it."""
    if not wanted:
        return {}
    per_token: list[dict[int, list[int]]] = []
    for term, prefix in zip(wanted, prefixes):
        key = term[:KEY_CHARS]
        if prefix:
            upper = key[:-1] + chr(ord(key[-1]) + 1) if ord(key[-1]) < 0x10FFFF else None
            rows = con.raw.execute(
                "SELECT doc, positions FROM search_postings WHERE left(term, 256) >= %s "
                "AND (%s::text IS NULL OR left(term, 256) < %s) AND starts_with(term, %s)",
                (key, upper, upper, term)).fetchall()
        else:
            rows = con.raw.execute("SELECT doc, positions FROM search_postings WHERE left(term, 256) = %s "
                                   "AND term = %s", (key, term)).fetchall()
        found: dict[int, list[int]] = defaultdict(list)
        for doc, positions in rows:
            found[int(doc)].extend(positions)
        per_token.append(found)
    if len(per_token) == 1:
        return {doc: len(p) for doc, p in per_token[0].items()}
    docs = set(per_token[0]).intersection(*per_token[1:])
    out: dict[int, int] = {}
    for doc in docs:
        sets = [set(found[doc]) for found in per_token]
        count = sum(1 for start in sets[0] if all(start + k in sets[k] for k in range(1, len(sets))))
        if count:
            out[doc] = count
    return out


def _query_phrase(text: str, prefix: bool) -> tuple[list[str], list[bool]]:
    """A query phrase's terms (FTS5's query tokenizing), the last one a prefix when ``prefix``."""
    wanted = tokens(text, query=True)
    return wanted, [prefix and i == len(wanted) - 1 for i in range(len(wanted))]


def lag(con: Any, vault_id: int) -> int:
    """How many of the vault's batches the keyword index has not seen (written with ``search=False``)."""
    row = con.raw.execute("SELECT last_batch FROM search_state WHERE vault_id = %s", (vault_id,)).fetchone()
    return int(con.raw.execute("SELECT count(*) FROM batches WHERE vault_id = %s AND id > %s",
                               (vault_id, row[0] if row else 0)).fetchone()[0])


def whole_phrase(wanted: Any) -> tuple[list[str], list[bool]] | None:
    """``signals.QueryTokens.whole`` as terms and prefix flags: each token read by FTS5 as its query phrase
    ``"tok"`` (or ``"tok" *``) would be; None for fewer than two tokens."""
    if len(wanted.sequence) < 2:
        return None
    terms: list[str] = []
    flags: list[bool] = []
    for tok, pre in zip(wanted.sequence, wanted.prefix):
        found, marks = _query_phrase(tok, pre)
        terms += found
        flags += marks
    return terms, flags


def rank(con: Any, snap: Snapshot, query: KeywordQuery, allowed: set[int] | None, limit: int) -> list[Scored]:
    """The best ``limit`` visible chunks (of allowed notes) with FTS5's bm25 scores (lower is better)."""
    return rank_default(con, snap, query, None, allowed, limit)[0]


def rank_default(con: Any, snap: Snapshot, query: KeywordQuery, whole: tuple[list[str], list[bool]] | None,
                 allowed: set[int] | None, limit: int) -> tuple[list[Scored], list[Scored]]:
    """``rank``'s best ``limit`` rows, and the best ``limit`` (same scores, same order) among the rows whose
    text holds ``whole`` (terms and prefix flags: the whole query in order; empty when None), as
    ``search.keyword.rank_default`` gives them."""
    if not query.phrases or limit <= 0 or (allowed is not None and not allowed):
        return [], []
    source, params = rows_source(snap, None)
    n_rows, total = con.execute(
        f"SELECT count(*), coalesce(sum(d.length), 0) FROM ({source}) r JOIN search_docs d ON d.id = r.doc_id",
        params).fetchone()
    n_rows, total = int(n_rows), int(total)
    if n_rows <= 0:
        return [], []
    freqs = [_phrase_freqs(con, *_query_phrase(p.text, p.prefix)) for p in query.phrases]
    candidates = sorted(set().union(*freqs))
    if not candidates:
        return [], []
    source, params = rows_source(snap, None, docs=DOCS_PARAM)
    rows = con.execute(source, {**params, "docs": json.dumps(candidates)}).fetchall()
    lengths = dict(con.raw.execute("SELECT id, length FROM search_docs WHERE id = ANY(%s)", (candidates,)).fetchall())
    hits = [sum(1 for _, doc, _ in rows if doc in f) for f in freqs]
    idfs = [idf(n_rows, h) for h in hits]
    avgdl = total / n_rows
    scores: dict[int, float] = {}
    scored = []
    for row_id, doc, note_id in rows:
        if allowed is not None and note_id not in allowed:
            continue
        if doc not in scores:
            scores[doc] = bm25([float(f.get(doc, 0)) for f in freqs], idfs, float(lengths[doc]), avgdl)
        scored.append((Scored(int(row_id), scores[doc]), doc))
    held: list[Scored] = []
    if whole is not None:
        holding = _phrase_freqs(con, *whole)
        held = _top(con, [item for item, doc in scored if doc in holding], limit)
    return _top(con, [item for item, _ in scored], limit), held

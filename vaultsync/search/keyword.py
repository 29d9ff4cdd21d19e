"""BM25 over exactly the chunks visible in a snapshot, equal to a fresh FTS5 table over those chunks.

Now (no validity overlay): ``bm25()`` on the live FTS5 table, which holds exactly the current chunks.
At any other cutoff: FTS5's own formula (``fts5_aux.c``) evaluated with the cutoff's statistics —
N and total tokens from per-batch deltas, each phrase's document frequency counted among the visible
chunk rows — and each phrase's frequency in each doc taken from the index of distinct docs.

Order: score ascending (lower is better, as ``bm25()``), then path, then chunk position.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass

import apsw

from .index import live_table
from .snapshot import Snapshot, rows_source
from .text import KeywordQuery

K1 = 1.2
B = 0.75


@dataclass(frozen=True, slots=True)
class Scored:
    row_id: int
    score: float


def bm25(freqs: list[float], idfs: list[float], length: float, avgdl: float) -> float:
    """FTS5's bm25 for one row, term by term in the same floating-point order as ``fts5Bm25Function``."""
    score = 0.0
    for f, idf in zip(freqs, idfs):
        score += idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * length / avgdl)))
    return -1.0 * score


def idf(n_rows: int, n_hit: int) -> float:
    value = math.log((n_rows - n_hit + 0.5) / (n_hit + 0.5))
    return 1e-6 if value <= 0.0 else value


def order_key(con: apsw.Connection, scored: list[Scored]) -> dict[int, tuple[str, int]]:
    """row id → (path, ord), the stable tie-break."""
    if not scored:
        return {}
    rows = con.execute(
        """SELECT c.id, n.path, c.ord FROM chunks c JOIN notes n ON n.id = c.note_id
           WHERE c.id IN (SELECT value FROM json_each(?))""", (json.dumps([s.row_id for s in scored]),))
    return {r[0]: (r[1], r[2]) for r in rows}


def _top(con: apsw.Connection, scored: list[Scored], limit: int) -> list[Scored]:
    """The best ``limit`` by (score, path, ord), keeping every row tied with the last one until ordered."""
    scored.sort(key=lambda s: s.score)
    if len(scored) > limit:
        edge = scored[limit - 1].score
        scored = [s for s in scored if s.score <= edge]
    keys = order_key(con, scored)
    scored.sort(key=lambda s: (s.score, keys[s.row_id]))
    return scored[:limit]


def rank(con: apsw.Connection, snap: Snapshot, query: KeywordQuery, allowed: set[int] | None,
         limit: int) -> list[Scored]:
    """The best ``limit`` visible chunks (of allowed notes) for the query, with their bm25 scores."""
    if not query.phrases or limit <= 0 or (allowed is not None and not allowed):
        return []
    if snap.live:
        return _rank_live(con, snap, query, allowed, limit)
    return _rank_cutoff(con, snap, query, allowed, limit)


def _rank_live(con: apsw.Connection, snap: Snapshot, query: KeywordQuery, allowed: set[int] | None,
               limit: int) -> list[Scored]:
    table = live_table(snap.vault_id)
    if con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is None:
        return []
    where = f"{table} MATCH :q"
    params: dict[str, object] = {"q": query.expression}
    if allowed is not None:
        where += " AND rowid IN (SELECT id FROM search_rows WHERE note_id IN (SELECT value FROM json_each(:allowed)))"
        params["allowed"] = json.dumps(sorted(allowed))
    inner = f"SELECT rowid AS id, bm25({table}) AS s FROM {table} WHERE {where}"
    rows = con.execute(f"{inner} ORDER BY s LIMIT :n", {**params, "n": limit + 1}).fetchall()
    if len(rows) > limit and rows[limit - 1][1] == rows[limit][1]:
        edge = rows[limit - 1][1]
        rows = [r for r in rows if r[1] < edge] + con.execute(
            f"SELECT id, s FROM ({inner}) WHERE s = :edge", {**params, "edge": edge}).fetchall()
    return _top(con, [Scored(r[0], r[1]) for r in rows], limit)


def cutoff_stats(con: apsw.Connection, snap: Snapshot) -> tuple[int, int, int]:
    """(visible chunk rows, their total tokens, highest doc id they can use) in the snapshot."""
    n_rows, tokens, max_doc = con.execute(
        """SELECT coalesce(sum(rows), 0), coalesce(sum(tokens), 0), coalesce(max(max_doc), 0)
           FROM search_stats WHERE vault_id = ? AND batch_id <= ?""", (snap.vault_id, snap.batch)).fetchone()
    for notes, sign in ((snap.removed, -1), (snap.added, 1)):
        if notes:
            count, total = con.execute(
                """SELECT count(*), coalesce(sum(d.length), 0) FROM search_rows r JOIN search_docs d ON d.id = r.doc_id
                   WHERE r.note_id IN (SELECT value FROM json_each(?))""", (json.dumps(sorted(notes)),)).fetchone()
            n_rows, tokens = n_rows + sign * count, tokens + sign * total
    return n_rows, tokens, max_doc


def phrase_freqs(con: apsw.Connection, fts_phrase: str, max_doc: int) -> dict[int, tuple[int, int]]:
    """doc id → (occurrences of the phrase, doc length) for docs up to ``max_doc`` containing it.

    FTS5 gives the occurrence counts through ``bm25()`` of the one-phrase query on the table of
    distinct docs, whose statistics are known, so the count is recovered exactly (it is an integer).
    """
    n_docs, total = con.execute("SELECT docs, tokens FROM search_doc_totals WHERE id = 1").fetchone()
    n_hit = con.execute("SELECT count(*) FROM search_fts WHERE search_fts MATCH ?", (fts_phrase,)).fetchone()[0]
    if n_hit == 0 or n_docs == 0:
        return {}
    doc_idf = idf(n_docs, n_hit)
    avgdl = total / n_docs
    out: dict[int, tuple[int, int]] = {}
    for doc_id, score, length in con.execute(
        """SELECT search_fts.rowid, bm25(search_fts), d.length FROM search_fts
           JOIN search_docs d ON d.id = search_fts.rowid
           WHERE search_fts MATCH ? AND search_fts.rowid <= ?""", (fts_phrase, max_doc)):
        g = -score / doc_idf
        k = K1 * (1 - B + B * length / avgdl)
        out[doc_id] = (round(g * k / (K1 + 1.0 - g)), length)
    return out


def _rank_cutoff(con: apsw.Connection, snap: Snapshot, query: KeywordQuery, allowed: set[int] | None,
                 limit: int) -> list[Scored]:
    n_rows, tokens, max_doc = cutoff_stats(con, snap)
    if n_rows <= 0:
        return []
    freqs = [phrase_freqs(con, p.fts(), max_doc) for p in query.phrases]
    candidates: dict[int, int] = {}
    for per_doc in freqs:
        for doc_id, (_, length) in per_doc.items():
            candidates[doc_id] = length
    if not candidates:
        return []
    source, params = rows_source(snap, None, docs=True)
    visible = con.execute(source, {**params, "docs": json.dumps(sorted(candidates))}).fetchall()
    per_doc_rows: dict[int, int] = defaultdict(int)
    for _, doc_id, _ in visible:
        per_doc_rows[doc_id] += 1
    idfs = [idf(n_rows, sum(per_doc_rows.get(d, 0) for d in per_doc)) for per_doc in freqs]
    avgdl = tokens / n_rows
    scores: dict[int, float] = {}
    scored = []
    for row_id, doc_id, note_id in visible:
        if allowed is not None and note_id not in allowed:
            continue
        score = scores.get(doc_id)
        if score is None:
            f = [float(per_doc[doc_id][0]) if doc_id in per_doc else 0.0 for per_doc in freqs]
            score = scores[doc_id] = bm25(f, idfs, float(candidates[doc_id]), avgdl)
        scored.append(Scored(row_id, score))
    return _top(con, scored, limit)

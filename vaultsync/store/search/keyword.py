"""BM25 over exactly the chunks visible in a snapshot, equal to a fresh FTS5 table over those chunks.

Now (no validity overlay): ``bm25()`` on the live FTS5 table, which holds exactly the current chunks
(unless the vault's rows share their docs many times over, as copies do: then as at a cutoff, ``SHARED``).
At any other cutoff: FTS5's own formula (``fts5_aux.c``) evaluated with the cutoff's statistics —
N and total tokens from per-batch deltas, each phrase's document frequency counted among the visible
chunk rows — and each phrase's frequency in each doc taken from the index of distinct docs, for the docs
that can reach the best rows only (``cutoff``; one common phrase: its docs best first).

Order: score ascending (lower is better, as ``bm25()``), then path, then chunk position.

For the default mode, ``rank_default`` also gives the best rows, by the same scores and order, among
those whose text holds a given FTS5 phrase (the whole query in order): at a cutoff, the distinct docs
matching the phrase (``search_fts``) narrow the rows already scored; now, the live table's own match.
Either way, the rows a fresh table over the visible chunks would give for ``MATCH query AND rowid IN
(MATCH phrase)``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import apsw

from ...embed.tokenizer import KeywordQuery
from . import cutoff
from .cutoff import CONSTANTS, K1, B
from .schema import has_spans, live_table
from .snapshot import Snapshot


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
           WHERE c.id IN (SELECT value FROM json_each(?))""",
        (json.dumps([s.row_id for s in scored]),),
    )
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


def rank(
    con: apsw.Connection, snap: Snapshot, query: KeywordQuery, allowed: set[int] | None, limit: int
) -> list[Scored]:
    """The best ``limit`` visible chunks (of allowed notes) for the query, with their bm25 scores."""
    return rank_default(con, snap, query, None, allowed, limit)[0]


def rank_default(
    con: apsw.Connection, snap: Snapshot, query: KeywordQuery, whole: str | None, allowed: set[int] | None, limit: int
) -> tuple[list[Scored], list[Scored]]:
    """``rank``'s best ``limit`` rows, and the best ``limit`` (same scores, same order) among the rows
    whose text matches the FTS5 phrase ``whole`` (empty when ``whole`` is None)."""
    if not query.phrases or limit <= 0 or (allowed is not None and not allowed):
        return [], []
    if snap.live and (allowed is not None or not _shared(con, snap)):
        return _rank_live(con, snap, query, whole, allowed, limit)
    return _rank_cutoff(con, snap, query, whole, allowed, limit)


SHARED = 2
"""Now, the per-doc ranking of a cutoff replaces the live table's when the vault's visible rows are at least
this many times the distinct docs of the whole index (copies of notes share their docs: the live table would
score every copy, the docs are scored once), and no filter narrows the rows (the live table scores only the
allowed rows; the per-doc ranking would score every doc holding a phrase). Both are exact; this only
chooses the cheaper one."""


def _shared(con: apsw.Connection, snap: Snapshot) -> bool:
    if not has_spans(con):
        return False
    rows = con.execute(
        "SELECT coalesce(sum(rows), 0) FROM search_stats WHERE vault_id = ?", (snap.vault_id,)
    ).fetchone()[0]
    docs = con.execute("SELECT docs FROM search_doc_totals WHERE id = 1").fetchone()[0] or 0
    return rows >= SHARED * max(docs, 1)


def _rank_live(
    con: apsw.Connection, snap: Snapshot, query: KeywordQuery, whole: str | None, allowed: set[int] | None, limit: int
) -> tuple[list[Scored], list[Scored]]:
    table = live_table(snap.vault_id)
    if con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is None:
        return [], []
    where = f"{table} MATCH :q"
    params: dict[str, object] = {"q": query.expression}
    if allowed is not None:
        where += " AND rowid IN (SELECT id FROM search_rows WHERE note_id IN (SELECT value FROM json_each(:allowed)))"
        params["allowed"] = json.dumps(sorted(allowed))
    select = f"SELECT rowid AS id, bm25({table}) AS s FROM {table} WHERE {where}"
    rows = _lowest(con, select, params, limit)
    held: list[tuple] = []
    if whole is not None:  # the phrase's rows first; ``+rowid`` keeps SQLite from re-running the query per row
        con.execute("CREATE TEMP TABLE IF NOT EXISTS kw_whole (id INTEGER PRIMARY KEY)")
        con.execute("DELETE FROM temp.kw_whole")
        try:
            con.execute(
                f"INSERT INTO temp.kw_whole (id) SELECT rowid FROM {table} WHERE {table} MATCH :whole", {"whole": whole}
            )
            held = _lowest(con, f"{select} AND +rowid IN (SELECT id FROM temp.kw_whole)", params, limit)
        finally:
            con.execute("DELETE FROM temp.kw_whole")
    return (_top(con, [Scored(r[0], r[1]) for r in rows], limit), _top(con, [Scored(r[0], r[1]) for r in held], limit))


def _lowest(con: apsw.Connection, inner: str, params: dict[str, object], limit: int) -> list[tuple]:
    """The ``limit`` rows of ``inner`` (columns ``id, s``) with the lowest ``s``, plus every row tied
    with the last of them, so that ``_top`` breaks ties the same way whatever SQLite returned first."""
    rows = con.execute(f"{inner} ORDER BY s LIMIT :n", {**params, "n": limit + 1}).fetchall()
    if len(rows) > limit and rows[limit - 1][1] == rows[limit][1]:
        edge = rows[limit - 1][1]
        rows = [r for r in rows if r[1] < edge] + con.execute(
            f"SELECT id, s FROM ({inner}) WHERE s = :edge", {**params, "edge": edge}
        ).fetchall()
    return rows


def cutoff_stats(con: apsw.Connection, snap: Snapshot) -> tuple[int, int, int]:
    """(visible chunk rows, their total tokens, highest doc id they can use) in the snapshot."""
    n_rows, tokens, max_doc = con.execute(
        """SELECT coalesce(sum(rows), 0), coalesce(sum(tokens), 0), coalesce(max(max_doc), 0)
           FROM search_stats WHERE vault_id = ? AND batch_id <= ?""",
        (snap.vault_id, snap.batch),
    ).fetchone()
    for notes, sign in ((snap.removed, -1), (snap.added, 1)):
        if notes:
            count, total = con.execute(
                """SELECT count(*), coalesce(sum(d.length), 0) FROM search_rows r JOIN search_docs d ON d.id = r.doc_id
                   WHERE r.note_id IN (SELECT value FROM json_each(?))""",
                (json.dumps(sorted(notes)),),
            ).fetchone()
            n_rows, tokens = n_rows + sign * count, tokens + sign * total
    return n_rows, tokens, max_doc


def phrase_freqs(con: apsw.Connection, fts_phrase: str, max_doc: int) -> dict[int, tuple[int, int]]:
    """doc id → (occurrences of the phrase, doc length) for docs up to ``max_doc`` containing it."""
    out: dict[int, tuple[int, int]] = {}
    found = _freqs_sql(con, fts_phrase, max_doc)
    if found is None:
        return out
    sql, params = found
    for doc_id, tf, length in con.execute(sql, params):
        out[doc_id] = (int(tf), length)
    return out


def _freqs_sql(con: apsw.Connection, fts_phrase: str, max_doc: int) -> tuple[str, dict[str, Any]] | None:
    """SQL giving (doc, occurrences, length) for each doc up to ``max_doc`` containing the phrase (None:
    no doc contains it); the SQL ends with its WHERE clause, to which a caller may add conditions.

    FTS5 exposes a phrase's occurrence count in a row only through ``bm25()``: for the one-phrase
    query on the table of distinct docs, whose statistics are known, the count is solved for exactly
    (it is an integer; the solution is rounded).
    """
    n_docs, total = con.execute("SELECT docs, tokens FROM search_doc_totals WHERE id = 1").fetchone()
    n_hit = con.execute("SELECT count(*) FROM search_fts WHERE search_fts MATCH ?", (fts_phrase,)).fetchone()[0]
    if n_hit == 0 or n_docs == 0:
        return None
    g = "(-bm25(search_fts) / :didf)"
    k = ":k1 * (:omb + :b * d.length / :davgdl)"
    sql = (
        f"SELECT search_fts.rowid AS doc, round({g} * ({k}) / (:k1p1 - {g})) AS tf, d.length AS length FROM search_fts "
        "JOIN search_docs d ON d.id = search_fts.rowid WHERE search_fts MATCH :phrase AND search_fts.rowid <= :maxdoc"
    )
    return sql, {
        "didf": idf(n_docs, n_hit),
        "davgdl": total / n_docs,
        "phrase": fts_phrase,
        "maxdoc": max_doc,
        "hits": n_hit,
        "docs": n_docs,
        **CONSTANTS,
    }  # hits, docs: counts for the caller, unused by the SQL


def _rank_cutoff(
    con: apsw.Connection, snap: Snapshot, query: KeywordQuery, whole: str | None, allowed: set[int] | None, limit: int
) -> tuple[list[Scored], list[Scored]]:
    """BM25 at a cutoff, computed inside SQLite per distinct doc (see ``cutoff``): each phrase's document
    frequency, then the scores of the docs that can reach the best ``limit`` rows (and of every doc holding
    ``whole``), then the rows of the best docs only."""
    n_rows, tokens, max_doc = cutoff_stats(con, snap)
    if n_rows <= 0:
        return [], []
    cutoff.temp_tables(con)
    try:
        spans = cutoff.spans_source(con)
        adjusted = cutoff.adjust(con, snap)
        phrases = [p.fts() for p in query.phrases]
        freqs = [_freqs_sql(con, p, max_doc) for p in phrases]
        dfs = [
            cutoff.phrase_df(con, snap, p, max_doc, spans, adjusted) if f is not None else 0
            for p, f in zip(phrases, freqs)
        ]
        idfs = [idf(n_rows, df) for df in dfs]
        scorer = cutoff.Scorer(con, snap, freqs, idfs, tokens / n_rows, spans, adjusted)
        if whole is not None:
            con.execute(
                "INSERT INTO temp.kw_whole (id) SELECT rowid FROM search_fts "
                "WHERE search_fts MATCH :whole AND rowid <= :maxdoc",
                {"whole": whole, "maxdoc": max_doc},
            )
            scorer.add("SELECT id FROM temp.kw_whole", {})
        bound = [value * (K1 + 1.0) for value in idfs]  # more than the phrase can add to any doc's score
        counts = {i: f[1] for i, f in enumerate(freqs) if f is not None}
        left = sorted(counts, key=lambda i: -bound[i])
        # docs to read for each phrase walked: about twice ``limit`` visible rows (the docs index's docs per row)
        first = max(cutoff.FIRST, math.ceil(2 * limit * counts[left[0]]["docs"] / n_rows)) if left else 0
        if (
            allowed is None
            and 0 < len(left) <= cutoff.WALKED
            and min(counts[i]["hits"] for i in left) >= cutoff.SHARE * first
        ):
            scorer.score()  # the docs holding ``whole``, all scored
            if scorer.best_first(phrases, max_doc, limit, first):
                left = []  # phrases held by many docs: their best docs first, and no other can reach the best rows
        while left:
            take = left
            if allowed is None:
                edge = scorer.threshold(limit)
                if edge is None:  # fewer than ``limit`` rows scored: take phrases until their rows may reach it
                    k, held_rows = 0, 0
                    while k < len(left) and held_rows < limit:
                        held_rows += dfs[left[k]]
                        k += 1
                    take = left[:k]
                else:
                    k = 0
                    while k < len(left) and sum(bound[i] for i in left[k:]) * (1 + cutoff.MARGIN) >= edge:
                        k += 1
                    take = left[:k]
                    if not take:
                        break  # no doc holding only the phrases left can reach the best ``limit`` rows
            for i in take:
                scorer.add(
                    "SELECT rowid FROM search_fts WHERE search_fts MATCH :phrase AND rowid <= :maxdoc",
                    {"phrase": phrases[i], "maxdoc": max_doc},
                )
            scorer.score()
            left = left[len(take) :]
        scorer.score()
        rows = cutoff.best_rows(con, snap, allowed, limit)
        held = (
            cutoff.best_rows(con, snap, allowed, limit, within="WHERE doc IN (SELECT id FROM temp.kw_whole)")
            if whole is not None
            else []
        )
    finally:
        cutoff.clear(con)
    return _top(con, [Scored(r[0], r[1]) for r in rows], limit), _top(con, [Scored(r[0], r[1]) for r in held], limit)

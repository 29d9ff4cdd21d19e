"""BM25 over exactly the chunks visible in a snapshot, equal to a fresh FTS5 table over those chunks.

Now (no validity overlay): ``bm25()`` on the live FTS5 table, which holds exactly the current chunks.
At any other cutoff: FTS5's own formula (``fts5_aux.c``) evaluated with the cutoff's statistics —
N and total tokens from per-batch deltas, each phrase's document frequency counted among the visible
chunk rows — and each phrase's frequency in each doc taken from the index of distinct docs.

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

import apsw

from .schema import live_table
from .snapshot import DOCS_PARAM, Snapshot, rows_source
from ...tokenizer import KeywordQuery

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
    return rank_default(con, snap, query, None, allowed, limit)[0]


def rank_default(con: apsw.Connection, snap: Snapshot, query: KeywordQuery, whole: str | None,
                 allowed: set[int] | None, limit: int) -> tuple[list[Scored], list[Scored]]:
    """``rank``'s best ``limit`` rows, and the best ``limit`` (same scores, same order) among the rows
    whose text matches the FTS5 phrase ``whole`` (empty when ``whole`` is None)."""
    if not query.phrases or limit <= 0 or (allowed is not None and not allowed):
        return [], []
    if snap.live:
        return _rank_live(con, snap, query, whole, allowed, limit)
    return _rank_cutoff(con, snap, query, whole, allowed, limit)


def _rank_live(con: apsw.Connection, snap: Snapshot, query: KeywordQuery, whole: str | None,
               allowed: set[int] | None, limit: int) -> tuple[list[Scored], list[Scored]]:
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
            con.execute(f"INSERT INTO temp.kw_whole (id) SELECT rowid FROM {table} WHERE {table} MATCH :whole",
                        {"whole": whole})
            held = _lowest(con, f"{select} AND +rowid IN (SELECT id FROM temp.kw_whole)", params, limit)
        finally:
            con.execute("DELETE FROM temp.kw_whole")
    return (_top(con, [Scored(r[0], r[1]) for r in rows], limit),
            _top(con, [Scored(r[0], r[1]) for r in held], limit))


def _lowest(con: apsw.Connection, inner: str, params: dict[str, object], limit: int) -> list[tuple]:
    """The ``limit`` rows of ``inner`` (columns ``id, s``) with the lowest ``s``, plus every row tied
    with the last of them, so that ``_top`` breaks ties the same way whatever SQLite returned first."""
    rows = con.execute(f"{inner} ORDER BY s LIMIT :n", {**params, "n": limit + 1}).fetchall()
    if len(rows) > limit and rows[limit - 1][1] == rows[limit][1]:
        edge = rows[limit - 1][1]
        rows = [r for r in rows if r[1] < edge] + con.execute(
            f"SELECT id, s FROM ({inner}) WHERE s = :edge", {**params, "edge": edge}).fetchall()
    return rows


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
    """doc id → (occurrences of the phrase, doc length) for docs up to ``max_doc`` containing it."""
    out: dict[int, tuple[int, int]] = {}
    sql, params = _freqs_sql(con, fts_phrase, max_doc)
    for doc_id, tf, length in con.execute(sql, params):
        out[doc_id] = (int(tf), length)
    return out


def _freqs_sql(con: apsw.Connection, fts_phrase: str, max_doc: int) -> tuple[str, dict[str, object]]:
    """SQL giving (doc, occurrences, length) for each doc up to ``max_doc`` containing the phrase.

    FTS5 exposes a phrase's occurrence count in a row only through ``bm25()``: for the one-phrase
    query on the table of distinct docs, whose statistics are known, the count is solved for exactly
    (it is an integer; the solution is rounded).
    """
    n_docs, total = con.execute("SELECT docs, tokens FROM search_doc_totals WHERE id = 1").fetchone()
    n_hit = con.execute("SELECT count(*) FROM search_fts WHERE search_fts MATCH ?", (fts_phrase,)).fetchone()[0]
    if n_hit == 0 or n_docs == 0:
        return "SELECT NULL AS doc, NULL AS tf, NULL AS length WHERE 0", {}
    g = "(-bm25(search_fts) / :didf)"
    k = ":k1 * (:omb + :b * d.length / :davgdl)"
    sql = (f"SELECT search_fts.rowid AS doc, round({g} * ({k}) / (:k1p1 - {g})) AS tf, d.length AS length FROM search_fts "
           "JOIN search_docs d ON d.id = search_fts.rowid WHERE search_fts MATCH :phrase AND search_fts.rowid <= :maxdoc")
    return sql, {"didf": idf(n_docs, n_hit), "davgdl": total / n_docs, "phrase": fts_phrase, "maxdoc": max_doc,
                 **CONSTANTS}


CONSTANTS = {"k1": K1, "b": B, "omb": 1 - B, "k1p1": K1 + 1.0}


def _rank_cutoff(con: apsw.Connection, snap: Snapshot, query: KeywordQuery, whole: str | None,
                 allowed: set[int] | None, limit: int) -> tuple[list[Scored], list[Scored]]:
    """BM25 at a cutoff, computed inside SQLite per distinct doc: occurrences per doc, how many visible
    rows use each doc, scores; then the rows of the best docs only (and, with ``whole``, of the best docs
    whose text matches that phrase).

    Every visible row using a doc has that doc's score (the score depends on the doc's text and the
    cutoff's statistics alone), so the work grows with the docs that hold a phrase, not with the rows
    (a history's unchanged chunks, a copied note) that share them.
    """
    n_rows, tokens, max_doc = cutoff_stats(con, snap)
    if n_rows <= 0:
        return [], []
    con.execute("CREATE TEMP TABLE IF NOT EXISTS kw_tf (doc INTEGER, phrase INTEGER, tf REAL, "
                "PRIMARY KEY (doc, phrase)) WITHOUT ROWID")
    con.execute("CREATE TEMP TABLE IF NOT EXISTS kw_docs (doc INTEGER PRIMARY KEY, n INTEGER NOT NULL, "
                "s REAL NOT NULL DEFAULT 0.0)")
    con.execute("CREATE TEMP TABLE IF NOT EXISTS kw_whole (id INTEGER PRIMARY KEY)")
    con.execute("DELETE FROM temp.kw_tf")
    con.execute("DELETE FROM temp.kw_docs")
    con.execute("DELETE FROM temp.kw_whole")
    try:
        for i, phrase in enumerate(query.phrases):
            sql, params = _freqs_sql(con, phrase.fts(), max_doc)
            con.execute(f"INSERT INTO temp.kw_tf (doc, tf, phrase) SELECT doc, tf, {i} FROM ({sql})", params)
        source, params = rows_source(snap, None, docs="SELECT DISTINCT doc AS value FROM temp.kw_tf")
        con.execute(f"INSERT INTO temp.kw_docs (doc, n) SELECT doc_id, count(*) FROM ({source}) GROUP BY doc_id",
                    params)
        df = dict(con.execute("SELECT t.phrase, sum(d.n) FROM temp.kw_docs d JOIN temp.kw_tf t ON t.doc = d.doc "
                              "GROUP BY t.phrase").fetchall())
        # The score is summed phrase by phrase, in query order, as fts5Bm25Function adds its terms: one
        # UPDATE per phrase (a phrase absent from a doc adds exactly 0.0), so no statement joins more
        # than three tables whatever the number of phrases (SQLite allows 64 per join).
        avgdl = tokens / n_rows
        for i in range(len(query.phrases)):
            con.execute(
                """UPDATE temp.kw_docs SET s = s + :idf * ((t.tf * :k1p1) / (t.tf + :k1 * (:omb + :b * d.length / :avgdl)))
                   FROM temp.kw_tf t, search_docs d
                   WHERE t.doc = kw_docs.doc AND t.phrase = :phrase AND d.id = kw_docs.doc""",
                {"idf": idf(n_rows, df.get(i, 0)), "phrase": i, "avgdl": avgdl, **CONSTANTS})
        rows = _best_rows(con, snap, allowed, limit)
        held: list[tuple] = []
        if whole is not None:
            con.execute("INSERT INTO temp.kw_whole (id) SELECT rowid FROM search_fts "
                        "WHERE search_fts MATCH :whole AND rowid <= :maxdoc", {"whole": whole, "maxdoc": max_doc})
            held = _best_rows(con, snap, allowed, limit, within="WHERE doc IN (SELECT id FROM temp.kw_whole)")
    finally:
        con.execute("DELETE FROM temp.kw_tf")
        con.execute("DELETE FROM temp.kw_docs")
        con.execute("DELETE FROM temp.kw_whole")
    return _top(con, [Scored(r[0], r[1]) for r in rows], limit), _top(con, [Scored(r[0], r[1]) for r in held], limit)


def _best_rows(con: apsw.Connection, snap: Snapshot, allowed: set[int] | None, limit: int,
               within: str = "") -> list[tuple]:
    """(row id, score) of the visible rows (of allowed notes) of the best docs in ``temp.kw_docs`` (``within``:
    a WHERE clause narrowing those docs): whole groups of equal score, best first, until ``limit`` rows are
    reached (as ``_lowest``: every row tied with the last one is kept)."""
    out: list[tuple] = []
    taken, step, last = 0, max(limit + 1, 64), None
    while True:
        docs = con.execute(f"SELECT doc, -1.0 * s FROM temp.kw_docs {within} ORDER BY s DESC, doc LIMIT :n OFFSET :o",
                           {"n": step, "o": taken}).fetchall()
        if not docs:
            return out
        taken += len(docs)
        score = dict(docs)
        source, params = rows_source(snap, allowed, docs=DOCS_PARAM)
        found: dict[int, list[int]] = {}
        for row_id, doc_id, _ in con.execute(source, {**params, "docs": json.dumps(list(score))}):
            found.setdefault(doc_id, []).append(row_id)
        for doc_id, s in docs:
            if last is not None and len(out) >= limit and s != last:
                return out
            rows = found.get(doc_id, ())
            out += [(row_id, s) for row_id in rows]
            if rows:
                last = s
        step *= 4

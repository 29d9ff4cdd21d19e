"""BM25 at a past cutoff (``keyword.rank_default`` when the live table does not apply), equal to a fresh
FTS5 table over the visible chunks.

Work per distinct doc, not per chunk row: every visible row using a doc has that doc's score (it depends on
the doc's text and the cutoff's statistics alone), and how many visible rows use a doc is read from
``search_spans`` (one entry per doc and lifetime, not one per copy or per unchanged revision).

Each phrase's document frequency at the cutoff is one sum over the docs holding it. The occurrence counts
(``bm25()`` on the table of distinct docs, solved for the count: see ``keyword._freqs_sql``) are taken only
for the docs that can reach the top ``limit`` rows (MaxScore, exact): a phrase adds less than
``idf × (k1 + 1)`` to any doc's score, so once ``limit`` visible rows of the docs scored so far score above
what the phrases not yet taken can add together, a doc holding only those phrases can neither enter the
top ``limit`` nor tie with its last row, and is never scored. Docs are taken phrase by phrase, the phrases
that can add the most first; the docs holding the whole query in order (``whole``) are always scored.
With a filter (``allowed``) every doc holding a phrase is scored, as the threshold would need the allowed
rows of each doc.

A query of one phrase held by many docs (a common word) would score every one of them so: its docs are
walked best first instead (``Scorer.best_first``: bm25 on the table of distinct docs sorted by SQLite, a bound
carried over to the cutoff's average length), and only as many are scored as can reach the top ``limit``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

import apsw

from .schema import OPEN, has_spans
from .snapshot import DOCS_PARAM, Snapshot, rows_source

K1 = 1.2
B = 0.75
CONSTANTS = {"k1": K1, "b": B, "omb": 1 - B, "k1p1": K1 + 1.0}
MARGIN = 1e-9
"""Relative slack on the bound a skipped doc cannot reach (floating-point sums of the terms)."""
WALKED = 1
"""The most phrases walked best first (``Scorer.best_first``). Each walk costs a pass of bm25 over the docs
holding its phrase, and a doc not met may hold every phrase as much as the last docs met on their walks: with
two common words on the 10x Hub the walks rarely suffice (limit 50 and up), so only one-phrase queries are
walked (every count is exact: the tests walk up to three)."""
FIRST = 256
"""The fewest docs ``Scorer.best_first`` reads for each phrase (more when fewer than twice ``limit`` visible rows
are expected from them)."""
SHARE = 16
"""Phrases are walked best first only when the docs read for each are at most 1/SHARE of the docs holding it: a
doc read so costs several times what it costs among all the docs scored at once (the 1x and 10x Hub)."""

TEMP = {
    "kw_docs": "(doc INTEGER PRIMARY KEY, n INTEGER, s REAL NOT NULL DEFAULT 0.0)",
    "kw_whole": "(id INTEGER PRIMARY KEY)",
    "kw_adj": "(doc INTEGER PRIMARY KEY, delta INTEGER NOT NULL)",
}


def spans_source(con: apsw.Connection) -> str:
    """``search_spans``, or the same counts over ``search_rows`` in a database from before it (read-only)."""
    if has_spans(con):
        return "search_spans"
    return (
        f"(SELECT doc_id, vault_id, born, coalesce(died, {OPEN}) AS died, 1 AS rows "
        "FROM search_rows INDEXED BY search_rows_by_doc)"
    )


def adjust(con: apsw.Connection, snap: Snapshot) -> bool:
    """Fill ``temp.kw_adj`` with the validity overlay's change to each doc's visible rows (as ``rows_source``:
    the removed revisions' rows out, the added ones' in); False when there is none."""
    if not snap.removed and not snap.added:
        return False
    con.execute(
        """INSERT INTO temp.kw_adj (doc, delta)
            SELECT doc_id, sum(d) FROM (
                SELECT doc_id, -1 AS d FROM search_rows WHERE note_id IN (SELECT value FROM json_each(:rm))
                    AND vault_id = :v AND born <= :b AND (died IS NULL OR died > :b)
                UNION ALL SELECT doc_id, 1 FROM search_rows WHERE note_id IN (SELECT value FROM json_each(:add)))
            GROUP BY doc_id""",
        {
            "rm": json.dumps(sorted(snap.removed)),
            "add": json.dumps(sorted(snap.added)),
            "v": snap.vault_id,
            "b": snap.batch,
        },
    )
    return True


def phrase_df(con: apsw.Connection, snap: Snapshot, fts_phrase: str, max_doc: int, spans: str, adjusted: bool) -> int:
    """Visible rows at the cutoff whose doc holds the phrase."""
    params = {"phrase": fts_phrase, "maxdoc": max_doc, "v": snap.vault_id, "b": snap.batch}
    df = con.execute(
        f"""SELECT coalesce(sum(s.rows), 0) FROM search_fts JOIN {spans} s ON s.doc_id = search_fts.rowid
            AND s.vault_id = :v AND s.born <= :b AND s.died > :b
            WHERE search_fts MATCH :phrase AND search_fts.rowid <= :maxdoc""",
        params,
    ).fetchone()[0]
    if adjusted:
        df += con.execute(
            """SELECT coalesce(sum(a.delta), 0) FROM temp.kw_adj a WHERE a.doc <= :maxdoc AND EXISTS
               (SELECT 1 FROM search_fts WHERE search_fts MATCH :phrase AND search_fts.rowid = a.doc)""",
            params,
        ).fetchone()[0]
    return df


class Scorer:
    """The docs scored so far (``temp.kw_docs``: visible rows ``n``, summed terms ``s``) for one query."""

    def __init__(
        self,
        con: apsw.Connection,
        snap: Snapshot,
        freqs: list[tuple[str, dict] | None],
        idfs: list[float],
        avgdl: float,
        spans: str,
        adjusted: bool,
    ) -> None:
        self.con, self.snap, self.freqs, self.idfs = con, snap, freqs, idfs
        self.avgdl, self.spans, self.adjusted = avgdl, spans, adjusted
        self.pending = False

    def add(self, select_docs: str, params: dict[str, object]) -> None:
        """Add the docs ``select_docs`` gives (one column), to be scored by the next ``score``."""
        self.con.execute(f"INSERT OR IGNORE INTO temp.kw_docs (doc) {select_docs}", params)
        self.pending = True

    def score(self) -> None:
        """Score the docs added since the last call: their summed terms and their visible rows."""
        if not self.pending:
            return
        self.pending = False
        con = self.con
        # The score is summed phrase by phrase, in query order, as fts5Bm25Function adds its terms (a phrase
        # absent from a doc adds exactly 0.0): each phrase's term is added to the new docs holding it as the
        # phrase's walk finds them (``+rowid``: the new docs filter the walk; SQLite does not run the match
        # again per doc).
        for i, found in enumerate(self.freqs):
            if found is None:  # no doc holds the phrase
                continue
            sql, sql_params = found
            con.execute(
                f"""INSERT INTO temp.kw_docs (doc, s)
                    SELECT doc, :idf * ((tf * :k1p1) / (tf + :k1 * (:omb + :b * length / :avgdl))) FROM ({sql}
                        AND +search_fts.rowid IN (SELECT doc FROM temp.kw_docs WHERE n IS NULL)) WHERE true
                    ON CONFLICT (doc) DO UPDATE SET s = s + excluded.s""",
                {**sql_params, "idf": self.idfs[i], "avgdl": self.avgdl},
            )
        con.execute(
            f"UPDATE temp.kw_docs SET n = {self._visible_rows('kw_docs.doc')} WHERE n IS NULL",
            {"v": self.snap.vault_id, "b": self.snap.batch},
        )

    def _visible_rows(self, doc: str) -> str:
        """SQL for the visible rows at the cutoff of the doc ``doc`` names (parameters ``:v``, ``:b``)."""
        adjust = f" + coalesce((SELECT a.delta FROM temp.kw_adj a WHERE a.doc = {doc}), 0)" if self.adjusted else ""
        return (
            f"(SELECT coalesce(sum(s.rows), 0) FROM {self.spans} s WHERE s.doc_id = {doc} AND s.vault_id = :v "
            f"AND s.born <= :b AND s.died > :b){adjust}"
        )

    def best_first(self, phrases: list[str], max_doc: int, limit: int, first: int) -> bool:
        """Score the best ``first`` docs holding each of the query's phrases; True when no doc left can reach the
        best ``limit`` rows, else False (``add`` and ``score`` then score the rest). Docs already in
        ``temp.kw_docs`` are scored (``score``) and count.

        One phrase's term is increasing in its count ``tf`` and decreasing in the doc's length: bm25 on the table
        of distinct docs (in C, with that table's idf and average length), lowest first (SQLite's top-n sort),
        gives the docs holding the phrase by that term at the docs' average length. Each doc met is scored
        whole; a doc not met holds each phrase at most as much as the last doc met for that phrase, and
        ``tail_bound`` carries that over to the cutoff's average length (the threshold algorithm). The terms are
        the floating-point operations ``score`` does in SQL, in the same order."""
        con, walks = self.con, [i for i, found in enumerate(self.freqs) if found is not None]
        held = con.execute("SELECT doc, s, n FROM temp.kw_docs").fetchall()
        scored = [(s, n) for _, s, n in held if n > 0]
        seen = {doc for doc, _, _ in held}
        met: dict[int, dict[int, float]] = {}  # doc → phrase → its bm25 on the docs table
        rest = 0.0  # the most the phrases can add to a doc not met
        for i in walks:
            ranked = con.execute(
                "SELECT rowid, bm25(search_fts) AS r FROM search_fts WHERE search_fts MATCH :phrase "
                "AND rowid <= :maxdoc ORDER BY r LIMIT :n",
                {"phrase": phrases[i], "maxdoc": max_doc, "n": first},
            ).fetchall()
            for doc, rank in ranked:
                if doc not in seen:
                    met.setdefault(doc, {})[i] = rank
            if len(ranked) == first:  # else every doc holding the phrase is met
                entry = self.freqs[i]
                assert entry is not None  # walks holds only the phrases found
                found = entry[1]
                rest += self.idfs[i] * tail_bound(-ranked[-1][1] / found["didf"], found["davgdl"], self.avgdl)
        if met:
            batch = self._terms(met)
            con.executemany("INSERT INTO temp.kw_docs (doc, n, s) VALUES (?, ?, ?)", batch)
            scored += [(s, n) for _, n, s in batch if n > 0]
        edge = _edge(sorted(scored, reverse=True), limit)
        return rest == 0.0 or (edge is not None and rest * (1 + MARGIN) < edge)

    def _terms(self, met: dict[int, dict[int, float]]) -> list[tuple[int, int, float]]:
        """(doc, visible rows, summed terms) of the docs met: each phrase's count solved from its bm25 on the docs
        table, taken from the walk where the doc was met there, else from ``keyword._freqs_sql``."""
        docs = list(met)
        visible = self._visible(docs)
        tfs: dict[tuple[int, int], float] = {}
        for i, found in enumerate(self.freqs):
            if found is None:
                continue
            sql, params = found
            if all(i in met[doc] for doc in docs):
                for doc in docs:
                    g = -met[doc][i] / params["didf"]
                    length = visible[doc][0]
                    tfs[doc, i] = _round(g * (K1 * ((1 - B) + B * length / params["davgdl"])) / ((K1 + 1.0) - g))
            else:
                for doc, tf, _ in self.con.execute(
                    f"{sql} AND +search_fts.rowid IN (SELECT value FROM json_each(:docs))",
                    {**params, "docs": json.dumps(docs)},
                ):
                    tfs[doc, i] = tf
        out = []
        for doc in docs:
            length, n = visible[doc]
            s = 0.0
            for i, idf in enumerate(self.idfs):
                tf = tfs.get((doc, i))
                if tf is not None:  # as ``score``: the terms in query order, one only where the phrase is held
                    s = s + idf * ((tf * (K1 + 1.0)) / (tf + K1 * ((1 - B) + B * length / self.avgdl)))
            out.append((doc, n, s))
        return out

    def _visible(self, docs: list[int]) -> dict[int, tuple[int, int]]:
        """doc → (length, visible rows at the cutoff)."""
        return {
            doc: (length, n)
            for doc, length, n in self.con.execute(
                f"""SELECT j.value, d.length, {self._visible_rows("j.value")}
                FROM json_each(:docs) j JOIN search_docs d ON d.id = j.value""",
                {"docs": json.dumps(docs), "v": self.snap.vault_id, "b": self.snap.batch},
            )
        }

    def threshold(self, limit: int) -> float | None:
        """The summed terms of the ``limit``-th best visible row among the docs scored (None: fewer rows)."""
        return _edge(self.con.execute("SELECT s, n FROM temp.kw_docs WHERE n > 0 ORDER BY s DESC"), limit)


def _round(x: float) -> float:
    """SQLite's ``round(x)`` of a positive x."""
    return float(math.floor(x + 0.5))


def _edge(scored: Iterable[tuple[float, int]], limit: int) -> float | None:
    """The summed terms of the ``limit``-th best visible row among (terms, visible rows), best first."""
    seen = 0
    for s, n in scored:
        seen += n
        if seen >= limit:
            return s
    return None


def tail_bound(g_docs: float, davgdl: float, avgdl: float) -> float:
    """The most one phrase's term (without its idf) can be at average length ``avgdl`` in a doc whose term at
    ``davgdl`` is at most ``g_docs``.

    The term is ``(k1 + 1) / (1 + v + k1 b u / avgdl)`` with ``v = k1 (1 - b) / tf`` in ``(0, k1 (1 - b)]`` and
    ``u = length / tf >= 1`` (each occurrence starts at its own token): the least ``v + k1 b u / avgdl`` under
    ``v + k1 b u / davgdl >= (k1 + 1) / g_docs - 1`` is a linear program, its least value at a vertex."""
    if g_docs <= 0.0:
        return 0.0
    a, c_docs, c = K1 * (1 - B), K1 * B / davgdl, K1 * B / avgdl
    q = (K1 + 1.0) / g_docs - 1.0
    corners = [(0.0, max(1.0, q / c_docs)), (a, max(1.0, (q - a) / c_docs))]
    if 0.0 <= q - c_docs <= a:
        corners.append((q - c_docs, 1.0))
    least = min(v + c * u for v, u in corners)
    return (K1 + 1.0) / (1.0 + least)


def best_rows(
    con: apsw.Connection, snap: Snapshot, allowed: set[int] | None, limit: int, within: str = ""
) -> list[tuple]:
    """(row id, score) of the visible rows (of allowed notes) of the best docs in ``temp.kw_docs`` (``within``:
    a WHERE clause narrowing those docs): whole groups of equal score, best first, until ``limit`` rows are
    reached (as ``keyword._lowest``: every row tied with the last one is kept)."""
    out: list[tuple] = []
    taken, step, last = 0, max(limit + 1, 64), None
    while True:
        docs = con.execute(
            f"SELECT doc, -1.0 * s FROM temp.kw_docs {within} ORDER BY s DESC, doc LIMIT :n OFFSET :o",
            {"n": step, "o": taken},
        ).fetchall()
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


def temp_tables(con: apsw.Connection) -> None:
    for name, columns in TEMP.items():
        con.execute(f"CREATE TEMP TABLE IF NOT EXISTS {name} {columns}")
        con.execute(f"DELETE FROM temp.{name}")


def clear(con: apsw.Connection) -> None:
    for name in TEMP:
        con.execute(f"DELETE FROM temp.{name}")

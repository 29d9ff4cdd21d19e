"""Ranking on PostgreSQL (``pg/keyword.py``'s tables): FTS5's tokens, the postings of a query's phrases, and
BM25 at any cutoff, equal to a fresh FTS5 index over the visible chunks.

A query (``tokenizer.parse_query``: phrases, OR-ed) is scored as FTS5's ``bm25()`` would on a fresh table
of exactly the visible rows: N and the total tokens of every visible row of the vault, each phrase's
number of visible rows holding it, each doc's occurrences of each phrase (consecutive positions; a
prefix phrase's last token any term starting with it, in byte order as FTS5 compares). The score is
summed phrase by phrase in query order with ``keyword.bm25``, FTS5's own floating-point order, and ties
are broken by path and position as in the SQLite engine (``keyword._top``).

What a query reads, made cheap (migrations m005, m006) without changing an answer:

- N and the total tokens of the visible rows are one row of ``search_stats`` (kept by the indexer per batch),
  corrected by the validity overlay, not a scan of every visible row;
- a term's postings (doc, tf) come from the doc rows holding its ids, found by the GIN index of the ids'
  buckets (``pg/postings.py``, m013, m015; by the ids' own GIN index before m015, by the covering index
  ``search_postings_by_term_doc`` before m013); which of them the database has is asked once per connection
  (``pg/catalog.py``); positions are decoded only for a phrase of several terms, and only for the docs holding
  all of them (found from the index first);
- "now" reads the term ids and frequencies of the live docs alone (``search_live_terms``, m013; m006's
  ``search_live_postings`` before it) and each live doc's current rows and length (``search_live``,
  ``pg/live.py``, m006); a past cutoff reads only the postings of docs up to the highest doc any row
  visible then uses (``search_stats.max_doc``: doc ids grow with time);
- one statement (``_SCORE``) joins each phrase's docs to the visible rows, counts each phrase's document
  frequency, scores every doc approximately (float8, any summation order) and returns only the docs that
  can be among the best ``limit`` allowed rows (within a relative 1e-9 of the ``limit``-th, far wider than
  reordering a sum can move a score) and the docs holding the whole query; their exact scores are then
  computed in Python phrase by phrase in FTS5's order (``search.keyword.bm25``), so the answer is the
  unpruned one, bit for bit.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from typing import Any

from ...embed.tokenizer import TOKENIZE, KeywordQuery
from ..search.cutoff import K1, B
from ..search.keyword import Scored, _top, bm25, idf
from ..search.snapshot import DOCS_PARAM, Snapshot, rows_source
from . import postings
from .catalog import has
from .compat import translate

KEY_CHARS = 256
"""How much of a term the postings index holds (``search_postings_by_term``)."""
SHORT_BYTES = 1024
"""Terms up to this many UTF-8 bytes are looked up whole in ``search_postings_by_term_doc`` (m005)."""


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


def _short(term: str) -> bool:
    return len(term.encode("utf-8", "surrogatepass")) <= SHORT_BYTES


def _postings(
    term: str, prefix: bool, columns: str, *, live: bool = False, max_doc: int | None = None
) -> tuple[str, list[Any]]:
    """SQL selecting ``columns`` of the postings of ``term`` (a prefix: of every term starting with it, in byte
    order as FTS5 compares), by the index that holds them best: of the live docs (``live``: ``search_live_postings``,
    which has no positions) or of every doc (of the docs up to ``max_doc`` when given)."""
    bound, extra = ("", []) if max_doc is None else (" AND doc <= %s", [max_doc])
    table = "search_live_postings" if live else "search_postings"
    if not prefix and _short(term):  # an index-only scan of the (term, doc) INCLUDE (tf) index
        return (
            f"SELECT {columns} FROM {table} WHERE term = %s AND octet_length(term) <= {SHORT_BYTES}{bound}",
            [term, *extra],
        )
    key = term[:KEY_CHARS]
    if not prefix:
        return (
            f"SELECT {columns} FROM {table} WHERE left(term, 256) = %s AND term = %s"
            f"{f' AND octet_length(term) > {SHORT_BYTES}' if live else ''}{bound}",
            [key, term, *extra],
        )
    upper = key[:-1] + chr(ord(key[-1]) + 1) if ord(key[-1]) < 0x10FFFF else None
    longer = (
        f"SELECT {columns} FROM {table} WHERE left(term, 256) >= %s "
        f"AND (%s::text IS NULL OR left(term, 256) < %s) AND starts_with(term, %s){bound}"
    )
    if not live:
        return longer, [key, upper, upper, term, *extra]
    # the live table's two partial indexes: short terms by the covering one, long ones by left(term, 256)
    top = term[:-1] + chr(ord(term[-1]) + 1) if ord(term[-1]) < 0x10FFFF else None
    return (
        f"SELECT {columns} FROM {table} WHERE term >= %s AND (%s::text IS NULL OR term < %s) "
        f"AND starts_with(term, %s) AND octet_length(term) <= {SHORT_BYTES} UNION ALL "
        f"{longer} AND octet_length(term) > {SHORT_BYTES}",
        [term, top, top, term, key, upper, upper, term],
    )


def _phrase_freqs(
    con: Any, wanted: list[str], prefixes: list[bool], *, live: bool = False, max_doc: int | None = None
) -> dict[int, int]:
    """doc → occurrences of the phrase of terms ``wanted`` at consecutive positions (a term flagged in
    ``prefixes``: any term starting with it, in byte order as FTS5 compares), for every doc holding it (of
    the live docs with ``live``, of the docs up to ``max_doc`` when given). The docs holding every term are
    found first (doc ids only, from the index); positions are read for them alone."""
    if not wanted:
        return {}
    if compact(con):
        return _compact_phrase_freqs(con, wanted, prefixes, live, max_doc)
    where: dict[str, Any] = {"live": live, "max_doc": max_doc}
    if len(wanted) == 1:  # one term: its occurrences are its term frequency
        sql, params = _postings(wanted[0], prefixes[0], "doc, tf", **where)
        out: dict[int, int] = defaultdict(int)
        for doc, tf in con.raw.execute(sql, params).fetchall():
            out[int(doc)] += int(tf)
        return dict(out)
    # the docs holding every term, from the index alone
    parts = [_postings(term, prefix, "doc", **where) for term, prefix in zip(wanted, prefixes)]
    holding = [
        int(r[0])
        for r in con.raw.execute(" INTERSECT ".join(f"({sql})" for sql, _ in parts), [p for _, ps in parts for p in ps])
    ]
    if not holding:
        return {}
    per_token: list[dict[int, list[int]]] = []
    for term, prefix in zip(wanted, prefixes):
        sql, params = _postings(term, prefix, "doc, positions")
        found: dict[int, list[int]] = defaultdict(list)
        for doc, positions in con.raw.execute(
            f"SELECT * FROM ({sql}) AS s WHERE doc = ANY(%s)", params + [holding]
        ).fetchall():
            found[int(doc)].extend(positions)
        per_token.append(found)
    docs = set(per_token[0]).intersection(*per_token[1:])
    freqs: dict[int, int] = {}
    for doc in docs:
        sets = [set(found[doc]) for found in per_token]
        count = sum(1 for start in sets[0] if all(start + k in sets[k] for k in range(1, len(sets))))
        if count:
            freqs[doc] = count
    return freqs


def _compact_phrase_freqs(
    con: Any, wanted: list[str], prefixes: list[bool], live: bool, max_doc: int | None
) -> dict[int, int]:
    """``_phrase_freqs`` on the postings of m013 (``pg/postings.py``): each term's ids, the docs holding one of each
    from the index (the live docs' with ``live``), and positions decoded for those docs alone."""
    each = [postings.term_ids(con.raw, term, prefix) for term, prefix in zip(wanted, prefixes)]
    if not all(each):
        return {}
    if len(each) == 1:
        sql = postings.frequencies(each[0], "t", max_doc, live=live, buckets=postings.bucketed(con.raw))
        return {int(doc): int(f) for doc, f in con.raw.execute(sql, {"t": each[0], "t_max": max_doc})}
    docs = postings.holding(con.raw, each, max_doc, live=live)
    if not docs:
        return {}
    per_token = postings.positions(con.raw, docs, each)
    freqs: dict[int, int] = {}
    for doc in set(per_token[0]).intersection(*per_token[1:]):
        sets = [set(found[doc]) for found in per_token]
        count = sum(1 for start in sets[0] if all(start + k in sets[k] for k in range(1, len(sets))))
        if count:
            freqs[doc] = count
    return freqs


def compact(con: Any) -> bool:
    """Whether the database keeps its postings one row per doc (m013, ``pg/postings.py``); before it, the
    one-row-per-(term, doc) tables are read (a newer vaultsync reads an older schema until it is migrated)."""
    return has(con.raw, "search_doc_terms")


def _query_phrase(text: str, prefix: bool) -> tuple[list[str], list[bool]]:
    """A query phrase's terms (FTS5's query tokenizing), the last one a prefix when ``prefix``."""
    wanted = tokens(text, query=True)
    return wanted, [prefix and i == len(wanted) - 1 for i in range(len(wanted))]


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


def rank_default(
    con: Any,
    snap: Snapshot,
    query: KeywordQuery,
    whole: tuple[list[str], list[bool]] | None,
    allowed: set[int] | None,
    limit: int,
) -> tuple[list[Scored], list[Scored]]:
    """``rank``'s best ``limit`` rows, and the best ``limit`` (same scores, same order) among the rows whose
    text holds ``whole`` (terms and prefix flags: the whole query in order; empty when None), as
    ``search.keyword.rank_default`` gives them.

    One statement does the bulk in the database (``_SCORE``): each phrase's docs and occurrences, the visible
    rows of those docs, each phrase's document frequency, and an approximate BM25 per doc (float8, summed in
    any order); it returns only the docs that can be among the best ``limit`` allowed rows (every doc whose
    approximate score is within a relative 1e-9 of the ``limit``-th row's: far wider than any reordering of
    the sum can move it) and the docs holding ``whole``. Their exact scores are then computed here, phrase by
    phrase in FTS5's order (``search.keyword.bm25``), so the answer is the unpruned one, bit for bit."""
    if not query.phrases or limit <= 0 or (allowed is not None and not allowed):
        return [], []
    n_rows, total, max_doc = _stats(con, snap)
    if n_rows <= 0:
        return [], []
    # now: the live docs' postings and row counts (m006); a past cutoff: the docs written by then
    live = snap.live
    where: dict[str, Any] = {"live": live, "max_doc": None if live else max_doc}
    params: dict[str, Any] = {
        "nrows": float(n_rows),
        "avgdl": total / n_rows,
        "lim": limit,
        "kk1": K1,
        "kk1p1": K1 + 1.0,
        "kb": B,
        "komb": 1 - B,
    }
    sources = []
    by_id = compact(con)
    buckets = by_id and postings.bucketed(con.raw)
    for i, phrase in enumerate(query.phrases):
        wanted, prefixes = _query_phrase(phrase.text, phrase.prefix)
        if len(wanted) == 1 and by_id:  # its docs and occurrences from the doc rows holding its ids (m013)
            ids = postings.term_ids(con.raw, wanted[0], prefixes[0])
            params[f"t{i}"], params[f"t{i}_max"] = ids, where["max_doc"]
            sql = (
                postings.frequencies(ids, f"t{i}", where["max_doc"], live=live, buckets=buckets)
                if ids
                else "SELECT 0::bigint AS doc, 0 AS f"
            )
            sources.append(f"SELECT {i} AS i, doc, f FROM ({sql}) AS s{i}{'' if ids else ' WHERE false'}")
        elif len(wanted) == 1:
            sql, values = _postings(wanted[0], prefixes[0], "doc, tf", **where)
            params.update({f"p{i}_{k}": v for k, v in enumerate(values)})
            sql = sql.replace("%s", "{}").format(*(f"%(p{i}_{k})s" for k in range(len(values))))
            sources.append(f"SELECT {i} AS i, doc, sum(tf)::integer AS f FROM ({sql}) AS s{i} GROUP BY doc")
        else:
            found = _phrase_freqs(con, wanted, prefixes, **where) if wanted else {}
            params[f"d{i}"], params[f"f{i}"] = list(found), list(found.values())
            sources.append(f"SELECT {i} AS i, unnest(%(d{i})s::bigint[]) AS doc, unnest(%(f{i})s::integer[]) AS f")
    holding = _phrase_freqs(con, *whole, **where) if whole is not None else {}
    params["keep"] = list(holding)
    if live and allowed is None:  # each live doc's current rows, counted
        params["vid"] = snap.vault_id
        visible = (
            "SELECT l.doc_id, l.rows AS n, l.rows AS na, l.length FROM search_live l "
            "WHERE l.vault_id = %(vid)s AND l.doc_id IN (SELECT doc FROM cand)"
        )
    else:
        rows_sql, rows_params = rows_source(snap, None, docs="SELECT doc AS value FROM cand")
        params.update(rows_params)
        na = "count(*)"
        if allowed is not None:
            na = "count(*) FILTER (WHERE vr.note_id = ANY(%(okn)s::bigint[]))"
            params["okn"] = sorted(allowed)
        visible = (
            f"SELECT vr.doc_id, count(*) AS n, {na} AS na, d.length FROM ({translate(rows_sql)[0]}) AS vr "
            "JOIN search_docs d ON d.id = vr.doc_id GROUP BY vr.doc_id, d.length"
        )
    found = con.raw.execute(_SCORE.format(phrases=" UNION ALL ".join(sources), visible=visible), params).fetchall()
    if not found:
        return [], []
    dfs = dict(zip(found[0][4], found[0][5]))
    idfs = [idf(n_rows, int(dfs.get(i, 0))) for i in range(len(query.phrases))]
    avgdl = total / n_rows
    scores: dict[int, float] = {}
    for doc, length, phrases, freqs, _, _ in found:
        f = [0.0] * len(query.phrases)
        for i, n in zip(phrases, freqs):
            f[i] = float(n)
        scores[int(doc)] = bm25(f, idfs, float(length), avgdl)
    source, sparams = rows_source(snap, None, docs=DOCS_PARAM)
    scored = [
        (Scored(int(row_id), scores[doc]), doc)
        for row_id, doc, note_id in con.execute(source, {**sparams, "docs": json.dumps(sorted(scores))})
        if allowed is None or note_id in allowed
    ]
    held: list[Scored] = []
    if whole is not None:
        held = _top(con, [item for item, doc in scored if doc in holding], limit)
    return _top(con, [item for item, _ in scored], limit), held


_SCORE = """
WITH p AS MATERIALIZED ({phrases}),
cand AS MATERIALIZED (SELECT DISTINCT doc FROM p),
v AS MATERIALIZED ({visible}),
df AS MATERIALIZED (SELECT p.i, sum(v.n)::float8 AS df FROM p JOIN v ON v.doc_id = p.doc GROUP BY p.i),
w AS MATERIALIZED (SELECT i, df, greatest(ln((%(nrows)s - df + 0.5) / (df + 0.5)), 0.0) AS l FROM df),
s AS MATERIALIZED (
    SELECT p.doc AS doc_id, min(v.na) AS na, sum(CASE WHEN w.l <= 0 THEN 1e-6 ELSE w.l END
               * ((p.f * %(kk1p1)s) / (p.f + %(kk1)s * (%(komb)s + %(kb)s * v.length / %(avgdl)s)))) AS s
    FROM p JOIN v ON v.doc_id = p.doc JOIN w ON w.i = p.i WHERE v.na > 0 GROUP BY p.doc),
top AS (SELECT s.doc_id, s.na, s.s FROM s ORDER BY s.s DESC, s.doc_id LIMIT %(lim)s),
e AS MATERIALIZED (
    SELECT coalesce(max(t.s) FILTER (WHERE t.cum >= %(lim)s), '-Infinity'::float8) AS e
    FROM (SELECT top.s, sum(top.na) OVER (ORDER BY top.s DESC, top.doc_id ROWS UNBOUNDED PRECEDING) AS cum
          FROM top) AS t),
k AS (SELECT s.doc_id FROM s, e WHERE s.s >= e.e - (abs(e.e) * 1e-9 + 1e-12) OR s.doc_id = ANY(%(keep)s::bigint[]))
SELECT k.doc_id, v.length, array_agg(p.i ORDER BY p.i), array_agg(p.f ORDER BY p.i),
       (SELECT array_agg(w.i ORDER BY w.i) FROM w), (SELECT array_agg(w.df::bigint ORDER BY w.i) FROM w)
FROM k JOIN v ON v.doc_id = k.doc_id JOIN p ON p.doc = k.doc_id GROUP BY k.doc_id, v.length
"""
"""``rank_default``'s statement: the docs that can reach the best ``lim`` rows, with what scores them exactly.
Each doc's approximate score is one hashed sum; the ``lim``-th allowed row is among the best ``lim`` docs (each
has one at least), so only those are sorted; the phrases' occurrences are gathered for the docs kept alone.
Every step is materialized: inlined, a nested loop can compute an aggregate again for every outer row."""


def _stats(con: Any, snap: Snapshot) -> tuple[int, int, int | None]:
    """Visible chunk rows at the snapshot and their total tokens: ``search_stats`` at the cutoff's batch,
    corrected by the validity overlay (the removed revisions' rows out, the added ones' in); and the highest
    doc any of them can use (None: unknown)."""
    row = con.raw.execute(
        "SELECT rows, tokens, max_doc FROM search_stats WHERE vault_id = %s AND batch_id <= %s "
        "ORDER BY batch_id DESC LIMIT 1",
        (snap.vault_id, snap.batch),
    ).fetchone()
    rows, tokens, max_doc = (int(row[0]), int(row[1]), row[2]) if row else (0, 0, None)
    count = "SELECT count(*), coalesce(sum(d.length), 0) FROM search_rows r JOIN search_docs d ON d.id = r.doc_id "
    if snap.removed:
        less = con.raw.execute(
            count + "WHERE r.note_id = ANY(%s) AND r.vault_id = %s AND r.born <= %s "
            "AND (r.died IS NULL OR r.died > %s)",
            (sorted(snap.removed), snap.vault_id, snap.batch, snap.batch),
        ).fetchone()
        rows, tokens = rows - int(less[0]), tokens - int(less[1])
    if snap.added:
        more = con.raw.execute(count + "WHERE r.note_id = ANY(%s)", (sorted(snap.added),)).fetchone()
        rows, tokens = rows + int(more[0]), tokens + int(more[1])
    return rows, tokens, None if max_doc is None else int(max_doc)


def max_doc(con: Any, snap: Snapshot) -> int | None:
    """The highest doc a chunk row visible at the snapshot can use (doc ids grow with time: m006)."""
    row = con.raw.execute(
        "SELECT max_doc FROM search_stats WHERE vault_id = %s AND batch_id <= %s ORDER BY batch_id DESC LIMIT 1",
        (snap.vault_id, snap.batch),
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])

"""Exact cosine ranking over the vectors of exactly the chunks visible in a snapshot (sqlite-vec, brute force).

Each distinct doc has one int8 vector; every visible chunk row using that doc shares its similarity.
Order: similarity descending (distance ascending), then path, then chunk position.
"""

from __future__ import annotations

import functools
import json
import math
import struct
from array import array
from operator import mul

import apsw

from ...embed.embedders import Embedder, quantize
from .keyword import Scored, order_key
from .snapshot import DOCS_PARAM, Snapshot, rows_source

DISTANCE = "vec_distance_cosine(vec_int8(v.embedding), vec_int8(:q))"


@functools.lru_cache(maxsize=16)
def query_vector(embedder: Embedder, query: str) -> bytes:
    """The query's quantized vector (kept for a few queries: the default mode asks twice when it fuses)."""
    return quantize(embedder.embed_batch([query])[0])


def searchable(embedder: Embedder, query: str, allowed: set[int] | None, limit: int) -> bytes | None:
    """The query's vector, or None when nothing can be found (no rows asked for, no note allowed, or a query
    without a feature): the same guard for both engines."""
    if limit <= 0 or (allowed is not None and not allowed):
        return None
    q = query_vector(embedder, query)
    return q if any(q) else None


def rank(
    con: apsw.Connection, snap: Snapshot, embedder: Embedder, query: str, allowed: set[int] | None, limit: int
) -> list[Scored]:
    """The ``limit`` visible chunks (of allowed notes) nearest the query; ``score`` is the cosine similarity."""
    q = searchable(embedder, query, allowed, limit)
    if q is None:
        return []
    source, params = rows_source(snap, allowed)
    params = {**params, "q": q}
    if snap.live and allowed is None:  # the current docs' vectors, kept apart: scan only those
        nearest = f"SELECT v.doc_id, {DISTANCE} AS d FROM search_live_vectors v WHERE v.vault_id = :vault"
        params["vault"] = snap.vault_id
    else:
        nearest = ""
    # Unfiltered, the visible docs are most of the table: scan it in order and test membership
    # (``+`` keeps SQLite from seeking each doc); a filter's few docs are looked up one by one.
    member = "v.doc_id" if allowed is not None else "+v.doc_id"
    nearest = (
        nearest
        or f"SELECT v.doc_id, {DISTANCE} AS d FROM search_vectors v WHERE {member} IN (SELECT doc_id FROM ({source}))"
    )
    docs = con.execute(f"{nearest} ORDER BY d LIMIT :n", {**params, "n": limit + 1}).fetchall()
    if len(docs) > limit and docs[limit - 1][1] == docs[limit][1]:
        edge = docs[limit - 1][1]
        docs = [d for d in docs if d[1] < edge] + con.execute(
            f"SELECT doc_id, d FROM ({nearest}) WHERE d = :edge", {**params, "edge": edge}
        ).fetchall()
    if not docs:
        return []
    return best_rows(con, snap, allowed, {doc_id: 1.0 - d for doc_id, d in docs}, limit)


def best_rows(
    con: apsw.Connection, snap: Snapshot, allowed: set[int] | None, similarity: dict[int, float], limit: int
) -> list[Scored]:
    """The best ``limit`` visible chunk rows (of allowed notes) using the docs of ``similarity`` (doc id →
    cosine similarity), by similarity, then path, then chunk position (both engines)."""
    by_doc, by_doc_params = rows_source(snap, allowed, docs=DOCS_PARAM)
    rows = con.execute(by_doc, {**by_doc_params, "docs": json.dumps(sorted(similarity))}).fetchall()
    scored = [Scored(row_id, similarity[doc_id]) for row_id, doc_id, _ in rows]
    keys = order_key(con, scored)
    scored.sort(key=lambda s: (-s.score, keys[s.row_id]))
    return scored[:limit]


def similarities(con: apsw.Connection, embedder: Embedder, query: str, row_ids: list[int]) -> dict[int, float]:
    """row id → cosine similarity of its doc's vector to the query (rows without a vector are left out)."""
    q = query_vector(embedder, query)
    if not any(q) or not row_ids:
        return {}
    rows = con.execute(
        f"""SELECT r.id, {DISTANCE} FROM search_rows r JOIN search_vectors v ON v.doc_id = r.doc_id
                           WHERE r.id IN (SELECT value FROM json_each(:ids))""",
        {"q": q, "ids": json.dumps(row_ids)},
    )
    return {row_id: 1.0 - d for row_id, d in rows}


_F32 = struct.Struct("f")
_EXACT = 1 << 24
"""Below this, float32 sums of int8 products are exact integers."""


def _f32(x: float) -> float:
    return _F32.unpack(_F32.pack(x))[0]


def _sum32(products: object) -> float:
    total = 0.0
    for p in products:  # type: ignore[attr-defined]  # an iterable of numbers (numpy or list)
        total = _f32(total + p)  # the double sum is exact: rounding it once is float32's addition
    return total


def similarity(a: bytes, b: bytes) -> float:
    """``1 - vec_distance_cosine(vec_int8(a), vec_int8(b))`` computed in Python exactly as sqlite-vec does:
    float32 sums of the products (exact integers below 2**24), the quotient in double, the distance
    rounded to float32. For an engine without sqlite-vec (PostgreSQL) to give the same scores, bit for bit."""
    x, y = array("b", a), array("b", b)
    na, nb = sum(map(mul, x, x)), sum(map(mul, y, y))
    if max(na, nb) < _EXACT:  # |partial dot| <= sqrt(partial na * partial nb): exact too
        dot = sum(map(mul, x, y))
    else:
        dot, na, nb = _sum32(map(mul, x, y)), _sum32(map(mul, x, x)), _sum32(map(mul, y, y))
    return 1.0 - _f32(1 - dot / (math.sqrt(na) * math.sqrt(nb)))

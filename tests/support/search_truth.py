"""Ground truth for search, rebuilt independently from ``export`` output: a fresh FTS5 table, a brute force."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import apsw

from vaultsync.embed.embedders import Embedder, quantize
from vaultsync.store.db import connect


class FreshKeyword:
    """A fresh FTS5 table over exactly the exported ``indexed_text`` of the chunks the index holds
    (``"indexed": true``), built once and asked many queries."""

    def __init__(self, header: dict[str, Any], chunks: list[dict[str, Any]]) -> None:
        self.chunks = chunks = [c for c in chunks if c["indexed"]]
        self.con = apsw.Connection(":memory:")
        self.con.execute(f"CREATE VIRTUAL TABLE gt USING fts5(indexed_text, tokenize='{header['tokenizer']}')")
        with self.con:
            self.con.executemany(
                "INSERT INTO gt (rowid, indexed_text) VALUES (?, ?)",
                [(i, c["indexed_text"]) for i, c in enumerate(chunks)],
            )

    def search(
        self, expression: str, limit: int | None = None, within: str | None = None
    ) -> list[tuple[str, str, float]]:
        """(path, chunk_id, bm25), ordered by bm25 then path then chunk position; with ``within``, only the
        rows that also match that FTS5 expression (their bm25 still that of ``expression`` alone)."""
        chunks = self.chunks
        sql = "SELECT rowid, bm25(gt) FROM gt WHERE gt MATCH ?"
        if within is not None:
            sql += " AND rowid IN (SELECT rowid FROM gt WHERE gt MATCH ?)"
        rows = self.con.execute(sql, (expression,) if within is None else (expression, within)).fetchall()
        ranked = sorted(rows, key=lambda r: (r[1], chunks[r[0]]["path"], chunks[r[0]]["ord"]))
        out = [(chunks[i]["path"], chunks[i]["chunk_id"], score) for i, score in ranked]
        return out if limit is None else out[:limit]

    def close(self) -> None:
        self.con.close()


def fresh_keyword(
    header: dict[str, Any],
    chunks: list[dict[str, Any]],
    expression: str,
    limit: int | None = None,
    within: str | None = None,
) -> list[tuple[str, str, float]]:
    """(path, chunk_id, bm25) of a fresh FTS5 table over exactly the exported ``indexed_text``,
    ordered by bm25 then path then chunk position (``within``: see ``FreshKeyword.search``)."""
    index = FreshKeyword(header, chunks)
    try:
        return index.search(expression, limit, within)
    finally:
        index.close()


class BruteVector:
    """Exhaustive cosine comparison with the vectors of the exported chunks the index holds, embedded once."""

    def __init__(self, chunks: list[dict[str, Any]], embedder: Embedder) -> None:
        chunks = [c for c in chunks if c["indexed"]]
        self.chunks, self.embedder = chunks, embedder
        self.blobs = [quantize(vec) for vec in embedder.embed_many(c["indexed_text"] for c in chunks)]
        self.con = connect(":memory:")  # sqlite-vec's distance, one connection for every query

    def search(self, query: str, limit: int | None = None) -> list[tuple[str, str, float]]:
        """(path, chunk_id, cosine similarity), best first, then by path and chunk position."""
        q = quantize(self.embedder.embed_batch([query])[0])
        if not any(q):
            return []
        scored = []
        for chunk, blob in zip(self.chunks, self.blobs):
            if not any(blob):
                continue
            d = self.con.execute("SELECT vec_distance_cosine(vec_int8(?), vec_int8(?))", (blob, q)).fetchone()[0]
            scored.append((-(1.0 - d), chunk["path"], chunk["ord"], chunk["chunk_id"]))
        scored.sort()
        out = [(p, cid, -s) for s, p, _, cid in scored]
        return out if limit is None else out[:limit]


def brute_vector(
    chunks: list[dict[str, Any]], embedder: Embedder, query: str, limit: int | None = None
) -> list[tuple[str, str, float]]:
    """(path, chunk_id, cosine similarity) by exhaustive comparison of the exported chunks' vectors."""
    return BruteVector(chunks, embedder).search(query, limit)


def split_export(lines: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    items = list(lines)
    return items[0], items[1:]


def same_ranking(
    got: list[tuple[str, str, float]], want: list[tuple[str, str, float]], rel: float = 1e-9, abs_: float = 0.0
) -> None:
    """Assert the same chunks in the same order with scores equal to ``rel`` (relative) or ``abs_``."""
    assert [(p, c) for p, c, _ in got] == [(p, c) for p, c, _ in want], (got[:5], want[:5])
    for (_, _, a), (_, _, b) in zip(got, want):
        assert abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_), (a, b)


def whole_phrase(query: str) -> str | None:
    """The FTS5 phrase of the whole query, its phrases in order (``"a b" + "c" *``), written independently of
    ``signals.QueryTokens.whole``; None for a query of fewer than two tokens."""
    from vaultsync.embed.tokenizer import parse_query
    from vaultsync.store.search.signals import tokens

    phrases = parse_query(query).phrases
    if sum(len(tokens(p.text)) for p in phrases) < 2:
        return None
    return " + ".join(p.fts() for p in phrases)


def fresh_default(
    header: dict[str, Any],
    chunks: list[dict[str, Any]],
    query: str,
    limit: int | None = None,
    fused: Embedder | None = None,
    index: FreshKeyword | None = None,
    vectored: Callable[[dict[str, Any]], bool] | None = None,
) -> list[tuple[str, str, float]]:
    """(path, chunk_id, final score) of the default mode's pipeline over a fresh FTS5 table: its best
    ``POOL`` chunks by bm25 and its best ``POOL`` by bm25 among those matching the whole query as one phrase
    (joined, with ``fused``, by the brute force's nearest ``CANDIDATES``), re-ranked by the documented signals
    of their exported ``indexed_text``. ``index``: a fresh index already built over these chunks, to reuse;
    ``vectored``: which chunks have vectors (default all: a store whose vectors are partly filled has fewer).
    When no chunk holds the words it weighs, the nearest are only those at least ``fused.similarity_floor``
    similar."""
    from vaultsync.embed.tokenizer import parse_query
    from vaultsync.store.search.engine import CANDIDATES
    from vaultsync.store.search.everyday import content, everyday
    from vaultsync.store.search.signals import POOL, QueryTokens, combine, signals, vector_weight

    parsed = parse_query(query)
    weighed = content(parsed)  # a pure function of the query: what a question in everyday words weighs
    pool: list[tuple[str, str, float]] = []
    if parsed.phrases:
        fresh = index or FreshKeyword(header, chunks)
        pool = fresh.search(weighed.expression, max(POOL, limit or 0))
        whole = whole_phrase(query)
        if whole is not None:
            known = {(p, c) for p, c, _ in pool}
            pool += [
                hit for hit in fresh.search(weighed.expression, max(POOL, limit or 0), whole) if hit[:2] not in known
            ]
        if index is None:
            fresh.close()
    cosines: dict[tuple[str, str], float] = {}
    if fused is not None:
        nearest = brute_vector([c for c in chunks if vectored is None or vectored(c)], fused, query)
        if not pool and fused.similarity_floor is not None:  # no chunk holds the words: only the similar ones
            nearest = [n for n in nearest if n[2] >= fused.similarity_floor]
        cosines = {(p, c): s for p, c, s in nearest}
        known = {(p, c) for p, c, _ in pool}
        pool += [(p, c, 0.0) for p, c, _ in nearest[: max(CANDIDATES, limit or 0)] if (p, c) not in known]
    text = {(c["path"], c["chunk_id"]): c for c in chunks}
    wanted, typed = QueryTokens.of(weighed), QueryTokens.of(parsed)
    found = [signals(text[p, c]["indexed_text"], wanted, typed) for p, c, _ in pool]
    if fused is not None:
        for (p, c, _), sig in zip(pool, found):
            sig["vector"] = cosines.get((p, c), 0.0)
    final = combine([s for _, _, s in pool], found, vector_weight(everyday(parsed), len(typed.sequence)))
    ranked = sorted(zip(pool, final), key=lambda x: (-x[1], x[0][0], text[x[0][0], x[0][1]]["ord"]))
    out = [(p, c, f) for (p, c, _), f in ranked]
    return out if limit is None else out[:limit]


def validity_bounds(content: str) -> tuple[str | None, str | None]:
    """``valid_from`` and ``valid_to`` as written in a test note's simple ``key: value`` frontmatter."""
    found: dict[str, str] = {}
    if content.startswith("---\n"):
        for line in content.split("---\n")[1].splitlines():
            key, _, value = line.partition(": ")
            found[key] = value
    return found.get("valid_from"), found.get("valid_to")


def overlay_oracle(chains: dict[str, list[str]], day: str) -> dict[str, str]:
    """Brute force of the validity overlay: per path, the newest revision (since the note last appeared
    there) that is valid on ``day``; a path with none is absent."""
    out = {}
    for path, chain in chains.items():
        for content in reversed(chain):
            start, end = validity_bounds(content)
            if (start is None or start <= day) and (end is None or day < end):
                out[path] = content
                break
    return out

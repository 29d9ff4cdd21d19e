"""Point-in-time search and export: what ``View.search`` and ``View.export`` run, in one read transaction.

Modes: ``hybrid`` (the default: BM25 candidates re-ranked by phrase, proximity and title/heading signals,
a chunk holding the whole query in order first, joined by the vector ranking for an embedder that fuses;
see ``signals``), ``keyword`` (FTS5 ``bm25()``
exactly) and ``vector`` (cosine similarity only).

Both engines run this module's ``search``: the modes, the shared ranks, the default mode's candidate pool and
signals, and the hits are one rule here; what an engine ranks with (its BM25 and its vector distances, how it
says its index is behind) comes in as ``Rankers`` (``SQLITE`` here, ``pg.view.RANKERS`` for PostgreSQL).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any
from urllib.parse import quote

import apsw

from ...disk.paths import note_name
from ...embed.embedders import Embedder
from ...embed.tokenizer import TOKENIZE, KeywordQuery, indexable, parse_query
from ...errors import ConfigError, StoreError
from ...search_filter import SearchFilter
from ...times import format_time
from . import backfill, everyday, keyword, signals, vector
from .embedding import query_embedder
from .index import index_lag
from .keyword import Scored
from .snapshot import CHUNK_COLUMNS, Snapshot, allowed_notes, bounded_from_core, chunk_record, export_rows, take
from .snippets import snippet

MODES = ("hybrid", "keyword", "vector")
DEFAULT_MODE = "hybrid"
CANDIDATES = 50
"""The default mode joins this many nearest chunks (or ``limit``) to its BM25 candidates, when it fuses."""
KEYWORD_TIE = 1e-9
"""Keyword scores within this relative distance share a rank (the rank a hit reports)."""
VECTOR_TIE = 1e-6
"""Cosine similarities within this distance share a rank (int8 vectors, float32 arithmetic)."""


def obsidian_uri(vault: str, path: str) -> str:
    return f"obsidian://open?vault={quote(vault, safe='')}&file={quote(note_name(path), safe='')}"


def shared_ranks(scored: Sequence[Scored], tied: Any) -> list[int]:
    """Competition ranks (1, 2, 2, 4 …): a score tied with the first of the previous group shares its rank."""
    ranks: list[int] = []
    lead = None
    for i, item in enumerate(scored):
        if lead is not None and tied(scored[lead].score, item.score):
            ranks.append(ranks[lead])
        else:
            lead = i
            ranks.append(i + 1)
    return ranks


def _kw_tied(a: float, b: float) -> bool:
    return abs(a - b) <= KEYWORD_TIE * max(abs(a), abs(b))


def _vec_tied(a: float, b: float) -> bool:
    return abs(a - b) <= VECTOR_TIE


def check_index(con: apsw.Connection, vault_id: int, vault_name: str) -> None:
    lag = index_lag(con, vault_id)
    if lag < 0:
        raise StoreError(f"this database has no search index yet: reindex vault '{vault_name}'", remedy="reindex")
    if lag > 0:
        raise StoreError(
            f"the search index of vault '{vault_name}' is {lag} batches behind: reindex it", remedy="reindex"
        )


def _vectors_ready(con: Any) -> None:
    """SQLite's vectors are always there when its index is (``check_index``)."""


@dataclass(frozen=True, slots=True)
class Rankers:
    """What one engine ranks with; ``search`` (everything else) is the same for both."""

    keyword: Any
    """BM25 exactly as FTS5: ``rank(con, snap, query, allowed, limit)`` and ``rank_default(con, snap, query, whole,
    allowed, limit)`` (``search.keyword``'s)."""
    vector: Any
    """Cosine similarity: ``rank(con, snap, embedder, query, allowed, limit)`` and ``similarities(con, embedder,
    query, row_ids)`` (``search.vector``'s)."""
    whole: Callable[[signals.QueryTokens], Any]
    """The whole query in order, as ``keyword.rank_default`` takes it (None: fewer than two tokens)."""
    check: Callable[[Any, int, str], None]
    """``check(con, vault_id, vault_name)``: refuse (``StoreError``) when the vault's index is behind its batches."""
    ready: Callable[[Any], None] = _vectors_ready
    """``ready(con)``: refuse before a ranking by vectors when the store has none yet."""
    progress: Callable[[Any, int, str], backfill.Progress] = backfill.progress_sqlite
    """``progress(con, vault_id, embedder)``: how many current texts have the vectors of a background embedder."""


SQLITE = Rankers(keyword, vector, attrgetter("whole"), check_index)
"""The SQLite engine's: FTS5 and sqlite-vec (or its exact fallback)."""


def _default(
    con: apsw.Connection,
    rankers: Rankers,
    snap: Snapshot,
    parsed: KeywordQuery,
    query: str,
    allowed: set[int] | None,
    limit: int,
    embedder: Embedder | None,
    parts: dict[int, dict[str, Any]],
) -> tuple[list[Scored], bool]:
    """The default mode (``signals``): BM25 candidates and the best by BM25 among the chunks holding the
    whole query in order, joined by the nearest vectors when the store's embedder fuses, ranked by the
    documented signals; a question in everyday words weighs only its content words (``everyday``).

    Also whether any searched chunk holds the words it weighs. When none does, the nearest vectors are all there
    is: only those at least the embedder's ``similarity_floor`` similar to the query are kept (``similar``), so
    that a word found nowhere is answered "no matches" rather than with the least unrelated chunks."""
    weighed = everyday.content(parsed)
    pool, held = rankers.keyword.rank_default(
        con, snap, weighed, rankers.whole(signals.QueryTokens.of(parsed)), allowed, max(limit, signals.POOL)
    )
    for item, r in zip(pool, shared_ranks(pool, _kw_tied)):
        parts[item.row_id] = {"keyword": {"rank": r, "score": item.score}}
    known = {s.row_id for s in pool}
    pool = pool + [s for s in held if s.row_id not in known]  # ranked below the pool by BM25: no keyword rank
    worded = bool(pool)
    cosines: dict[int, float] | None = None
    embedder = embedder or query_embedder(con)
    if embedder.fuse:
        rankers.ready(con)
        near = rankers.vector.rank(con, snap, embedder, query, allowed, max(limit, CANDIDATES))
        if not worded:
            near = similar(near, embedder.similarity_floor)
        for item, r in zip(near, shared_ranks(near, _vec_tied)):
            parts.setdefault(item.row_id, {})["vector"] = {"rank": r, "score": item.score}
        known = {s.row_id for s in pool}
        pool = pool + [Scored(s.row_id, 0.0) for s in near if s.row_id not in known]
        cosines = rankers.vector.similarities(con, embedder, query, [s.row_id for s in pool])
    weight = signals.vector_weight(everyday.everyday(parsed), len(signals.QueryTokens.of(parsed).sequence))
    ranked = signals.rerank(con, pool, weighed, cosines, parsed, weight)[:limit]
    for item, found in ranked:
        parts.setdefault(item.row_id, {})["signals"] = found
    return [item for item, _ in ranked], worded


def similar(near: list[Scored], floor: float | None) -> list[Scored]:
    """The nearest chunks (by cosine, best first) at least ``floor`` similar to the query (None: all of them)."""
    return near if floor is None else [s for s in near if s.score >= floor]


def refuse_wordless(parsed: KeywordQuery) -> None:
    """Refuse a query with nothing to search for: empty, spaces only, or only wildcards and punctuation (``*``,
    ``**``, ``?!``), which no mode can match by its words and which would rank every chunk alike."""
    if not any(signals.tokens(p.text) for p in parsed.phrases):
        raise ConfigError("the query has no words to search for: give at least one word", argument="query")


def search(
    con: apsw.Connection,
    vault_id: int,
    vault_name: str,
    query: str,
    *,
    as_of: int | None = None,
    batch: int | None = None,
    valid_at: int | None = None,
    mode: str = DEFAULT_MODE,
    limit: int = 10,
    filters: SearchFilter | None = None,
    embedder: Embedder | None = None,
    rankers: Rankers = SQLITE,
) -> dict[str, Any]:
    """Search the chunks visible at ``as_of`` (see ``Vault.search``) of the notes ``filters`` admit with an engine's
    ``rankers``. Run inside one read transaction."""
    if mode not in MODES:
        raise ConfigError(f"unknown search mode {mode!r}: use one of {', '.join(MODES)}")
    if limit < 1:
        raise ConfigError("limit must be at least 1")
    parsed = parse_query(query)
    refuse_wordless(parsed)
    rankers.check(con, vault_id, vault_name)
    snap = take(con, vault_id, as_of, valid_at, batch=batch)
    allowed = allowed_notes(con, snap, filters)
    parts: dict[int, dict[str, Any]] = {}
    worded = True
    if mode == "keyword":
        ranked = rankers.keyword.rank(con, snap, parsed, allowed, limit)
        for item, r in zip(ranked, shared_ranks(ranked, _kw_tied)):
            parts[item.row_id] = {"keyword": {"rank": r, "score": item.score}}
    elif mode == "vector":
        rankers.ready(con)
        embedder = embedder or query_embedder(con)
        ranked = rankers.vector.rank(con, snap, embedder, query, allowed, limit)
        for item, r in zip(ranked, shared_ranks(ranked, _vec_tied)):
            parts[item.row_id] = {"vector": {"rank": r, "score": item.score}}
    else:
        embedder = embedder or query_embedder(con)
        ranked, worded = _default(con, rankers, snap, parsed, query, allowed, limit, embedder, parts)
    shown = everyday.marked(parsed) if mode == DEFAULT_MODE else parsed  # what the snippets mark
    hits = _hits(con, vault_name, [s.row_id for s in ranked], {s.row_id: s.score for s in ranked}, parts, shown)
    filling = None
    if mode != "keyword" and embedder is not None and embedder.background and (mode == "vector" or embedder.fuse):
        if snap.latest:
            found = rankers.progress(con, vault_id, embedder.embedder_id)
        else:  # a past cutoff: the texts visible then (the vector ranking's own set), not today's
            found = backfill.progress_at(con, snap, embedder.embedder_id, format_time(as_of))
        filling = None if found.complete else found.to_json()
    return {
        "query": query,
        "as_of": format_time(as_of),
        "valid_at": format_time(snap.valid_at),
        "mode": mode,
        "match": parsed.expression,
        "hits": hits,
        "semantic": embedder.embedder_id if mode == DEFAULT_MODE and embedder is not None and embedder.fuse else None,
        "vectors": filling,
        "similar_only": bool(hits) and not worded,
    }


def _hits(
    con: apsw.Connection,
    vault_name: str,
    order: list[int],
    scores: dict[int, float],
    parts: dict[int, dict[str, Any]],
    query: KeywordQuery,
) -> list[dict[str, Any]]:
    if not order:
        return []
    rows = con.execute(
        f"""SELECT {CHUNK_COLUMNS} FROM chunks c JOIN notes n ON n.id = c.note_id
            JOIN batches b ON b.id = n.batch_id JOIN texts t ON t.id = c.text_id
            WHERE c.id IN (SELECT value FROM json_each(?))""",
        (json.dumps(order),),
    ).fetchall()
    records = {rec["_row"]: rec for rec in map(chunk_record, rows)}
    hits = []
    for row_id in order:
        rec = records[row_id]
        hits.append(
            {
                "path": rec["path"],
                "chunk_id": rec["chunk_id"],
                "heading_path": rec["heading_path"],
                "lines": rec["lines"],
                "text": rec["text"],
                "snippet": snippet(rec["text"], query),
                "score": scores[row_id],
                "keyword": parts[row_id].get("keyword"),
                "vector": parts[row_id].get("vector"),
                "signals": parts[row_id].get("signals"),
                "known_at": rec["known_at"],
                "content_hash": rec["content_hash"],
                "title": rec["title"],
                "uri": obsidian_uri(vault_name, rec["path"]),
            }
        )
    return hits


def export(
    con: apsw.Connection,
    vault_id: int,
    vault_name: str,
    *,
    as_of: int | None = None,
    valid_at: int | None = None,
    batch: int | None = None,
) -> Iterator[dict[str, Any]]:
    """A header, then every chunk visible at ``as_of`` with its ``indexed_text`` and whether the search index
    holds it (``indexed``: see ``text.indexable``), read from the revision tables only."""
    from ..read import cutoff

    batch = cutoff(con, vault_id, as_of) if batch is None else batch
    snap: Snapshot = take(con, vault_id, as_of, valid_at, bounded=bounded_from_core(con, vault_id, batch), batch=batch)
    yield {
        "tokenizer": TOKENIZE,
        "vault": vault_name,
        "as_of": format_time(as_of),
        "valid_at": format_time(snap.valid_at),
        "batch": snap.batch,
    }
    note: list[dict[str, Any]] = []
    for rec in [*export_rows(con, snap), None]:
        if note and (rec is None or rec["_note"] != note[0]["_note"]):
            for item, keep in zip(note, indexable([r["text"] for r in note])):
                item.pop("_row")
                item.pop("_note")
                item["indexed"] = keep
                yield item
            note = []
        if rec is not None:
            note.append(rec)

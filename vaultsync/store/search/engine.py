"""Point-in-time hybrid search and export: what ``View.search`` and ``View.export`` run, in one read transaction."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import quote

import apsw

from ...embed import Embedder
from ...errors import ConfigError, StoreError
from ...times import format_time
from . import keyword, signals, vector
from .embedding import query_embedder
from .index import index_lag
from .keyword import Scored
from .snapshot import CHUNK_COLUMNS, Snapshot, allowed_notes, bounded_from_core, chunk_record, export_rows, take
from ...text import TOKENIZE, KeywordQuery, indexable, parse_query
from .snippets import snippet

MODES = ("hybrid", "keyword", "vector")
DEFAULT_MODE = "hybrid"
RRF_K = 60
"""Reciprocal rank fusion: a chunk scores the sum over components of ``1 / (RRF_K + rank)``."""
CANDIDATES = 50
"""Each component ranks at least this many chunks (or ``limit``) before fusion."""
KEYWORD_TIE = 1e-9
"""Keyword scores within this relative distance share a rank in fusion."""
VECTOR_TIE = 1e-6
"""Cosine similarities within this distance share a rank in fusion (int8 vectors, float32 arithmetic)."""


def obsidian_uri(vault: str, path: str) -> str:
    file = path[:-3] if path.endswith(".md") else path
    return f"obsidian://open?vault={quote(vault, safe='')}&file={quote(file, safe='')}"


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


def _fuses(con: apsw.Connection, embedder: Embedder | None) -> bool:
    """Whether the default mode fuses the vector ranking: only for an embedder measured to help."""
    import os
    if os.environ.get("VS_FUSE"):
        return os.environ["VS_FUSE"] == "1"
    return bool(getattr(embedder or query_embedder(con), "fuse", False))


def check_index(con: apsw.Connection, vault_id: int, vault_name: str) -> None:
    lag = index_lag(con, vault_id)
    if lag < 0:
        raise StoreError(f"this database has no search index yet: run `vaultsync reindex` (vault '{vault_name}')")
    if lag > 0:
        raise StoreError(f"the search index of vault '{vault_name}' is {lag} batches behind: run `vaultsync reindex`")


def search(
    con: apsw.Connection,
    vault_id: int,
    vault_name: str,
    query: str,
    *,
    as_of: int | None = None,
    valid_at: int | None = None,
    mode: str = DEFAULT_MODE,
    limit: int = 10,
    prefix: str | None = None,
    tags: Sequence[str] | None = None,
    where: dict[str, str] | None = None,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Search the chunks visible at ``as_of`` (see ``Vault.search``). Run inside one read transaction."""
    if mode not in MODES:
        raise ConfigError(f"unknown search mode {mode!r}: use one of {', '.join(MODES)}")
    if limit < 1:
        raise ConfigError("limit must be at least 1")
    check_index(con, vault_id, vault_name)
    snap = take(con, vault_id, as_of, valid_at)
    allowed = allowed_notes(con, snap, prefix, tags, where)
    parsed = parse_query(query)
    depth = limit if mode != "hybrid" else max(limit, CANDIDATES)
    kw = keyword.rank(con, snap, parsed, allowed, depth) if mode == "keyword" else []
    found: dict[int, dict[str, float]] = {}
    if mode == "hybrid":
        ranked = signals.rerank(con, keyword.rank(con, snap, parsed, allowed, max(limit, signals.POOL)), parsed)
        kw = [item for item, _ in ranked[:depth]]
        found = {item.row_id: sig for item, sig in ranked[:depth]}
    vec: list[Scored] = []
    if mode == "vector" or (mode == "hybrid" and _fuses(con, embedder)):
        embedder = embedder or query_embedder(con)
        vec = vector.rank(con, snap, embedder, query, allowed, depth)
    fused: dict[int, float] = {}
    parts: dict[int, dict[str, Any]] = {}
    for name, scored, tied in (("keyword", kw, _kw_tied), ("vector", vec, _vec_tied)):
        for item, r in zip(scored, shared_ranks(scored, tied)):
            fused[item.row_id] = fused.get(item.row_id, 0.0) + 1.0 / (RRF_K + r)
            parts.setdefault(item.row_id, {})[name] = {"rank": r, "score": item.score}
    if mode == "keyword":
        order = [s.row_id for s in kw]
    elif mode == "vector":
        order = [s.row_id for s in vec]
    else:
        keys = keyword.order_key(con, [Scored(r, 0.0) for r in fused])
        order = sorted(fused, key=lambda r: (-fused[r], keys[r]))[:limit]
    for row_id, sig in found.items():
        if row_id in parts:
            parts[row_id]["signals"] = sig
    hits = _hits(con, vault_name, order, fused, parts, parsed)
    return {
        "query": query,
        "as_of": format_time(as_of),
        "valid_at": format_time(snap.valid_at),
        "mode": mode,
        "match": parsed.expression,
        "hits": hits,
    }


def _hits(con: apsw.Connection, vault_name: str, order: list[int], fused: dict[int, float],
          parts: dict[int, dict[str, Any]], query: KeywordQuery) -> list[dict[str, Any]]:
    if not order:
        return []
    rows = con.execute(
        f"""SELECT {CHUNK_COLUMNS} FROM chunks c JOIN notes n ON n.id = c.note_id
            JOIN batches b ON b.id = n.batch_id JOIN texts t ON t.id = c.text_id
            WHERE c.id IN (SELECT value FROM json_each(?))""", (json.dumps(order),)).fetchall()
    records = {rec["_row"]: rec for rec in map(chunk_record, rows)}
    hits = []
    for row_id in order:
        rec = records[row_id]
        hits.append({
            "path": rec["path"],
            "chunk_id": rec["chunk_id"],
            "heading_path": rec["heading_path"],
            "lines": rec["lines"],
            "text": rec["text"],
            "snippet": snippet(rec["text"], query),
            "score": fused[row_id],
            "keyword": parts[row_id].get("keyword"),
            "vector": parts[row_id].get("vector"),
            **({"signals": parts[row_id]["signals"]} if "signals" in parts[row_id] else {}),
            "known_at": rec["known_at"],
            "content_hash": rec["content_hash"],
            "title": rec["title"],
            "uri": obsidian_uri(vault_name, rec["path"]),
        })
    return hits


def export(con: apsw.Connection, vault_id: int, vault_name: str, *, as_of: int | None = None,
           valid_at: int | None = None) -> Iterator[dict[str, Any]]:
    """A header, then every chunk visible at ``as_of`` with its ``indexed_text`` and whether the search index
    holds it (``indexed``: see ``text.indexable``), read from the revision tables only."""
    from ..read import cutoff

    batch = cutoff(con, vault_id, as_of)
    snap: Snapshot = take(con, vault_id, as_of, valid_at, bounded=bounded_from_core(con, vault_id, batch))
    yield {"tokenizer": TOKENIZE, "vault": vault_name, "as_of": format_time(as_of),
           "valid_at": format_time(snap.valid_at), "batch": snap.batch}
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

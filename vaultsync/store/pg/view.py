"""A vault as known at one cutoff, on PostgreSQL: ``View``'s reads, with the engine's own checks and stats."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import ConfigError, StoreError
from ...times import format_time
from ..search import engine, signals
from ..search.embedding import query_embedder
from ..search.keyword import Scored
from ..search.schema import meta
from ..search.snapshot import allowed_notes, take
from ..view import View
from ...tokenizer import parse_query
from . import keyword, vectors
from .schema import APPEND_ONLY_TABLES


class PgView(View):
    """``View`` on a ``pg.compat.Con``; ``stats``, ``check`` and search are this engine's."""

    def at(self, as_of: int | None) -> PgView:
        return PgView(self._con, self._db_path, self.vault_id, self.vault_name, as_of, self.valid_at)

    def locate(self, keys: Sequence[tuple[str, str, int]]) -> list[int | None]:
        """The id of the revision stored at each ``(path, content hash, known_at)``; None where none is."""
        found: list[int | None] = []
        for path, content_hash, known_at in keys:
            row = self._con.execute(
                """SELECT max(n.id) FROM notes n JOIN batches b ON b.id = n.batch_id
                   WHERE n.vault_id = ? AND n.path = ? AND n.content_hash = ? AND b.known_at = ?""",
                (self.vault_id, path, content_hash, known_at)).fetchone()
            found.append(None if row is None or row[0] is None else int(row[0]))
        return found

    def search(self, query: str, *, mode: str = engine.DEFAULT_MODE, limit: int = 10, prefix: str | None = None,
               tags: Sequence[str] | None = None, where: dict[str, str] | None = None) -> dict[str, Any]:
        """Search of the chunks visible at the cutoff in any mode, as ``search.engine.search`` answers it."""
        if mode not in engine.MODES:
            raise ConfigError(f"unknown search mode {mode!r}: use one of {', '.join(engine.MODES)}")
        if limit < 1:
            raise ConfigError("limit must be at least 1")
        con = self._con
        behind = keyword.lag(con, self.vault_id)
        if behind:
            raise StoreError(f"the search index of vault '{self.vault_name}' is {behind} batches behind: reindex it",
                             remedy="reindex")
        snap = take(con, self.vault_id, self.as_of, self.valid_at)
        allowed = allowed_notes(con, snap, prefix, tags, where)
        parsed = parse_query(query)
        parts: dict[int, dict[str, Any]] = {}
        if mode == "keyword":
            ranked = keyword.rank(con, snap, parsed, allowed, limit)
            for item, r in zip(ranked, engine.shared_ranks(ranked, engine._kw_tied)):
                parts[item.row_id] = {"keyword": {"rank": r, "score": item.score}}
        elif mode == "vector":
            ranked = vectors.rank(con, snap, self._embedder(), query, allowed, limit)
            for item, r in zip(ranked, engine.shared_ranks(ranked, engine._vec_tied)):
                parts[item.row_id] = {"vector": {"rank": r, "score": item.score}}
        else:
            ranked = self._default(snap, parsed, query, allowed, limit, parts)
        hits = engine._hits(con, self.vault_name, [s.row_id for s in ranked], {s.row_id: s.score for s in ranked},
                            parts, parsed)
        return {"query": query, "as_of": format_time(self.as_of), "valid_at": format_time(snap.valid_at),
                "mode": mode, "match": parsed.expression, "hits": hits}

    def _embedder(self) -> Any:
        """The embedder of the store's vectors (ProviderError when missing or changed, as on SQLite)."""
        if meta(self._con, "vectors_pending"):  # type: ignore[arg-type]
            raise StoreError("this database's texts have no vectors yet: open it for writing once (sync, watch) "
                             "or reindex it", remedy="reindex")
        return query_embedder(self._con)  # type: ignore[arg-type]

    def _default(self, snap: Any, parsed: Any, query: str, allowed: set[int] | None, limit: int,
                 parts: dict[int, dict[str, Any]]) -> list[Any]:
        """The default mode as ``search.engine._default``: BM25 candidates and the best among the chunks holding
        the whole query in order, joined by the nearest vectors when the store's embedder fuses, ranked by
        the signals."""
        whole = keyword.whole_phrase(signals.QueryTokens.of(parsed))
        pool, held = keyword.rank_default(self._con, snap, parsed, whole, allowed, max(limit, signals.POOL))
        for item, r in zip(pool, engine.shared_ranks(pool, engine._kw_tied)):
            parts[item.row_id] = {"keyword": {"rank": r, "score": item.score}}
        known = {s.row_id for s in pool}
        pool = pool + [s for s in held if s.row_id not in known]
        cosines: dict[int, float] | None = None
        embedder = query_embedder(self._con)  # type: ignore[arg-type]
        if embedder.fuse:
            embedder = self._embedder()
            near = vectors.rank(self._con, snap, embedder, query, allowed, max(limit, engine.CANDIDATES))
            for item, r in zip(near, engine.shared_ranks(near, engine._vec_tied)):
                parts.setdefault(item.row_id, {})["vector"] = {"rank": r, "score": item.score}
            known = {s.row_id for s in pool}
            pool = pool + [Scored(s.row_id, 0.0) for s in near if s.row_id not in known]
            cosines = vectors.similarities(self._con, embedder, query, [s.row_id for s in pool])
        ranked = signals.rerank(self._con, pool, parsed, cosines)[:limit]
        for item, found in ranked:
            parts.setdefault(item.row_id, {})["signals"] = found
        return [item for item, _ in ranked]

    def _database_bytes(self) -> int:
        """Bytes of the schema's tables (with their indexes and TOAST)."""
        return int(self._con.raw.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace s "
            "ON s.oid = c.relnamespace WHERE s.nspname = current_schema() AND c.relkind = 'r'").fetchone()[0])

    def _engine_problems(self) -> list[str]:
        """The append-only triggers (PostgreSQL keeps its own integrity; the rest is ``View.check``'s)."""
        triggers = {r[0] for r in self._con.raw.execute(
            "SELECT tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace s "
            "ON s.oid = c.relnamespace WHERE s.nspname = current_schema() AND NOT t.tgisinternal")}
        return [f"append-only trigger {table}_append_only is missing" for table in APPEND_ONLY_TABLES
                if f"{table}_append_only" not in triggers]

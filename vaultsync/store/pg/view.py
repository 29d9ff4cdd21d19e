"""A vault as known at one cutoff, on PostgreSQL: ``View``'s reads, with the engine's own checks and stats, and
``session``: which server session the view reads in, and how."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import StoreError
from ..search import engine
from ..search.schema import meta
from ..view import View
from . import backfill, keyword, vectors
from .schema import APPEND_ONLY_TABLES


@dataclass(frozen=True, slots=True)
class Session:
    """The PostgreSQL session a view reads in (``PgView.session``)."""

    backend_pid: int
    """The server process serving it (``pg_backend_pid()``): views in other threads at once have others."""
    isolation: str
    """The transaction's isolation level as PostgreSQL names it ("repeatable read" for every view)."""
    read_only: bool
    """Whether the transaction is read-only (always, for a view)."""


def _index_current(con: Any, vault_id: int, vault_name: str) -> None:
    """The postings are written by every batch; one written without them (``search=False``) leaves them behind."""
    behind = keyword.lag(con, vault_id)
    if behind:
        raise StoreError(
            f"the search index of vault '{vault_name}' is {behind} batches behind: reindex it", remedy="reindex"
        )


def _vectors_ready(con: Any) -> None:
    """Texts indexed before the vectors' migration have none until the store is opened for writing (or reindexed)."""
    if meta(con, "vectors_pending"):
        raise StoreError(
            "this database's texts have no vectors yet: open it for writing once (sync, watch) or reindex it",
            remedy="reindex",
        )


RANKERS = engine.Rankers(keyword, vectors, keyword.whole_phrase, _index_current, _vectors_ready, backfill.progress)
"""This engine's rankers for ``search.engine.search``: BM25 over the postings tables, pgvector's exact distance
(or the fallback's)."""


class PgView(View):
    """``View`` on a ``pg.compat.Con``; ``stats`` and ``check`` are this engine's, search runs with its ``RANKERS``."""

    rankers = RANKERS

    def session(self) -> Session:
        """The server session and transaction this view reads in: one ``REPEATABLE READ READ ONLY`` transaction
        per view, on a connection of the readers' pool (PostgreSQL only: a SQLite view has no server session)."""
        pid, isolation, read_only = self._con.raw.execute(
            "SELECT pg_backend_pid(), current_setting('transaction_isolation'), "
            "current_setting('transaction_read_only')"
        ).fetchone()
        return Session(int(pid), str(isolation), read_only == "on")

    def at(self, as_of: int | None) -> PgView:
        return PgView(self._con, self._db_path, self.vault_id, self.vault_name, as_of, self.valid_at)

    def locate(self, keys: Sequence[tuple[str, str, int]]) -> list[int | None]:
        """The id of the revision stored at each ``(path, content hash, known_at)``; None where none is."""
        found: list[int | None] = []
        for path, content_hash, known_at in keys:
            row = self._con.execute(
                """SELECT max(n.id) FROM notes n JOIN batches b ON b.id = n.batch_id
                   WHERE n.vault_id = ? AND n.path = ? AND n.content_hash = ? AND b.known_at = ?""",
                (self.vault_id, path, content_hash, known_at),
            ).fetchone()
            found.append(None if row is None or row[0] is None else int(row[0]))
        return found

    def stats(self) -> dict[str, Any]:
        """``View.stats``, and which vector search this database uses (chosen when it was created)."""
        from .live import pgvector_schema

        found = super().stats()
        found["vector_search"] = (
            "pgvector" if pgvector_schema(self._con.raw) is not None else "python (no pgvector in this database)"
        )
        return found

    def _database_bytes(self) -> int:
        """Bytes of the schema's tables (with their indexes and TOAST)."""
        return int(
            self._con.raw.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace s "
                "ON s.oid = c.relnamespace WHERE s.nspname = current_schema() AND c.relkind = 'r'"
            ).fetchone()[0]
        )

    def index_problems(self) -> list[str]:
        """The search index behind or inconsistent (``search.health``)."""
        from ..search import health

        return health.problems(self._con, self.vault_id)

    def _engine_problems(self) -> list[str]:
        """The append-only triggers, and postings whose doc is gone (PostgreSQL keeps its own integrity where a
        foreign key says so; the rest is ``View.check``'s)."""
        triggers = {
            r[0]
            for r in self._con.raw.execute(
                "SELECT tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace s "
                "ON s.oid = c.relnamespace WHERE s.nspname = current_schema() AND NOT t.tgisinternal"
            )
        }
        from ..expected_shape import POSTGRES
        from ..migrations import problems as schema_problems
        from ..shape import pg_shape
        from .ranking import compact
        from .schema import PROBES, state

        problems = [
            f"append-only trigger {table}_append_only is missing"
            for table in APPEND_ONLY_TABLES
            if f"{table}_append_only" not in triggers
        ]
        problems += schema_problems(state(self._con.raw), pg_shape(self._con.raw), POSTGRES, PROBES, on_write=False)
        tables = ("search_doc_terms", "search_live_terms") if compact(self._con) else ("search_postings",)  # (m013)
        orphans = sum(
            self._con.raw.execute(
                f"SELECT count(*) FROM {table} p WHERE NOT EXISTS (SELECT 1 FROM search_docs d WHERE d.id = p.doc)"
            ).fetchone()[0]
            for table in tables
        )
        if orphans:  # no foreign key keeps them together (schema m008, m013)
            problems.append(f"{orphans} keyword postings belong to no indexed text: rebuild the search index")
        return problems

"""The PostgreSQL engine of the store's contract (``store/contract.py``): ``--db postgresql://…``.

``PgStore`` keeps the SQLite engine's answers by running the same read and write code (``Store``'s
methods, ``View``, ``BatchWriter``) on a psycopg connection in apsw's shape (``pg/compat.py``), over
tables that mirror SQLite's (``pg/schema.py``). What differs is what PostgreSQL does differently:

- a batch is one transaction that first locks its vault's head row (``vault_heads``, ``FOR UPDATE``), so
  batches of a vault are serialized and their ids and ``known_at`` grow together whoever writes; it ends
  with ``pg_notify`` on the schema's channel, delivered only if it commits;
- a view is one ``REPEATABLE READ READ ONLY`` transaction, on a connection of a pool (``psycopg_pool``, up to
  ``VAULTSYNC_PG_POOL`` connections, 4 by default) so that the threads of one server read side by side; the
  store's own connection keeps the writes (and a view opened inside a batch, which must see it);
- the writer lock is a session advisory lock (``pg/lock.py``), and each batch checks inside its transaction that
  its process still holds it (``pg/fence.py``): a writer whose session was lost never commits again before it has
  taken the lock back;
- a lost connection (a restart, a failover, ``pg_terminate_backend``) is opened again before the next transaction
  (``pg/session.py``);
- the schema changes only through ``upgrade`` (``vaultsync migrate``): a writer refuses an older schema, a reader
  reads one from ``READABLE_FROM`` on, an empty database is created at the current schema;
- ``data_version`` reads the last batch id and purge count (PostgreSQL has no ``PRAGMA data_version``).

A connection string may select a schema (``options=-csearch_path=team``): one vaultsync database per
schema, locks and notifications kept apart by the schema's name.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

from ...errors import ConfigError, LockLost, ProviderError, SchemaError
from ...retention import Policy
from ...times import format_time, next_stamp
from .. import Store, codec, freed, is_dsn  # noqa: F401 - is_dsn: what names this engine
from ..migrations import State, refuse_newer
from ..values import PurgeResult
from ..view import View
from ..write import BatchWriter
from .compat import Con
from .db import POOL_ENV, POOL_SIZE, PgDatabase, _driver, pool_size, redact, translated  # noqa: F401 - its names
from .fence import LOST, Fence, hold_head
from .lock import PgWriterLock
from .schema import MIGRATIONS, NAMES, READABLE_FROM, migrate, state, verify  # noqa: F401 - MIGRATIONS: its list
from .session import connect


def check_schema(where: str, con: Any, *, readonly: bool) -> State:
    """SchemaError unless this vaultsync may open the database as it is: a newer one's never; one lacking migrations
    only read-only, when it has the first ``READABLE_FROM`` (for writing only after ``upgrade``, never implicitly);
    for writing, one with every migration only when its shape is whole (``store/shape.py``; readers read what they
    can, and ``check`` reports what is missing)."""
    found = state(con)
    refuse_newer(where, found)
    if readonly and not found.applied:
        raise SchemaError(f"{where} is not a vaultsync database (or is empty)")
    if found.applied and found.missing and not readonly:
        raise SchemaError(
            f"{where} was written by an older vaultsync (it lacks {', '.join(found.missing)}): "
            "stop its writers and upgrade it (this version reads it meanwhile)",
            remedy="migrate",
        )
    if found.applied and not set(NAMES[:READABLE_FROM]) <= set(found.applied):
        raise SchemaError(
            f"{where} was written by an older vaultsync (it lacks {', '.join(found.missing)}): upgrade it",
            remedy="migrate",
        )
    if found.applied and not found.missing and not readonly:
        verify(con, where)
    return found


def upgrade(dsn: str, *, dry_run: bool = False) -> tuple[list[str], list[str]]:
    """Bring a database (schema) to this vaultsync's schema, in one transaction: (the migrations it had, those
    applied); ``dry_run``: say which, change nothing. SchemaError for a newer one's, or for a schema still lacking
    a table, column, index or trigger afterwards (then nothing changed)."""
    db = PgDatabase(dsn, application_name="vaultsync migrate")
    try:
        with db.atomic() as con:
            if con.raw.execute("SELECT current_schema()").fetchone()[0] is None:
                raise ConfigError(f"{db.path}: the schema its search_path names does not exist; create it")
            found = state(con.raw)
            refuse_newer(db.path, found)
            if dry_run:
                return found.applied, found.missing
            return found.applied, migrate(con.raw, where=db.path)
    finally:
        db.close()


def _no_schema(raw: Any) -> str:
    """Why ``current_schema()`` is null: no schema of the search_path exists, or this role may not use it."""
    path, role = raw.execute("SELECT current_setting('search_path'), current_user").fetchone()
    names = [name.strip().strip('"') for name in str(path).split(",") if name.strip() and "$user" not in name]
    for name in names:
        if raw.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,)).fetchone():
            return (
                f"the role {role} may not use the schema {name} (it has no USAGE grant there): "
                f"GRANT USAGE ON SCHEMA {name} TO {role}, or connect as a role that has it"
            )
    return "the schema its search_path names does not exist; create it"


def _restamp(con: Con, batch_id: int, take_time: Callable[[], int]) -> None:
    """Set the commit time on the batch's own row, written in this transaction at its first change (the foreign
    keys of its revisions are checked at once, so it cannot wait): the append-only guard lets this one statement
    through by the transaction-local setting ``purge`` uses, switched off again before anything else runs. The
    time is taken after the guard is opened: what follows it is the update and the commit."""
    con.raw.execute("SELECT set_config('vaultsync.purging', 'on', true)")
    con.raw.execute("UPDATE batches SET known_at = %s WHERE id = %s", (take_time(), batch_id))
    con.raw.execute("SELECT set_config('vaultsync.purging', 'off', true)")  # (an error above rolls all back)


class PgStore(Store):
    """One PostgreSQL database (or schema) holding any number of vaults: the ``Engine`` of the contract."""

    # Store's code runs over a PgDatabase (the same atomic/query/one API, plus the readers' pool)
    db: PgDatabase  # type: ignore[assignment]  # PgDatabase is not a Database subclass, only the same API

    def __init__(self, dsn: str, *, readonly: bool = False, search: bool = True, embedder: str | None = None) -> None:
        self.dsn = dsn
        self.readonly = readonly
        self.db = PgDatabase(dsn, readonly=readonly)
        self.path = self.dsn
        self.indexers = []
        self._filler: Any = None
        self.fences: dict[int, Fence] = {}
        """The fence of each vault whose writer lock this store took (``pg/fence.py``): its batches check it."""
        self._deferred: dict[int, bool] | None = None
        """Inside ``deferred_index``: each vault written so far, and whether its index waits for the end."""
        try:
            with self.db.atomic() as con:
                self.schema = self.db.schema = con.raw.execute("SELECT current_schema()").fetchone()[0]
                if self.schema is None:
                    raise ConfigError(f"{self.db.path}: {_no_schema(con.raw)}")
                found = check_schema(self.db.path, con.raw, readonly=readonly)
                if not readonly and not found.applied:
                    migrate(con.raw, where=self.db.path)  # a new database, at the current schema (else: ``upgrade``)
            with self.db.atomic() as con:
                codec.load(con)
            if search and not readonly:
                self._attach_search(embedder)
        except BaseException:
            self.db.close()
            raise

    @property
    def channel(self) -> str:
        """The LISTEN/NOTIFY channel new batches are announced on."""
        return f"vaultsync_{self.schema}"[:63]

    def connect(self, *, application_name: str) -> Any:
        """Another session on the same database (the writer lock holds one; a follower listens on one)."""
        raw = connect(self.dsn, self.db.path, self.db.reach, application_name=application_name)
        if self.schema != "public":
            raw.execute("SELECT set_config('search_path', %s, false)", (self.schema,))
        return raw

    def _attach_search(self, embedder: Any = None) -> None:
        """The indexer of batches written here, with the store's embedder (recorded on first use, as SQLite
        does: a store's vectors are never mixed); texts indexed before m004 get their vectors now."""
        from ...embed.embedders import DEFAULT_EMBEDDER, EMBEDDERS, default_embedder, get_embedder
        from ..search.embedding import check_embedder, unknown_embedder
        from ..search.schema import meta
        from . import vectors
        from .keyword import PgKeywordIndexer

        chosen = get_embedder(embedder) if isinstance(embedder, str) else embedder
        with self.db.atomic() as con:
            name = meta(con, "embedder")
            if name is None:
                fresh = con.raw.execute("SELECT 1 FROM search_docs LIMIT 1").fetchone() is None  # else: hashed
                name = chosen.embedder_id if chosen else default_embedder() if fresh else DEFAULT_EMBEDDER
                vectors.set_meta(con, "embedder", name)
                vectors.set_meta(con, "embedder_signature", (chosen or get_embedder(name)).signature)
            mismatch: ProviderError | None
            if chosen is None and name not in EMBEDDERS:
                use, mismatch = None, unknown_embedder(name)
            else:
                use = chosen or get_embedder(name)
                mismatch = check_embedder(con, use)
            if chosen is not None and mismatch:
                raise mismatch
            if use is not None and not mismatch and meta(con, "vectors_pending"):
                if use.background:  # filled after, as new texts are (``fill_vectors``)
                    con.raw.execute("DELETE FROM search_meta WHERE key = 'vectors_pending'")
                else:
                    vectors.catch_up(con, use)
        self.indexers = [PgKeywordIndexer(use, mismatch)]  # type: ignore[list-item]  # it offers no parse-worker pre-work

    def writer_lock(self, vault: str) -> PgWriterLock:  # type: ignore[override]  # a contract Lock, not Store's WriterLock
        return PgWriterLock(self, vault)

    def vault_device(self, vault_id: int) -> int | None:
        row = self.db.one("SELECT device FROM vault_devices WHERE vault_id = ?", (vault_id,))
        return None if row is None else int(row[0])

    # ------------------------------------------------------------ writing

    @contextlib.contextmanager
    def batch(
        self,
        vault_id: int,
        *,
        known_at: int | None = None,
        source: str = "import",
        detail: str | None = None,
        caller: str | None = None,
    ) -> Iterator[BatchWriter]:
        """One atomic batch, serialized with every other batch of the vault by its head row."""
        if self.readonly:
            raise ConfigError("writing needs the database opened for writing")
        with self.db.atomic() as con:
            self._hold_head(con, vault_id)
            last = con.raw.execute("SELECT max(known_at) FROM batches WHERE vault_id = %s", (vault_id,)).fetchone()[0]
            at_commit = known_at is None
            if known_at is None:
                known_at = next_stamp(last)  # a lower bound until ``stamp``
            elif last is not None and known_at < last:
                raise ConfigError(
                    f"known_at {format_time(known_at)} is earlier than the vault's last batch at {format_time(last)}",
                    argument="known_at",
                )
            indexers = [] if self._defers(con, vault_id) else self.indexers
            writer = BatchWriter(
                con, vault_id, known_at, source, detail, caller, indexers, at_commit=at_commit, restamp=_restamp
            )
            try:
                yield writer
                writer.finish()
                if writer.batch_id is not None:
                    con.raw.execute(
                        "UPDATE vault_heads SET last_batch = %s WHERE vault_id = %s", (writer.batch_id, vault_id)
                    )
                    con.raw.execute(
                        "SELECT pg_notify(%s, %s)",
                        (self.channel, json.dumps({"vault_id": vault_id, "batch_id": writer.batch_id})),
                    )
            finally:
                writer.forget_ahead()
            writer.stamp()  # the last statement before COMMIT (the notification is sent by the commit)

    @contextlib.contextmanager
    def deferred_index(self) -> Iterator[None]:
        """Batches written inside leave the search index of a vault that has none (a vault being copied) to the end,
        where it is built in one pass (``pg/bulk.py``: the same tables, far fewer statements and dead rows); a vault
        already indexed is indexed batch by batch as always. Left by an error, the index is not built (the views of
        such a vault ask for ``reindex``). Into a database that held no other vault, the indexes the batches grew row
        by row are then built again compact (``bulk.compact``)."""
        if self._deferred is not None or not self.indexers or self.indexers[0].mismatch:  # type: ignore[attr-defined]  # a PgKeywordIndexer
            yield
            return
        self._deferred = {}
        try:
            yield
            for vault_id, waits in self._deferred.items():
                if waits:
                    self._build_index(vault_id)
            if self._deferred and all(self._deferred.values()):
                self._compact(list(self._deferred))
        finally:
            self._deferred = None

    def audit_unwritable(self) -> str | None:
        """Why ``audit_append`` cannot move a head here: the role may not insert into and update ``audit_heads``
        (a reader role not granted them: examples/postgres/roles.sql). None: it can."""
        if self.readonly:
            return "the database is open read-only"
        with self.db.atomic() as con:
            allowed = con.raw.execute(
                "SELECT has_table_privilege('audit_heads', 'INSERT') AND has_table_privilege('audit_heads', 'UPDATE'), "
                "current_user"
            ).fetchone()
        if allowed[0]:
            return None
        return f"the role {allowed[1]} may not insert into and update the table audit_heads"

    def _defers(self, con: Con, vault_id: int) -> bool:
        """Whether this batch of the vault leaves its index to ``deferred_index``'s end."""
        if self._deferred is None:
            return False
        if vault_id not in self._deferred:
            self._deferred[vault_id] = not con.raw.execute(
                "SELECT EXISTS (SELECT 1 FROM search_state WHERE vault_id = %(v)s) "
                "OR EXISTS (SELECT 1 FROM search_rows WHERE vault_id = %(v)s)",
                {"v": vault_id},
            ).fetchone()[0]
        return self._deferred[vault_id]

    def _build_index(self, vault_id: int) -> None:
        from . import bulk

        with self.db.atomic() as con:
            self._hold_head(con, vault_id)
            bulk.build(con, vault_id, self.indexers[0].embedder)  # type: ignore[attr-defined]  # a PgKeywordIndexer

    def _compact(self, vault_ids: list[int]) -> None:
        """The indexes the copy of ``vault_ids`` grew row by row built again compact (``bulk.compact``), when the
        database holds no other vault (none that readers may be using)."""
        from . import bulk

        with self.db.atomic() as con:
            others = "SELECT EXISTS (SELECT 1 FROM vaults WHERE id <> ALL(%s))"
            if not con.raw.execute(others, (vault_ids,)).fetchone()[0]:
                bulk.compact(con.raw)

    def _hold_head(self, con: Con, vault_id: int) -> None:
        """Lock the vault's head row in this transaction and check this process's fence (``pg/fence.py``): a refused
        one stays refused (LockLost) until the writer lock is taken again."""
        try:
            hold_head(con.raw, vault_id, self.fences.get(vault_id))
        except LockLost:
            self.fences[vault_id] = LOST
            raise

    def unreachable_s(self) -> float:
        """How long the database has been unreachable (0 while it answers): ``pg/session.py``."""
        return self.db.reach.seconds()

    def data_version(self) -> int:
        """Changes when another session commits a batch or a purge (a cheap "anything new?")."""
        row = self.db.one(
            "SELECT (SELECT coalesce(max(id), 0) FROM batches), (SELECT count(*) FROM purges), "
            "(SELECT coalesce(sum(last_batch), 0) FROM vault_heads)"
        )
        assert row is not None
        return hash((int(row[0]), int(row[1]), int(row[2]))) & ((1 << 62) - 1)

    def wakeup(self) -> Any:
        """A ``pg.follow.Wakeup``: a wait that a batch's (or a lock release's) NOTIFY ends early."""
        from .follow import Wakeup

        return Wakeup(self)

    def listen(self, vault_id: int, after: int) -> Any:
        """A ``pg.follow.Listener``: wait for the vault's batches after ``after`` (LISTEN, with catch-up)."""
        from .follow import Listener

        return Listener(self, vault_id, after)

    # ------------------------------------------------------------ reading

    @contextlib.contextmanager
    def view(
        self, vault_id: int, vault_name: str, *, as_of: int | None = None, valid_at: int | None = None
    ) -> Iterator[View]:
        """The vault as known at ``as_of`` (None: now), inside one REPEATABLE READ READ ONLY transaction on a
        connection of the readers' pool."""
        from .view import PgView

        with self.db.snapshot() as con:
            codec.refresh(con)
            yield PgView(con, self.db.path, vault_id, vault_name, as_of, valid_at)

    def fill_vectors(
        self,
        vault_id: int,
        *,
        limit: int | None = None,
        writing: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
        pause: Callable[[], None] | None = None,
    ) -> int:
        """``Store.fill_vectors`` on this engine: up to ``limit`` of the vault's texts given the vectors of a
        background embedder (``search.backfill``, ``pg/backfill.py``); how many were filled (0: none is left)."""
        from ..search import backfill as steps
        from . import backfill

        indexer = self.indexers[0] if self.indexers else None
        embedder = getattr(indexer, "embedder", None)
        if embedder is None or getattr(indexer, "mismatch", None) is not None or not embedder.background:
            return 0
        if self._filler is None:
            self._filler = steps.Filler(self.db.atomic, backfill.store, vector=backfill.HAS_VECTOR)
        return int(self._filler.step(embedder, vault_id, limit or steps.STEP, writing=writing, pause=pause))

    # ------------------------------------------------------------ upkeep not built on this engine yet

    def reindex(self, vault_id: int, *, full: bool = False) -> int:
        """Rebuild the search index of every vault, vectors included (this engine keeps it in step with every
        batch, so there is nothing to catch up); return how many of this vault's batches it indexed."""
        if self.readonly:
            raise ConfigError("reindex needs the database opened for writing")
        with self.db.atomic() as con:
            con.raw.execute("SELECT set_config('vaultsync.purging', 'on', true)")
            self._reindex_in(con)
            return int(con.raw.execute("SELECT count(*) FROM batches WHERE vault_id = %s", (vault_id,)).fetchone()[0])

    def reembed(self, embedder_name: str) -> tuple[str, int]:
        """Replace every vector with those of another embedder: (its signature, docs embedded)."""
        from ...embed.embedders import get_embedder
        from .vectors import reembed

        if self.readonly:
            raise ConfigError("reembed needs the database opened for writing")
        embedder = get_embedder(embedder_name)
        with self.db.atomic() as con:
            count = reembed(con, embedder)
        self._attach_search()
        return embedder.signature, count

    def purge(
        self,
        vault_id: int,
        *,
        strings: list[str] | None = None,
        note: str | None = None,
        before: int | None = None,
        policy: Policy | None = None,
        now: int | None = None,
    ) -> PurgeResult:
        """Rewrite the vault's history without ``strings``, the note at ``note``, what was no longer visible
        at ``before``, or thinned by the retention ``policy`` at ``now`` (exactly one), in one transaction (see
        ``pg/purge.py`` for what it cannot reach)."""
        from . import purge as pg_purge

        chosen = self._purge_request(strings, note, before, policy)
        unchanged = self._nothing_to_thin(vault_id, policy, now)
        if unchanged is not None:
            return unchanged
        size_before = self.size()
        with self.db.atomic() as con:
            self._hold_head(con, vault_id)
            result = pg_purge.run(
                con,
                vault_id,
                strings=chosen,
                note=note,
                before=before,
                policy=policy,
                now=now,
                reindex=self._reindex_in,
            )
        result.scrubbed = False  # see pg_purge.LIMITS: nothing here wipes the WAL, archives or standbys
        result.database_bytes_before, result.database_bytes_after = size_before, self.size()
        return result

    def _reindex_in(self, con: Con) -> None:
        """Rebuild the search index inside the caller's transaction (after a purge), with the store's embedder."""
        from .keyword import reindex

        if not self.indexers:  # opened with search=False: the store's embedder all the same
            self._attach_search()
        indexer = self.indexers[0]
        if indexer.mismatch:  # type: ignore[attr-defined]  # this engine's one indexer is a PgKeywordIndexer
            raise indexer.mismatch  # type: ignore[attr-defined]  # this engine's one indexer is a PgKeywordIndexer
        reindex(con, indexer.embedder)  # type: ignore[attr-defined]  # this engine's one indexer is a PgKeywordIndexer

    def scrub(self) -> bool:
        return False

    def _sizes(self, con: Any, vault_id: int) -> freed.Sizes:
        """Each of the schema's tables, indexes and TOAST tables by ``pg_relation_size`` (``freed``), under the
        table it belongs to; nothing is given back whatever is removed (dead rows wait for VACUUM)."""
        rows = con.raw.execute(
            """SELECT t.relname, pg_relation_size(r.oid) FROM pg_class t
               JOIN pg_namespace s ON s.oid = t.relnamespace AND s.nspname = current_schema()
               JOIN LATERAL (SELECT t.oid UNION ALL SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = t.oid
                             UNION ALL SELECT t.reltoastrelid WHERE t.reltoastrelid <> 0
                             UNION ALL SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = t.reltoastrelid
                                 AND t.reltoastrelid <> 0) r(oid) ON true
               WHERE t.relkind = 'r'"""
        ).fetchall()
        return freed.Sizes([(str(name), str(name), int(size)) for name, size in rows], 8192, self.size())

    def size(self) -> int:
        """Bytes of the schema's tables and indexes."""
        row = self.db.one(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = current_schema() "
            "AND c.relkind IN ('r', 'm')"
        )
        return int(row[0]) if row else 0

"""The append-only temporal store: the one owner of the SQLite connection.

Everything the product asks of the database goes through ``Store``: ``batch()`` appends one
atomic batch, ``view()`` reads a vault as of a cutoff, and a few upkeep methods (vaults, the
sync bookkeeping, reindex, reembed). ``Store`` is the SQLite engine of the contract written in
``store/contract.py``. Nothing outside this package imports apsw or writes SQL,
and every apsw error leaves it as one of the store errors in ``vaultsync.errors``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..dsn import is_dsn
from ..errors import ConfigError, SchemaError, VaultsyncError
from ..retention import Policy
from ..times import format_time, next_stamp, now_micros
from . import audit as audit_heads
from . import batches, codec, freed, thin
from . import purge as purging
from . import read as q
from .audit import AuditHead
from .contract import Change, Engine
from .db import Database, translated
from .lock import Sleep, WriterLock
from .migrations import refuse_newer
from .provenance import PurgeRecord
from .purge import PurgeResult
from .read import UNSTAMPED, BatchNews, Revision, file_stamp
from .schema import MIGRATIONS, migrate, readable, schema_version
from .schema import state as schema_state
from .values import RetentionPreview
from .view import View
from .write import BatchWriter, Indexer

__all__ = [
    "UNSTAMPED",
    "AuditHead",
    "BatchNews",
    "BatchWriter",
    "Change",
    "Engine",
    "PurgeRecord",
    "PurgeResult",
    "Revision",
    "Store",
    "StoredVault",
    "View",
    "WriterLock",
    "file_stamp",
    "is_dsn",
    "open_store",
]


def upgrade(db: str | os.PathLike[str], *, dry_run: bool = False) -> tuple[list[str], list[str]]:
    """Apply the migrations ``db`` lacks (by name, ``store/migrations.py``) and check its whole shape: (the
    migrations it had, those applied); ``dry_run``: say which, change nothing. SchemaError for a newer vaultsync's
    database, or one whose schema still lacks something afterwards."""
    if is_dsn(db):
        from .pg import upgrade as pg_upgrade

        return pg_upgrade(str(db), dry_run=dry_run)
    database = Database(db, create=False)
    try:
        with database.atomic() as con:
            found = schema_state(con)
            refuse_newer(str(db), found, count=schema_version(con), known=len(MIGRATIONS))
            if not found.applied:
                raise SchemaError(f"{db} is not a vaultsync database (or is empty)")
            if dry_run:
                return found.applied, found.missing
            return found.applied, migrate(con)
    finally:
        database.close()


def open_store(
    db: str | os.PathLike[str], *, readonly: bool = False, search: bool = True, embedder: str | None = None
) -> Engine:
    """The engine ``db`` names: PostgreSQL for a ``postgresql://`` URI (``store/pg``), else a SQLite file."""
    if is_dsn(db):
        from .pg import PgStore

        return PgStore(str(db), readonly=readonly, search=search, embedder=embedder)
    return Store(db, readonly=readonly, search=search, embedder=embedder)


@dataclass(frozen=True, slots=True)
class StoredVault:
    """A vault registered in the store."""

    id: int
    name: str
    root: str


class Store:
    """One database file holding any number of vaults.

    Opened for writing, it keeps the search index in step with every batch (``search=False``
    writes the revision tables alone, as a database from before search was written). ``embedder``
    names the embedder of a new search index (an existing index made by another refuses to mix).
    """

    batch_callers = True
    """Whether ``batches`` has its ``caller`` column (False: an old database read as it is, see ``m007``)."""

    def __init__(
        self, path: str | os.PathLike[str], *, readonly: bool = False, search: bool = True, embedder: str | None = None
    ) -> None:
        self.path = str(path)
        self.readonly = readonly
        self.db = Database(path, readonly=readonly)
        try:
            self._open_schema(path)
            with self.db.atomic() as con:
                codec.load(con)
            self.indexers: list[Indexer] = []
            self._filler: Any = None
            if search and not readonly:
                from ..embed.embedders import get_embedder

                self._attach_search(None if embedder is None else get_embedder(embedder))
        except BaseException:
            self.db.close()
            raise

    def _open_schema(self, path: str | os.PathLike[str]) -> None:
        """Migrations by name (``store/migrations.py``): read-only, an older database is read as it is when it can
        be (``check`` reports what its schema lacks); for writing, what it lacks is applied, then every table,
        column, index and trigger is checked (``store/shape.py``) and a schema still missing one refused in one
        line."""
        with self.db.atomic() as con:
            version = schema_version(con)
            found = schema_state(con)
            refuse_newer(str(path), found, count=version, known=len(MIGRATIONS))
            if self.readonly:
                if not found.applied:
                    raise SchemaError(f"{path} is not a vaultsync database (or is empty)")
                if not readable(con, found):
                    raise SchemaError(
                        f"{path} was written by an older vaultsync (schema {version}); "
                        "sync the vault into it once to upgrade it",
                        remedy="sync",
                    )
                self.batch_callers = "batch_callers" in found.applied
                return
            if version == 0 and not found.applied and con.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]:
                raise SchemaError(f"{path} is another program's SQLite database; use a new database file")
        with self.db.atomic() as con:  # the lock and error translation; migrate opens its own transactions
            migrate(con)
        with self.db.atomic() as con:
            pending = purging.scrub_pending(con)
        if pending:  # a purge committed but was stopped before its free pages and WAL were wiped
            self.scrub()

    def _attach_search(self, embedder: Any = None) -> None:
        from .search.index import SearchIndexer

        self.indexers[:] = [i for i in self.indexers if not isinstance(i, SearchIndexer)]
        with self.db.atomic() as con:
            self.indexers.append(SearchIndexer(con, embedder))

    def close(self) -> None:
        pending = False
        if self.readonly:  # a purge's scrub this reader held back: finish wiping the file's old pages now
            with contextlib.suppress(VaultsyncError), self.db.atomic() as con:
                pending = purging.scrub_pending(con)
        self.db.close()
        if pending:
            purging.checkpoint_pending(self.path)

    def single_file(self) -> None:
        """Fold the write-ahead log into the database file and stop using one: a file written once (a copy, a
        backup) stays one file, with no ``-wal`` or ``-shm`` beside it, even after readers open it read-only (a
        writer that opens it later turns the log on again)."""
        with translated(self.path):
            self.db.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.db.con.execute("PRAGMA journal_mode=DELETE")

    # ------------------------------------------------------------ vaults

    def vaults(self) -> list[StoredVault]:
        return [StoredVault(*row) for row in self.db.query("SELECT id, name, root FROM vaults ORDER BY name")]

    def vault(self, name: str) -> StoredVault | None:
        row = self.db.one("SELECT id, name, root FROM vaults WHERE name = ?", (name,))
        return None if row is None else StoredVault(*row)

    def ensure_vault(self, name: str, root: Path) -> int:
        """The id of the vault called ``name``, registered (or its root updated) as living at ``root``."""
        with self.db.atomic() as con:
            row = con.execute("SELECT id, root FROM vaults WHERE name = ?", (name,)).fetchone()
            if row is None:
                con.execute(
                    "INSERT INTO vaults (name, root, created_at) VALUES (?,?,?)", (name, str(root), now_micros())
                )
                return con.last_insert_rowid()
            if row[1] != str(root):
                con.execute("UPDATE vaults SET root = ? WHERE id = ?", (str(root), row[0]))
            return int(row[0])

    def vault_device(self, vault_id: int) -> int | None:
        """The device the vault folder was registered on (None: not yet, or a database before m006)."""
        if self.readonly and not self.db.one("SELECT 1 FROM sqlite_master WHERE name = 'vault_devices'"):
            return None
        row = self.db.one("SELECT device FROM vault_devices WHERE vault_id = ?", (vault_id,))
        return None if row is None else int(row[0])

    def vault_inode(self, vault_id: int) -> int | None:
        """The inode of the vault folder as registered (None: not yet; read-only, none is needed)."""
        if self.readonly:
            return None
        row = self.db.one("SELECT inode FROM vault_devices WHERE vault_id = ?", (vault_id,))
        return None if row is None or row[0] is None else int(row[0])

    def set_vault_device(self, vault_id: int, device: int, inode: int | None = None) -> None:
        """Register (or, confirmed by the user, move) the device and the inode of the vault folder."""
        with self.db.atomic() as con:
            con.execute(
                "INSERT INTO vault_devices (vault_id, device, inode, updated_at) VALUES (?,?,?,?) ON CONFLICT "
                "(vault_id) DO UPDATE SET device = excluded.device, inode = excluded.inode, "
                "updated_at = excluded.updated_at",
                (vault_id, device, inode, now_micros()),
            )

    def batch_info(self, vault_id: int, batch_id: int) -> dict[str, Any] | None:
        """The batch's id, known_at, source and detail (None: no such batch in the vault)."""
        with self.db.atomic() as con:
            return batches.batch_info(con, vault_id, batch_id, self.batch_callers)

    def written_by(self, vault_id: int, batch_id: int) -> list[Revision]:
        """Every revision one batch wrote (rename tombstones included), by path."""
        with self.db.atomic() as con:
            return batches.written_by(con, vault_id, batch_id)

    def batches_by_source(
        self, vault_id: int, source: str | None, caller: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """The vault's last ``limit`` batches written by ``source`` ("mcp": by any MCP tool) and/or done for
        ``caller``, oldest first, with their paths."""
        with self.db.atomic() as con:
            return batches.by_source(con, vault_id, source, caller, limit, self.batch_callers)

    def revision_before(self, vault_id: int, path: str, batch_id: int) -> Revision | None:
        """The last revision (or tombstone) at ``path`` before the batch ``batch_id``."""
        with self.db.atomic() as con:
            return q.revision_at(con, vault_id, path, batch_id - 1)

    def writer_lock(self, vault: str) -> WriterLock:
        return WriterLock(self.path, vault)

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
        """One atomic batch: everything the writer adds lands, or nothing does.

        ``known_at`` None means the moment the batch commits (``BatchWriter.stamp``: strictly after the
        vault's last batch whatever the clock does); an explicit time earlier than the vault's last batch
        is refused. The batch row is written only if the writer adds something.
        """
        with self.db.atomic(foreign_keys=known_at is not None) as con:  # (the row of a batch stamped at commit)
            last = con.execute("SELECT max(known_at) FROM batches WHERE vault_id = ?", (vault_id,)).fetchone()[0]
            at_commit = known_at is None
            if known_at is None:
                known_at = next_stamp(last)  # a lower bound until ``stamp``
            elif last is not None and known_at < last:
                raise ConfigError(
                    f"known_at {format_time(known_at)} is earlier than the vault's last batch at {format_time(last)}",
                    argument="known_at",
                )
            writer = BatchWriter(con, vault_id, known_at, source, detail, caller, self.indexers, at_commit=at_commit)
            try:
                yield writer
                writer.finish()
            finally:
                writer.forget_ahead()
            writer.stamp()  # the last thing before the commit

    def live_state(self, vault_id: int, paths: Iterable[str] | None = None) -> dict[str, tuple[int, str]]:
        """Path → (live revision id, content hash) of every note that exists now, or of those among ``paths``.

        With ``paths`` the cost follows their number, not the vault's size (a watcher batch).
        """
        with self.db.atomic() as con:
            return q.current_state(con, vault_id, None if paths is None else list(paths))

    def plan_state(
        self, vault_id: int, paths: Iterable[str]
    ) -> tuple[dict[str, tuple[int, str]], dict[str, tuple[int, int, str]]]:
        """``live_state`` and ``file_states`` of ``paths``, read in one transaction: what a plan needs."""
        wanted = list(paths)
        with self.db.atomic() as con:
            return q.current_state(con, vault_id, wanted), q.file_states(con, vault_id, wanted)

    def live_with_hashes(self, vault_id: int, hashes: Iterable[str]) -> dict[str, tuple[int, str]]:
        """Path → (live revision id, content hash) of the notes that exist now with one of ``hashes`` (a few
        index probes: a watcher's batch that creates notes looks for the other half of a move)."""
        with self.db.atomic() as con:
            return q.live_with_hashes(con, vault_id, list(hashes))

    def live_under(self, vault_id: int, folders: Iterable[str]) -> list[str]:
        """The notes that exist now below any of ``folders`` (vault-relative), by path."""
        wanted = list(folders)
        if not wanted:
            return []
        with self.db.atomic() as con:
            return q.live_under(con, vault_id, wanted)

    def live_index(self, vault_id: int) -> dict[str, int]:
        """Path → ``file_stamp(size, mtime_ns)`` of each live note as last read, or ``UNSTAMPED``:
        what a full scan needs to skip unchanged files, one small int per note."""
        with self.db.atomic() as con:
            return q.live_index(con, vault_id)

    def file_states(self, vault_id: int, paths: Iterable[str] | None = None) -> dict[str, tuple[int, int, str]]:
        """Path → (size, mtime_ns, content hash) as last read from disk (of ``paths`` only, when given)."""
        with self.db.atomic() as con:
            return q.file_states(con, vault_id, None if paths is None else list(paths))

    def last_batch(self, vault_id: int) -> tuple[int, str] | None:
        """(known_at, source) of the vault's last batch, None before the first."""
        row = self.db.one(
            "SELECT known_at, source FROM batches WHERE vault_id = ? ORDER BY id DESC LIMIT 1", (vault_id,)
        )
        return None if row is None else (row[0], row[1])

    def last_batch_id(self, vault_id: int) -> int:
        """The id of the vault's last batch (0 before the first)."""
        row = self.db.one("SELECT max(id) FROM batches WHERE vault_id = ?", (vault_id,))
        return int(row[0]) if row is not None and row[0] is not None else 0

    def batches_after(self, vault_id: int, batch_id: int, *, limit: int = 1000) -> list[BatchNews]:
        """The vault's batches after ``batch_id`` (oldest first, at most ``limit``) and the paths each wrote."""
        with self.db.atomic() as con:
            return q.batches_after(con, vault_id, batch_id, limit)

    def data_version(self) -> int:
        """A number that changes when another connection (this process or another) commits to the
        database: SQLite's ``PRAGMA data_version``, a cheap "anything new?" that reads no table."""
        row = self.db.one("PRAGMA data_version")
        assert row is not None
        return int(row[0])

    def wakeup(self) -> Sleep:
        """Something to wait on for other processes' batches: SQLite announces none, so it waits the time out."""
        return Sleep()

    def git_commits(self, vault_id: int) -> set[str]:
        """The commits already imported into the vault by ``import --from-git``."""
        return {r[0] for r in self.db.query("SELECT sha FROM git_commits WHERE vault_id = ?", (vault_id,))}

    # ------------------------------------------------------------ reading

    @contextlib.contextmanager
    def view(
        self, vault_id: int, vault_name: str, *, as_of: int | None = None, valid_at: int | None = None
    ) -> Iterator[View]:
        """The vault as known at ``as_of`` (None: now), inside one read transaction."""
        with self.db.atomic() as con:
            codec.refresh(con)  # a purge may have retrained the dictionary since this process loaded it
            yield View(con, self.path, vault_id, vault_name, as_of, valid_at)

    # ------------------------------------------------------------ search upkeep

    def reindex(self, vault_id: int, *, full: bool = False) -> int:
        """Index every batch the search index has not seen (``full``: drop and rebuild it for every vault,
        with the same embedder); return how many of this vault's batches were indexed."""
        from .search.index import SearchIndexer
        from .search.rebuild import rebuild_search

        if self.readonly:
            raise ConfigError("reindex needs the database opened for writing")
        if full:
            with self.db.atomic() as con:
                done = rebuild_search(con).get(vault_id, 0)
            self._attach_search()
            return done
        self._attach_search()
        indexer = self.indexers[-1]
        assert isinstance(indexer, SearchIndexer)  # put last by _attach_search
        with self.db.atomic() as con:
            return indexer.catch_up(con, vault_id)

    def reembed(self, embedder_name: str) -> tuple[str, int]:
        """Replace every vector with those of another embedder: (its signature, docs embedded)."""
        from ..embed.embedders import get_embedder
        from .search.embedding import reembed

        embedder = get_embedder(embedder_name)
        with self.db.atomic() as con:
            count = reembed(con, embedder)
        if not self.readonly:
            self._attach_search()
        return embedder.signature, count

    def fill_vectors(
        self,
        vault_id: int,
        *,
        limit: int | None = None,
        writing: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
        pause: Callable[[], None] | None = None,
    ) -> int:
        """Give up to ``limit`` of the vault's texts the vectors of a background embedder (``search.backfill``):
        current ones first, newest first; how many were filled (0: none is left, or the embedder is not one).
        ``writing`` is held around its transactions only, never while the model embeds; ``pause`` is called
        between runs of texts (``backfill.Filler.step``)."""
        from .search import backfill

        indexer = self._search_indexer()
        if indexer is None or indexer.mismatch is not None or not indexer.embedder.background:
            return 0
        if self._filler is None:
            self._filler = backfill.Filler(self.db.atomic, backfill.store_sqlite, "INDEXED BY search_rows_live")
        return self._filler.step(indexer.embedder, vault_id, limit or backfill.STEP, writing=writing, pause=pause)

    def _search_indexer(self) -> Any:
        from .search.index import SearchIndexer

        return next((i for i in self.indexers if isinstance(i, SearchIndexer)), None)

    # ------------------------------------------------------------ forgetting (see store/purge.py)

    def _purge_request(
        self, strings: list[str] | None, note: str | None, before: int | None, policy: Policy | None = None
    ) -> list[str]:
        """A purge's request checked (writable, exactly one kind); the strings to purge, checked."""
        if self.readonly:
            raise ConfigError("purge needs the database opened for writing")
        if sum((bool(strings), note is not None, before is not None, policy is not None)) != 1:
            raise ConfigError(
                "purge takes exactly one of: texts, a note, a time before which to forget, a retention policy"
            )
        return purging.check_strings(strings) if strings else []

    def _nothing_to_thin(self, vault_id: int, policy: Policy | None, now: int | None) -> PurgeResult | None:
        """A retention purge's result when the policy keeps everything now (nothing is written, nothing vacuumed:
        a watcher checks hourly); None when there is something to thin, or it is another kind of purge."""
        if policy is None:
            return None
        with self.db.atomic() as con:
            plan = purging.retention_plan(con, vault_id, policy, now)
            if plan.thinned:  # every batch a policy keeps stays as it is: only a batch that goes changes anything
                return None
        size = self.size()
        return PurgeResult("retention", scrubbed=True, database_bytes_before=size, database_bytes_after=size)

    def retention_preview(self, vault_id: int, policy: Policy, now: int | None = None) -> RetentionPreview:
        """What thinning the vault's history by ``policy`` at ``now`` would remove, without changing anything."""
        with self.db.atomic() as con:
            return thin.preview(
                con, vault_id, purging.retention_plan(con, vault_id, policy, now), self._sizes(con, vault_id)
            )

    def _sizes(self, con: Any, vault_id: int) -> freed.Sizes:
        """The database's bytes b-tree by b-tree, free pages and WAL: what ``freed`` estimates a thinning from."""
        wal = self.path + "-wal"
        return freed.sqlite_sizes(con, vault_id, self.size(), os.path.getsize(wal) if os.path.exists(wal) else 0)

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
        """Rewrite the vault's history without ``strings``, without the note at ``note``, without what
        was no longer visible at ``before``, or thinned by the retention ``policy`` at ``now`` (exactly one);
        then wipe free pages and the WAL."""
        chosen = self._purge_request(strings, note, before, policy)
        unchanged = self._nothing_to_thin(vault_id, policy, now)
        if unchanged is not None:
            return unchanged
        size_before = self.size()
        self.db.query("PRAGMA secure_delete=ON")
        try:
            with self.db.atomic() as con:
                result = purging.run(con, vault_id, strings=chosen, note=note, before=before, policy=policy, now=now)
            self._attach_search()
            result.scrubbed = self.scrub()
        finally:
            self.db.query("PRAGMA secure_delete=OFF")
        result.database_bytes_before, result.database_bytes_after = size_before, self.size()
        return result

    def scrub(self) -> bool:
        """VACUUM and truncate the WAL, so no free page or old frame keeps purged bytes; False when a reader
        kept the WAL from being truncated (the next purge or write-open tries again)."""
        self.db.query("VACUUM")
        busy = self.db.one("PRAGMA wal_checkpoint(TRUNCATE)")
        if busy is not None and busy[0]:
            return False
        with self.db.atomic() as con:
            purging.mark_scrubbed(con)
        self.db.one("PRAGMA wal_checkpoint(TRUNCATE)")
        return True

    def horizon(self, vault_id: int) -> int | None:
        """The vault's retention horizon (history before it was purged), None when it has none."""
        with self.db.atomic() as con:
            return purging.horizon(con, vault_id)

    def purge_count(self, vault_id: int) -> int:
        """How many purges the vault has had (0 before the purges table existed)."""
        with self.db.atomic() as con:
            return purging.count(con, vault_id)

    def unreachable_s(self) -> float:
        """How long the database has been unreachable (0 while it answers; a SQLite file always does)."""
        return 0.0

    # ------------------------------------------------------------ audit log heads (see store/audit.py)

    def audit_head(self, *, log_id: str | None = None, path: str | None = None) -> AuditHead | None:
        """Where the audit log ``log_id`` (else the last one appended at ``path``) ends, None if unknown."""
        with self.db.atomic() as con:
            return audit_heads.head(con, log_id=log_id, path=path)

    def audit_unwritable(self) -> str | None:
        """Why ``audit_append`` cannot move a head here (None: it can)."""
        return "the database is open read-only" if self.readonly else None

    def audit_append(self, log_id: str, path: str, write: Callable[[int, str], str]) -> AuditHead:
        """Append one record to an audit log and move its head in one step: ``write(records, head)``
        appends the record after the head it is given and returns the new record's hash; if it
        raises, the head stays where it was."""
        if self.readonly:
            raise ConfigError("the audit log needs the database opened for writing")
        with self.db.atomic() as con:
            return audit_heads.advance(con, log_id, path, now_micros(), write)

    def size(self) -> int:
        """Bytes of the database file and its WAL."""
        return sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p))

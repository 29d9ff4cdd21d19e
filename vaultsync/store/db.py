"""Opening the SQLite database: one binding (apsw), one place that sets pragmas, loads sqlite-vec
and turns apsw's exceptions into the store errors of ``vaultsync.errors``."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import apsw

from ..errors import BusyError, ConfigError, CorruptError, ReadOnlyError, StoreError

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
"""How long a connection waits for another's write transaction before the store reports it busy
(``$VAULTSYNC_BUSY_TIMEOUT_MS`` overrides it)."""


def busy_timeout_ms() -> int:
    value = os.environ.get("VAULTSYNC_BUSY_TIMEOUT_MS", "")
    return int(value) if value.isdigit() else BUSY_TIMEOUT_MS


@contextlib.contextmanager
def translated(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn any apsw error raised inside into the store error that says what happened, in one line."""
    try:
        yield
    except apsw.BusyError:
        raise BusyError(
            f"the database {path} is busy: {_writers(str(path))} is writing to it; try again when it has finished"
        ) from None
    except (apsw.CorruptError, apsw.NotADBError):
        raise CorruptError(f"{path} is damaged or is not a database") from None
    except (apsw.ReadOnlyError, apsw.CantOpenError, apsw.PermissionsError) as exc:
        raise ReadOnlyError(f"cannot write the database {path} ({exc})") from None
    except apsw.Error as exc:
        raise StoreError(f"the database {path} refused: {exc}") from None


def _writers(path: str) -> str:
    """Who holds a vault's writer lock on this database, for a busy message ('another connection' if nobody)."""
    from .lock import holders

    found = holders(path)
    return ", ".join(found) if found else "another connection"


def connect(path: str | os.PathLike[str], *, readonly: bool = False, create: bool = True) -> apsw.Connection:
    """Open the database with vaultsync's pragmas and the sqlite-vec extension loaded.

    Read-only opening never creates a file: a missing database is a ConfigError naming the path.
    """
    db_path = Path(path)
    if str(path) != ":memory:" and not db_path.exists() and (readonly or not create):
        raise ConfigError(
            f"no vaultsync database at {db_path}: import a vault into it first, or open another database",
            argument="db",
            remedy="sync",
        )
    if str(path) != ":memory:" and not readonly:
        try:
            db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise ReadOnlyError(
                f"cannot create the database folder {db_path.parent}: {exc.strerror}; "
                "choose a database path in a folder you can write"
            ) from None
        _create_private(db_path)
    if readonly and str(path) != ":memory:":
        con = _open_readonly(db_path)
    else:
        with translated(path):
            con = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
    with translated(path):
        con.set_busy_timeout(busy_timeout_ms())
        if not readonly:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
        con.execute("PRAGMA foreign_keys=ON")
        con.execute("PRAGMA cache_size=-65536")
        _load_vec(con)
    return con


def _open_readonly(db_path: Path) -> apsw.Connection:
    """Open for reading only, with no write access needed anywhere.

    SQLite reads a WAL database through its ``-shm`` file, which it must create when it is missing
    (the last writer removed it on closing); in a folder the reader cannot write that fails. The
    database file then holds every committed batch (no ``-wal`` content), so it is opened
    ``immutable``: no locks, no ``-shm``. A ``-wal`` with content but no usable ``-shm`` (a writer
    killed, the folder read-only to us) cannot be read without losing its batches: one line says so.
    """
    con = _plain_readonly(db_path)
    if con is not None:
        return con
    wal = db_path.with_name(db_path.name + "-wal")
    try:
        pending = wal.stat().st_size > 0
    except FileNotFoundError:
        pending = False
    except OSError as exc:
        raise ReadOnlyError(f"cannot read the database {db_path}: {wal} cannot be read ({exc.strerror})") from None
    if pending:
        raise ReadOnlyError(
            f"cannot read the database {db_path}: its write-ahead log {wal.name} holds batches that "
            f"can only be read with write access to {db_path.parent} (a writer stopped before "
            "folding them in); open it once with write access, or ask its owner to"
        ) from None
    try:
        con = apsw.Connection(
            db_path.absolute().as_uri() + "?immutable=1", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        )
        con.execute("SELECT count(*) FROM sqlite_schema").fetchone()
    except (apsw.CorruptError, apsw.NotADBError):  # (opened immutable: no lock, nothing to wait for)
        raise CorruptError(f"{db_path} is damaged or is not a database") from None
    except apsw.Error as exc:
        raise ReadOnlyError(f"cannot read the database {db_path} ({exc})") from None
    logger.debug("opened %s immutable: its folder cannot be written and it has no write-ahead log", db_path)
    return con


def _plain_readonly(db_path: Path) -> apsw.Connection | None:
    """A read-only connection that works (None: SQLite cannot open the database without write access)."""
    with translated(db_path):
        try:
            con = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
        except apsw.CantOpenError as exc:
            raise ReadOnlyError(f"cannot read the database {db_path} ({exc})") from None
        con.set_busy_timeout(busy_timeout_ms())  # a reader racing another's recovery of the log waits
        try:
            con.execute("SELECT count(*) FROM sqlite_schema").fetchone()
        except (apsw.CantOpenError, apsw.ReadOnlyError):
            con.close()
            return None
        return con


def _create_private(db_path: Path) -> None:
    """Create a new database file readable by its owner only: it holds the vault's whole history.
    SQLite gives the WAL and shared-memory files the database file's mode, so they are private too."""
    try:
        fd = os.open(db_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except FileExistsError:
        return
    except OSError:
        return  # apsw reports what is wrong with the path in one line
    os.close(fd)


def _load_vec(con: apsw.Connection) -> None:
    try:
        import sqlite_vec
    except ImportError:  # pragma: no cover - a declared dependency
        logger.debug("sqlite-vec not installed; vector search unavailable")
        return
    con.enable_load_extension(True)
    try:
        con.load_extension(sqlite_vec.loadable_path())
    finally:
        con.enable_load_extension(False)


class Database:
    """A connection plus a re-entrant transaction helper (savepoints when nested)."""

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False, create: bool = True) -> None:
        self.path = str(path)
        self.readonly = readonly
        self.con = connect(path, readonly=readonly, create=create)
        self._lock = threading.RLock()

    def close(self) -> None:
        self.con.close()

    @contextlib.contextmanager
    def atomic(self, *, foreign_keys: bool = True) -> Iterator[apsw.Connection]:
        """One transaction: everything inside lands, or nothing does. Also a consistent read snapshot.

        ``foreign_keys`` False: SQLite does not check them in this transaction (when it is not nested in another:
        a batch that writes its own row last, see ``BatchWriter``; checked at commit, each would look for the rows
        naming the new row through a whole table)."""
        with self._lock, translated(self.path):
            unchecked = not foreign_keys and not self.con.in_transaction
            if unchecked:
                self.con.execute("PRAGMA foreign_keys=OFF")  # (a no-op inside a transaction)
            try:
                with self.con:
                    yield self.con
            finally:
                if unchecked:
                    self.con.execute("PRAGMA foreign_keys=ON")

    def query(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        with self._lock, translated(self.path):
            return self.con.execute(sql, params).fetchall()

    def one(self, sql: str, params: tuple | dict = ()) -> tuple | None:
        with self._lock, translated(self.path):
            return self.con.execute(sql, params).fetchone()

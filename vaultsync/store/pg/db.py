"""The PostgreSQL engine's connections: the store's own (writes, in ``atomic``) and the readers' pool (views).

``PgDatabase`` has ``db.Database``'s shape (``atomic``, ``query``, ``one``) on one psycopg connection, and
``snapshot``: one ``REPEATABLE READ READ ONLY`` transaction on a connection of a ``psycopg_pool`` pool, so
that the threads of one server (the MCP SDK runs each tool call in a worker thread) read side by side.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from ...errors import ConfigError, StoreError
from .compat import Con

POOL_ENV = "VAULTSYNC_PG_POOL"
"""How many connections a store's readers may hold at once (default ``POOL_SIZE``)."""
POOL_SIZE = 4


def pool_size() -> int:
    """``VAULTSYNC_PG_POOL`` (a positive integer), else ``POOL_SIZE``."""
    raw = os.environ.get(POOL_ENV, "").strip()
    if not raw:
        return POOL_SIZE
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{POOL_ENV} must be a positive integer, not {raw!r}")
    return int(raw)


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ConfigError("the PostgreSQL engine needs psycopg: pip install 'vaultsync[postgres]'") from None
    return psycopg


@contextlib.contextmanager
def translated(where: str) -> Iterator[None]:
    """Turn a psycopg error into the store error that says what happened, in one line."""
    psycopg = _driver()
    try:
        yield
    except psycopg.errors.RaiseException as exc:
        raise StoreError(f"the database {where} refused: {exc.diag.message_primary}") from None
    except psycopg.Error as exc:
        said = getattr(getattr(exc, "diag", None), "message_primary", None) or str(exc).strip().splitlines()[-1]
        if isinstance(exc, psycopg.OperationalError) and getattr(exc, "sqlstate", None) is None:
            raise StoreError(f"cannot use the database {where}: {said}") from None  # no server answered
        raise StoreError(f"the database {where} refused: {said}") from None


def redact(dsn: str) -> str:
    """The connection string without its password, for messages."""
    head, sep, tail = dsn.partition("@")
    if not sep or ":" not in head.split("//", 1)[-1]:
        return dsn
    scheme, _, user = head.partition("//")
    return f"{scheme}//{user.split(':', 1)[0]}:***@{tail}"


class PgDatabase:
    """One connection (autocommit outside ``atomic``) and a re-entrant transaction helper, as ``db.Database``, and
    the readers' pool behind ``snapshot`` (opened at the first view)."""

    def __init__(self, dsn: str, *, readonly: bool = False, application_name: str = "vaultsync") -> None:
        self.path = redact(dsn)
        self.dsn = dsn
        self.readonly = readonly
        with translated(self.path):
            self.raw = _driver().connect(dsn, autocommit=True, application_name=application_name)
        self.con = Con(self.raw)
        self._lock = threading.RLock()
        self._inside = threading.local()  # how deep this thread is in ``atomic``
        self._pool: Any = None
        self._pool_lock = threading.Lock()
        self.application_name = application_name
        self.schema: str | None = None  # set by PgStore: the readers' search_path when not public

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self.raw.close()

    @contextlib.contextmanager
    def atomic(self, *, snapshot: bool = False) -> Iterator[Con]:
        """One transaction (a savepoint when nested); ``snapshot``: REPEATABLE READ READ ONLY."""
        with self._lock, translated(self.path):
            outermost = self.raw.info.transaction_status == 0  # IDLE
            self._inside.depth = getattr(self._inside, "depth", 0) + 1
            try:
                with self.raw.transaction():
                    if outermost and (snapshot or self.readonly):
                        self.raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    yield self.con
            finally:
                self._inside.depth -= 1

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Con]:
        """One ``REPEATABLE READ READ ONLY`` transaction on a connection of the readers' pool (threads read side by
        side); inside this thread's ``atomic`` (a view taken within a batch) on the store's own connection."""
        if getattr(self._inside, "depth", 0):
            with self.atomic(snapshot=True) as con:
                yield con
            return
        held = getattr(self._inside, "reading", None)
        if held is not None:  # a view within a view of this thread: the same snapshot, as on one connection
            with translated(self.path), held.raw.transaction():
                yield held
            return
        with translated(self.path), self.pool().connection() as raw:
            with raw.transaction():
                raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                self._inside.reading = con = Con(raw)
                try:
                    yield con
                finally:
                    self._inside.reading = None

    def pool(self) -> Any:
        """The readers' ``psycopg_pool.ConnectionPool``, opened on first use (one connection, up to ``pool_size()``)."""
        with self._pool_lock:
            if self._pool is None:
                try:
                    from psycopg_pool import ConnectionPool
                except ImportError:
                    raise ConfigError("the PostgreSQL engine needs psycopg_pool: pip install 'vaultsync[postgres]'") \
                        from None
                schema = self.schema

                def configure(raw: Any) -> None:
                    if schema not in (None, "public"):
                        raw.execute("SELECT set_config('search_path', %s, false)", (schema,))

                self._pool = ConnectionPool(self.dsn, min_size=1, max_size=pool_size(), configure=configure,
                                            kwargs={"autocommit": True, "application_name": self.application_name},
                                            name=f"vaultsync readers of {self.path}", open=False)
                self._pool.open(wait=True, timeout=30)
            return self._pool

    def query(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        with self.atomic() as con:
            return con.execute(sql, params).fetchall()

    def one(self, sql: str, params: tuple | dict = ()) -> tuple | None:
        with self.atomic() as con:
            return con.execute(sql, params).fetchone()

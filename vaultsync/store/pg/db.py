"""The PostgreSQL engine's connections: the store's own (writes, in ``atomic``) and the readers' pool (views).

``PgDatabase`` has ``db.Database``'s shape (``atomic``, ``query``, ``one``) on one psycopg connection, and
``snapshot``: one ``REPEATABLE READ READ ONLY`` transaction on a connection of a ``psycopg_pool`` pool, so
that the threads of one server (the MCP SDK runs each tool call in a worker thread) read side by side.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

from ...dsn import public
from ...errors import ConfigError, StoreError, Unreachable
from .compat import Con
from .session import Reach, connect, is_loss, lost, options, said

POOL_ENV = "VAULTSYNC_PG_POOL"
"""How many connections a store's readers may hold at once (default ``POOL_SIZE``)."""
POOL_SIZE = 4
POOL_WAIT_S = 10.0
"""How long a reader waits for a pooled connection (all busy, or being made again after an outage)."""


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
        raise ConfigError("the PostgreSQL engine needs psycopg: pip install 'vaultsync-mcp[postgres]'") from None
    return psycopg


@contextlib.contextmanager
def translated(where: str, reach: Any = None) -> Iterator[None]:
    """Turn a psycopg error into the store error that says what happened, in one line (``reach``, a
    ``session.Reach``, learns of a lost connection)."""
    psycopg = _driver()
    try:
        yield
    except psycopg.errors.RaiseException as exc:
        why = exc.diag.message_primary
        raise StoreError(f"the database {where} refused: {why}", public=f"the database refused: {why}") from None
    except psycopg.Error as exc:
        why = said(exc)
        if is_loss(exc):
            if reach is not None:
                reach.lost(why)
            raise Unreachable(  # no server answered (its reason names the host or socket: not for clients)
                f"cannot use the database {where}: {why}", public="the database cannot be reached; try again shortly"
            ) from None
        raise StoreError(f"the database {where} refused: {why}", public=f"the database refused: {why}") from None


def redact(dsn: str) -> str:
    """The connection string without credentials, for messages (``dsn.public``)."""
    return public(dsn)


class PgDatabase:
    """One connection (autocommit outside ``atomic``) and a re-entrant transaction helper, as ``db.Database``, and
    the readers' pool behind ``snapshot`` (opened at the first view). A lost connection is opened again before the
    next transaction (``pg/session.py``)."""

    def __init__(self, dsn: str, *, readonly: bool = False, application_name: str = "vaultsync") -> None:
        self.path = redact(dsn)
        self.dsn = dsn
        self.readonly = readonly
        self.reach = Reach.of(self.path)
        self.raw = connect(dsn, self.path, application_name=application_name)
        self.con = Con(self.raw)
        self._lock = threading.RLock()
        self._inside = threading.local()  # how deep this thread is in ``atomic``
        self._pool: Any = None
        self._pool_lock = threading.Lock()
        self._pool_checked = 0  # ``reach.losses`` when the pool's idle connections were last checked
        self.application_name = application_name
        self.schema: str | None = None  # set by PgStore: the readers' search_path when not public

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self.raw.close()

    def _reopen(self) -> None:
        """The store's own connection, opened again when it was lost (StoreError when the database is away)."""
        if lost(self.raw):
            raw = connect(self.dsn, self.path, self.reach, application_name=self.application_name)
            if self.schema not in (None, "public"):
                raw.execute("SELECT set_config('search_path', %s, false)", (self.schema,))
            self.raw, self.con = raw, Con(raw)

    def _begin(self, stack: contextlib.ExitStack, raw: Any) -> bool:
        """BEGIN on ``raw`` (entered into ``stack``); False when BEGIN found the connection lost (nothing done)."""
        transaction = raw.transaction()
        try:
            transaction.__enter__()
        except _driver().OperationalError as exc:
            if not lost(raw):
                raise
            self.reach.lost(said(exc))
            return False
        stack.push(transaction)
        return True

    @contextlib.contextmanager
    def atomic(self, *, snapshot: bool = False) -> Iterator[Con]:
        """One transaction (a savepoint when nested); ``snapshot``: REPEATABLE READ READ ONLY."""
        with self._lock, translated(self.path, self.reach), contextlib.ExitStack() as stack:
            outermost = not getattr(self._inside, "depth", 0)
            if outermost:
                self._reopen()
                if not self._begin(stack, self.raw):  # found lost at BEGIN: once more, on a new session
                    self._reopen()
                    if not self._begin(stack, self.raw):
                        raise _driver().OperationalError("the connection is lost")
                self.reach.back()
            else:
                stack.enter_context(self.raw.transaction())
            self._inside.depth = getattr(self._inside, "depth", 0) + 1
            try:
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
            with translated(self.path, self.reach), held.raw.transaction():
                yield held
            return
        with translated(self.path, self.reach), contextlib.ExitStack() as stack:
            raw = self._pooled(stack)
            raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            self._inside.reading = con = Con(raw)
            try:
                yield con
            finally:
                self._inside.reading = None

    def _pooled(self, stack: contextlib.ExitStack) -> Any:
        """A connection of the readers' pool in a transaction (both entered into ``stack``): one found lost at BEGIN
        goes back (the pool drops it) and another is taken, once; while the database is away, StoreError at once."""
        from psycopg_pool import PoolTimeout

        for attempt in range(2):
            self._usable()
            inner = contextlib.ExitStack()
            try:
                raw = inner.enter_context(self.pool().connection(timeout=POOL_WAIT_S))
            except PoolTimeout:
                inner.close()
                raise StoreError(
                    f"cannot use the database {self.path}: no connection within {POOL_WAIT_S:g} s"
                ) from None
            begun = False
            try:
                begun = self._begin(inner, raw)
            finally:
                if not begun:
                    inner.close()  # returns the lost connection: the pool drops it
            if begun:
                stack.enter_context(inner)
                return raw
            if attempt:
                raise _driver().OperationalError("the connection is lost")
        raise AssertionError("unreachable")

    def _usable(self) -> None:
        """Before taking a pooled connection: while the database is away, try one session of our own (at the pace
        ``reach`` allows: StoreError at once in between); after an outage, have the pool check its idle
        connections (those of before it are gone)."""
        if self.reach.down:
            connect(self.dsn, self.path, self.reach, application_name=self.application_name).close()
        pool = self._pool
        if pool is not None and self._pool_checked != self.reach.losses:
            self._pool_checked = self.reach.losses
            pool.check()

    def pool(self) -> Any:
        """The readers' ``psycopg_pool.ConnectionPool``, opened on first use (one connection, up to ``pool_size()``)."""
        with self._pool_lock:
            if self._pool is None:
                try:
                    from psycopg_pool import ConnectionPool
                except ImportError:
                    raise ConfigError(
                        "the PostgreSQL engine needs psycopg_pool: pip install 'vaultsync-mcp[postgres]'"
                    ) from None
                schema = self.schema

                def configure(raw: Any) -> None:
                    if schema not in (None, "public"):
                        raw.execute("SELECT set_config('search_path', %s, false)", (schema,))

                quiet = logging.getLogger("psycopg.pool")
                if quiet.level == logging.NOTSET:  # each broken connection it drops: ``reach`` says the loss once
                    quiet.setLevel(logging.ERROR)
                self._pool = ConnectionPool(
                    self.dsn,
                    min_size=1,
                    max_size=pool_size(),
                    configure=configure,
                    kwargs={"autocommit": True, "application_name": self.application_name, **options(self.dsn)},
                    name=f"vaultsync readers of {self.path}",
                    open=False,
                )
                with translated(self.path, self.reach):
                    self._pool.open(wait=True, timeout=POOL_WAIT_S)
            return self._pool

    def query(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        with self.atomic() as con:
            return con.execute(sql, params).fetchall()

    def one(self, sql: str, params: tuple | dict = ()) -> tuple | None:
        with self.atomic() as con:
            return con.execute(sql, params).fetchone()

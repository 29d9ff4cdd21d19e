"""Building the store contract's Change values."""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path
from typing import Any, Protocol
import pytest
from vaultsync.errors import ConfigError, LockedError
from vaultsync.parsers import parse_note
from vaultsync.store import BatchWriter, Store, View, WriterLock, file_stamp
from vaultsync.store.contract import PROTOCOLS, Batch, Change, Engine, Follow, Lock, ReadView, Upkeep, Wakeup
from vaultsync.store.lock import Sleep


def change(path: str, text: str, *, kind: str = "created", live: int | None = None, prev: int | None = None,
           renamed_from: str | None = None, mtime_ns: int | None = None) -> tuple[Change, Any]:
    data = text.encode()
    return (Change(path, kind, text, hashlib.sha256(data).hexdigest(), len(data), mtime_ns, live, prev, renamed_from),
            parse_note(text, path))

"""Building the store contract's Change values."""

from __future__ import annotations

import hashlib
from typing import Any

from vaultsync.parsers import parse_note
from vaultsync.store.contract import Change


def change(
    path: str,
    text: str,
    *,
    kind: str = "created",
    live: int | None = None,
    prev: int | None = None,
    renamed_from: str | None = None,
    mtime_ns: int | None = None,
) -> tuple[Change, Any]:
    data = text.encode()
    return (
        Change(path, kind, text, hashlib.sha256(data).hexdigest(), len(data), mtime_ns, live, prev, renamed_from),
        parse_note(text, path),
    )

"""The SQLite engine's heartbeat: what a vault's writer publishes about itself, in ``<db>.<vault>.beat`` beside the
database file, for every process that reads the database (``live/heartbeat.py`` says what it holds and when).

A file, not a table: publishing never waits for a batch in progress (SQLite has one writer at a time) and adds
nothing to the database, its WAL or its copies. The file is replaced whole (never read half written) and
readable by whoever may read the database file (its permission bits); its age is its modification time.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

LIMIT = 64 * 1024
"""The most a heartbeat file is read of (a few hundred bytes are written): a larger one is not a heartbeat."""


def publish(path: Path, database: Path, facts: dict[str, Any] | None) -> None:
    """Replace ``path`` with ``facts`` (None: remove it), readable as ``database`` is."""
    if facts is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    try:
        mode = stat.S_IMODE(os.stat(database).st_mode) & 0o666
    except OSError:
        mode = 0o600
    fd, name = tempfile.mkstemp(prefix=path.name + ".", suffix=".new", dir=path.parent)
    try:
        with open(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(facts, separators=(",", ":")))
        os.chmod(name, mode)
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        raise


def read(path: Path) -> tuple[dict[str, Any], float] | None:
    """What was last published in ``path`` and its age in seconds, or None when nothing was (or it is unreadable)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(LIMIT + 1)
            at = os.fstat(handle.fileno()).st_mtime
    except OSError:
        return None
    if len(text) > LIMIT:
        return None
    try:
        facts = json.loads(text)
    except ValueError:
        return None
    if not isinstance(facts, dict):
        return None
    return facts, max(0.0, time.time() - at)

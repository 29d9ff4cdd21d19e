"""One writer per vault: an advisory file lock that the OS releases when the holder dies."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import IO

from ..errors import LockedError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class WriterLock:
    """Exclusive lock on ``<db>.<vault>.lock``; its content names the holder for error messages."""

    def __init__(self, db_path: str, vault: str) -> None:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in vault)
        self.path = Path(f"{db_path}.{safe}.lock")
        self.vault = vault
        self._file: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def acquire(self, command: str | None = None) -> None:
        """Take the lock, or raise LockedError naming the process that holds it."""
        if not self.try_acquire(command):
            raise LockedError(f"vault '{self.vault}' is already being written by {self.holder() or 'another process'}; "
                              "stop it first")

    def try_acquire(self, command: str | None = None) -> bool:
        """Take the lock if it is free (never waits); True when this object holds it afterwards."""
        if self._file is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+", encoding="utf-8")
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                return False
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({
            "pid": os.getpid(),
            "command": command or " ".join(["vaultsync", *sys.argv[1:]]),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }))
        handle.flush()
        self._file = handle
        return True

    def holder(self) -> str | None:
        """Who holds the lock now (another process), or None when it is free or ours."""
        if self._file is not None or not self.path.exists() or fcntl is None:
            return None
        with open(self.path, "a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                handle.seek(0)
                return _describe(handle.read())
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            return None

    def release(self) -> None:
        if self._file is None:
            return
        if fcntl is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
        self._file.close()
        self._file = None

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def holders(db_path: str) -> list[str]:
    """Every process holding a vault's writer lock on the database ``db_path``, described."""
    folder = Path(db_path).parent
    prefix = Path(db_path).name + "."
    found = []
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".lock"))
    except OSError:
        return []
    for name in names:
        lock = WriterLock(db_path, "")
        lock.path = folder / name
        holder = lock.holder()
        if holder is not None:
            found.append(holder)
    return found


def _describe(text: str) -> str:
    try:
        info = json.loads(text)
        return f"pid {info['pid']} ({info['command']}, since {info['started']})"
    except (ValueError, KeyError, TypeError):
        return "another process"

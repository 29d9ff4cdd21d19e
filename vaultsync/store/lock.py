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
        self.command: str | None = None
        """How the lock file names the holder when a caller names nothing (None: this process's arguments)."""
        self._file: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def acquire(self, command: str | None = None, *, watching: bool = False) -> None:
        """Take the lock, or raise LockedError naming the process that holds it (see ``try_acquire``)."""
        if not self.try_acquire(command, watching=watching):
            raise LockedError(f"vault '{self.vault}' is already being written by {self.holder() or 'another process'}; "
                              "stop it first")

    def try_acquire(self, command: str | None = None, *, watching: bool = False) -> bool:
        """Take the lock if it is free (never waits); True when this object holds it afterwards.

        ``watching``: this process records every change in the folder while it holds the lock, so
        another process's write tool may write a note and wait for it to be recorded here.
        """
        if self._file is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)  # the holder's argv: private
        handle = open(fd, "a+", encoding="utf-8")
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
            "command": command or self.command or " ".join(["vaultsync", *sys.argv[1:]]),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "watching": watching,
        }))
        handle.flush()
        self._file = handle
        return True

    def holder(self) -> str | None:
        """Who holds the lock now (another process), or None when it is free or ours."""
        info = self.holder_info()
        return None if info is None else _describe(info)

    def holder_info(self) -> dict[str, object] | None:
        """What the holder (another process) wrote into the lock file ({} if unreadable), or None when free or ours."""
        if self._file is not None or fcntl is None:
            return None
        try:
            handle = open(self.path, encoding="utf-8")
        except OSError:
            return None
        with handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                try:
                    info = json.loads(handle.read())
                except ValueError:
                    return {}
                return info if isinstance(info, dict) else {}
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


def _describe(info: dict[str, object]) -> str:
    try:
        return f"pid {info['pid']} ({info['command']}, since {info['started']})"
    except KeyError:
        return "another process"

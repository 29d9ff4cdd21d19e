"""One writer per vault: a lock on ``<db>.<vault>.lock`` whose content names the holder.

How it is held is ``capabilities.current().lock``:

- ``fcntl`` (Linux, macOS): ``flock`` on the file; the OS releases it when the holder dies.
- ``msvcrt`` (Windows): ``msvcrt.locking`` on one byte far past the holder's description (Windows
  locks are mandatory: a locked byte cannot be read, so the description stays readable); the OS
  releases it when the holder dies.
- ``pidfile`` (neither: what the suite runs on Linux with ``fcntl`` taken away): the file is created
  exclusively and removed on release. Weaker: a holder that dies leaves the file, and the next
  writer takes it over only once it finds that pid gone (on POSIX ``kill(pid, 0)``); a pid reused by
  an unrelated process keeps the vault locked until that process ends or the file is removed by hand.
  Two processes can both win only if a third died while taking a stale lock over (``_pidfile``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from ..disk import capabilities
from ..dsn import command_line
from ..errors import LockedError
from . import beat_file

MSVCRT_OFFSET = 1 << 30
"""The byte ``msvcrt`` locks: far past any description written at the start of the file."""


class WriterLock:
    """Exclusive lock on ``<db>.<vault>.lock``; its content names the holder for error messages."""

    def __init__(self, db_path: str, vault: str) -> None:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in vault)
        self.path = Path(f"{db_path}.{safe}.lock")
        self.beat_path = Path(f"{db_path}.{safe}.beat")
        """Where the holder publishes its heartbeat (``beat_file``)."""
        self.database = Path(db_path)
        self.vault = vault
        self.command: str | None = None
        """How the lock file names the holder when a caller names nothing (None: this process's arguments)."""
        self._file: IO[str] | None = None
        self._kind = capabilities.current().lock

    @property
    def held(self) -> bool:
        return self._file is not None

    def alive(self) -> bool:
        """Whether the lock is still held: a file lock lasts as long as this process (nothing to ask)."""
        return self.held

    def acquire(self, command: str | None = None, *, watching: bool = False) -> None:
        """Take the lock, or raise LockedError naming the process that holds it (see ``try_acquire``)."""
        if not self.try_acquire(command, watching=watching):
            raise LockedError(
                f"vault '{self.vault}' is already being written by {self.holder() or 'another process'}; stop it first"
            )

    def try_acquire(self, command: str | None = None, *, watching: bool = False) -> bool:
        """Take the lock if it is free (never waits); True when this object holds it afterwards.

        ``watching``: this process records every change in the folder while it holds the lock, so
        another process's write tool may write a note and wait for it to be recorded here.
        """
        if self._file is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        record = json.dumps(
            {
                "pid": os.getpid(),
                "command": command_line([command or self.command or " ".join(["vaultsync", *sys.argv[1:]])]),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "watching": watching,
            }
        )
        if self._kind == "pidfile":
            self._file = self._pidfile(record)
            return self._file is not None
        handle = self._locked()
        if handle is None:
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(record)
        handle.flush()
        self._file = handle
        return True

    def _locked(self) -> IO[str] | None:
        """The lock file opened and locked (fcntl or msvcrt), or None when another process holds it."""
        fd = os.open(
            self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600
        )  # the holder's argv: private
        handle = open(fd, "a+", encoding="utf-8")
        try:
            _lock(self._kind, handle, exclusive=True)
        except OSError:
            handle.close()
            return None
        return handle

    def _pidfile(self, record: str) -> IO[str] | None:
        """The lock file, put in place whole (never seen empty), after taking over one whose holder is gone.

        Only ``_linked`` puts a lock file in place, and it fails when one is there; only the holder of the
        take-over file (``<lock>.takeover``, itself put in place by ``_linked``) removes another process's
        lock file, after reading it again. So two processes that find the same stale file cannot both win.
        """
        taking = self.path.with_name(self.path.name + ".takeover")
        for _ in range(3):
            handle = _linked(self.path, record)
            if handle is not None:
                return handle
            if _live_record(self.path):
                return None
            turn = _linked(taking, record)
            if turn is None:
                if _live_record(taking):
                    return None  # another process is taking the stale lock over
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(taking)  # left by a process that died taking over
                continue
            try:
                if not _live_record(self.path):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.path)
                handle = _linked(self.path, record)
            finally:
                os.unlink(taking)
                turn.close()
            return handle
        return None

    def holder(self) -> str | None:
        """Who holds the lock now (another process), or None when it is free or ours."""
        info = self.holder_info()
        return None if info is None else _describe(info)

    def holder_info(self) -> dict[str, object] | None:
        """What the holder (another process) wrote into the lock file ({} if unreadable), or None when free or ours."""
        if self._file is not None:
            return None
        try:
            handle = open(self.path, encoding="utf-8")
        except OSError:
            return None
        with handle:
            if self._kind == "pidfile":
                info = _parse(handle.read())
                return info if _held_by_live(info, os.fstat(handle.fileno()).st_mtime) else None
            try:
                _lock(self._kind, handle, exclusive=False)
            except OSError:
                return _parse(handle.read())
            _unlock(self._kind, handle)
            return None

    def publish(self, facts: dict[str, Any] | None) -> None:
        """The holder's heartbeat, for every reader of the database (None: none); nothing while not held."""
        if self._file is not None:
            beat_file.publish(self.beat_path, self.database, facts)

    def beat(self) -> tuple[dict[str, Any], float] | None:
        """The heartbeat last published for the vault and its age in seconds (None: none was)."""
        return beat_file.read(self.beat_path)

    def release(self) -> None:
        if self._file is None:
            return
        if self._kind == "pidfile":
            with contextlib.suppress(OSError):
                if capabilities.same_file(os.lstat(self.path), os.fstat(self._file.fileno())):
                    os.unlink(self.path)
        else:
            _unlock(self._kind, self._file)
        self._file.close()
        self._file = None

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _lock(kind: str, handle: IO[str], *, exclusive: bool) -> None:
    """Lock without waiting (OSError when another process holds it); shared means "only to test"."""
    if kind == "fcntl":
        import fcntl

        fcntl.flock(handle.fileno(), (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    else:
        import msvcrt

        os.lseek(handle.fileno(), MSVCRT_OFFSET, os.SEEK_SET)
        msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]  # Windows only (typeshed hides msvcrt elsewhere)
        os.lseek(handle.fileno(), 0, os.SEEK_SET)


def _unlock(kind: str, handle: IO[str]) -> None:
    if kind == "fcntl":
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    else:
        import msvcrt

        os.lseek(handle.fileno(), MSVCRT_OFFSET, os.SEEK_SET)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]  # Windows only (typeshed hides msvcrt elsewhere)
        os.lseek(handle.fileno(), 0, os.SEEK_SET)


def _parse(text: str) -> dict[str, Any]:
    try:
        info = json.loads(text)
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def _linked(path: Path, record: str) -> IO[str] | None:
    """``record`` written to a private file and linked in as ``path`` (None when ``path`` exists), open."""
    fd, name = tempfile.mkstemp(prefix=path.name + ".", suffix=".new", dir=path.parent)  # mode 0600
    handle = open(fd, "w", encoding="utf-8")
    try:
        handle.write(record)
        handle.flush()
        try:
            os.link(name, path)
        except FileExistsError:
            handle.close()
            return None
        return handle
    finally:
        os.unlink(name)


def _live_record(path: Path) -> bool:
    """Whether the pidfile ``path`` exists and its holder still runs."""
    try:
        handle = open(path, encoding="utf-8")
    except FileNotFoundError:
        return False
    with handle:
        return _held_by_live(_parse(handle.read()), os.fstat(handle.fileno()).st_mtime)


UNWRITTEN_S = 10.0
"""A pidfile still without a description after this long is taken to be left by a holder that died."""


def _held_by_live(info: dict[str, Any], mtime: float) -> bool:
    """Whether a pidfile's holder still runs (a file without a pid is being written, unless old)."""
    pid = info.get("pid")
    if not isinstance(pid, int):
        return time.time() - mtime < UNWRITTEN_S
    if pid == os.getpid():
        return True  # another WriterLock of this process
    if os.name == "nt":  # os.kill(pid, 0) would end the process there: keep the lock (removed by hand)
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


class Sleep:
    """The SQLite engine's ``Wakeup``: no commit is announced, so ``wait`` waits out its time (or until ``stop``,
    a ``threading.Event``, is set) and says False; the caller polls ``data_version``."""

    def wait(self, timeout_s: float, stop: Any = None) -> bool:
        if stop is not None:
            stop.wait(timeout_s)
        else:
            time.sleep(timeout_s)
        return False

    def close(self) -> None:
        pass

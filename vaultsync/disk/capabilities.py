"""What this operating system offers vaultsync, detected once: every caller asks here, never ``sys.platform``.

==============  =========================================  ==========================================
capability      where it exists                            without it
==============  =========================================  ==========================================
``dir_fd``      Linux, macOS, BSD (``os.supports_dir_fd``)  each folder is checked with ``lstat`` and
                                                           re-checked after the open (``vaultfs``)
``no_follow``   ``os.O_NOFOLLOW``: not on Windows          ``lstat`` first, then the opened file's
                                                           (st_dev, st_ino) must be the lstat's
``o_directory`` ``os.O_DIRECTORY``: not on Windows         folders are opened as files and checked
``exchange``    ``renameat2`` (Linux), ``renameatx_np``    a whole-note rewrite checks the note, then
                (macOS); absent on Windows                 replaces it by a plain rename (a writer in
                                                           between loses); appends write in place
                                                           and never need it (``appendfs``)
``lock``        ``fcntl`` (POSIX), ``msvcrt`` (Windows)    ``pidfile``: an exclusive-create lock
                                                           file, taken over when its pid is dead
==============  =========================================  ==========================================

Importing any vaultsync module never needs one of them: callers ask ``current()`` at run time.

``VAULTSYNC_CAPABILITIES_OFF`` (comma-separated names above, ``fcntl`` and ``msvcrt`` for their
lock) takes capabilities away, never adds one: the test suite runs its contract tests again on
Linux with each one off (``tests/conftest.py``), and that is the only way the weaker paths have
run here. ``VAULTSYNC_CASE_INSENSITIVE=1`` makes name lookups fold case as a case-insensitive
file system (APFS, NTFS) does, on a case-sensitive one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import ntpath
import os
import stat
from dataclasses import dataclass
from functools import lru_cache

from ..errors import ConfigError

OFF_ENV = "VAULTSYNC_CAPABILITIES_OFF"
CASE_ENV = "VAULTSYNC_CASE_INSENSITIVE"
NAMES = ("dir_fd", "no_follow", "o_directory", "exchange", "fcntl", "msvcrt")

FILE_ATTRIBUTE_REPARSE_POINT = 0x400
NAME_SURROGATE = 0x20000000
"""Reparse tags with this bit (symlinks, junctions, mount points) name another place: never followed.
Cloud placeholders (OneDrive files on demand) lack it and are read like files."""


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the OS offers, as detected (minus what ``VAULTSYNC_CAPABILITIES_OFF`` takes away)."""

    dir_fd: bool
    """Folders open as descriptors and every call vaultfs makes takes ``dir_fd`` (``openat`` and friends)."""
    no_follow: int
    """``os.O_NOFOLLOW``, or 0: the open itself cannot refuse a symlink."""
    o_directory: int
    """``os.O_DIRECTORY``, or 0."""
    exchange: str | None
    """"renameat2", "renameatx_np" or None: how two names are swapped atomically."""
    lock: str
    """"fcntl", "msvcrt" or "pidfile": how the writer lock is held (``store.lock``)."""
    case_insensitive: bool
    """Simulated: names are looked up folding case (real case-insensitive file systems are probed per folder)."""
    off: frozenset[str]
    """What was taken away by ``VAULTSYNC_CAPABILITIES_OFF``."""


def _off() -> frozenset[str]:
    names = {n.strip().replace("-", "_") for n in os.environ.get(OFF_ENV, "").split(",") if n.strip()}
    unknown = names - set(NAMES)
    if unknown:
        raise ConfigError(f"{OFF_ENV}: unknown capability {', '.join(sorted(unknown))} (known: {', '.join(NAMES)})")
    return frozenset(names)


def _has_dir_fd() -> bool:
    calls = (os.open, os.stat, os.mkdir, os.unlink, os.rename, os.link)
    return all(c in os.supports_dir_fd for c in calls) and os.scandir in os.supports_fd and hasattr(os, "O_DIRECTORY")


def _lock_kind(off: frozenset[str]) -> str:
    if "fcntl" not in off:
        try:
            import fcntl  # noqa: F401
        except ImportError:
            pass
        else:
            return "fcntl"
    if "msvcrt" not in off:
        try:
            import msvcrt  # noqa: F401
        except ImportError:
            pass
        else:
            return "msvcrt"
    return "pidfile"


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except (OSError, TypeError):  # Windows: no C library by that name (and CDLL(None) is a TypeError there)
        return None


def _exchange_kind() -> str | None:
    libc = _libc()
    for name in ("renameat2", "renameatx_np"):
        if libc is not None and hasattr(libc, name):
            return name
    return None


_current: Capabilities | None = None


def current() -> Capabilities:
    """The capabilities of this process (detected on first use, then kept)."""
    global _current
    if _current is None:
        off = _off()
        _current = Capabilities(
            dir_fd=_has_dir_fd() and "dir_fd" not in off,
            no_follow=0 if "no_follow" in off else getattr(os, "O_NOFOLLOW", 0),
            o_directory=0 if "o_directory" in off else getattr(os, "O_DIRECTORY", 0),
            exchange=None if "exchange" in off else _exchange_kind(),
            lock=_lock_kind(off),
            case_insensitive=os.environ.get(CASE_ENV, "") not in ("", "0"),
            off=off,
        )
    return _current


def reset() -> None:
    """Detect again on next use (tests change the environment between profiles)."""
    global _current
    _current = None
    case_folds.cache_clear()


# ------------------------------------------------------------------ the calls behind the capabilities

RENAME_EXCHANGE = 2
"""``renameat2`` flag: swap two names atomically (Linux 3.15+, most local file systems)."""
RENAME_SWAP = 2
"""``renameatx_np`` flag on macOS 10.12+ (APFS and HFS+)."""
AT_FDCWD = -2 if hasattr(os, "O_SYMLINK") else -100  # macOS defines O_SYMLINK and AT_FDCWD -2


def exchange(dir_fd: int | None, a: str, b: str) -> bool:
    """Swap the names ``a`` and ``b`` (in ``dir_fd``, or paths) atomically; False where the system cannot."""
    kind = current().exchange
    libc = _libc()
    if kind is None or libc is None:
        return False
    call = getattr(libc, kind)
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fd = AT_FDCWD if dir_fd is None else dir_fd
    if call(fd, os.fsencode(a), fd, os.fsencode(b), RENAME_EXCHANGE if kind == "renameat2" else RENAME_SWAP) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), b)


def is_link(st: os.stat_result) -> bool:
    """A symlink, or a Windows reparse point that names another place (junction, mount point)."""
    if stat.S_ISLNK(st.st_mode):
        return True
    attributes = getattr(st, "st_file_attributes", 0) or 0
    return bool(attributes & FILE_ATTRIBUTE_REPARSE_POINT) and bool(
        (getattr(st, "st_reparse_tag", 0) or 0) & NAME_SURROGATE
    )


def same_file(a: os.stat_result, b: os.stat_result) -> bool:
    """The same file: device and inode (on Windows, volume serial and file index) are equal."""
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def network_root(path: str, flavor: object = os.path) -> str | None:
    """Why a vault folder path is refused by default (a Windows network path), or None.

    ``\\\\host\\share`` and ``\\\\?\\UNC\\host\\share`` make Windows connect to the host, sending the
    user's credentials over SMB, just by being touched.
    """
    if flavor is not ntpath:
        return None
    drive = ntpath.splitdrive(path)[0]
    unc = drive.startswith("\\\\") or drive.startswith("//")
    if drive[:4] in ("\\\\?\\", "\\\\.\\", "//?/", "//./"):
        unc = drive[4:8].upper() == "UNC\\" or drive[4:8].upper() == "UNC/"
    if not unc:
        return None
    return (
        f"{path} is a network (UNC) path: Windows sends your credentials to that host when it is "
        "touched; map it to a drive letter or set VAULTSYNC_ALLOW_NETWORK=1"
    )


def long_path(path: str, flavor: object = os.path) -> str:
    """An absolute Windows path in its ``\\\\?\\`` form, exempt from the 260-character limit (as is elsewhere)."""
    if flavor is not ntpath or path.startswith("\\\\?\\"):
        return path
    full = ntpath.abspath(path)
    if full.startswith("\\\\"):
        return "\\\\?\\UNC\\" + full[2:]
    return "\\\\?\\" + full


@lru_cache(maxsize=64)
def case_folds(root: str) -> bool:
    """Whether the file system holding the folder ``root`` matches names ignoring case (APFS, NTFS, exFAT
    by default): the folder's own name, or one above it, is found with its case swapped."""
    if current().case_insensitive:
        return True
    path = os.path.abspath(root)
    while True:
        head, tail = os.path.split(path)
        if tail != tail.swapcase():
            try:
                return same_file(os.lstat(path), os.lstat(os.path.join(head, tail.swapcase())))
            except OSError:
                return False
        if not tail or head == path:
            return False
        path = head


def inotify_limit() -> int | None:
    """The smallest inotify watch limit that applies to this process (Linux), else None."""
    limits = []
    for name in ("/proc/sys/fs/inotify/max_user_watches", "/proc/sys/user/max_inotify_watches"):
        try:
            with open(name, encoding="ascii") as handle:
                limits.append(int(handle.read().strip()))
        except (OSError, ValueError):
            continue
    return min(limits) if limits else None


__all__ = [
    "Capabilities",
    "case_folds",
    "current",
    "exchange",
    "inotify_limit",
    "is_link",
    "long_path",
    "network_root",
    "reset",
    "same_file",
]

"""The vault folder opened without following symlinks: every read of a note and every write into it.

A note is a regular file inside the vault folder, reached through real folders only. Each path is
walked one component at a time from a descriptor of the vault folder (``openat`` with
``O_NOFOLLOW``), so neither a committed symlink (``cfg.md -> .git/config``), nor a folder alias
(``docs -> ../..``), nor a folder swapped for a symlink while we work can lead outside it: the
kernel refuses the symlink at the component where it is met. What is opened is checked again with
``fstat``: a regular file (or folder) on the vault's own device.

Names are matched as ``paths.disk_name`` says: a part stored in NFD on disk (as macOS writes it) is
found under its NFC name, so a write never creates a twin file.

Writes go through a temp file in the same folder (a descriptor, not a path): ``create`` links it
to the new name (``link`` never replaces anything, not even a dangling symlink), ``replace``
renames it over the note after checking that the note is still the file that was read.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .errors import NoteChanged, NotANote, PathError
from .paths import disk_name

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True, slots=True)
class Identity:
    """What a note file was when it was read: a later change to it shows in one of these."""

    inode: int
    mtime_ns: int
    size: int
    ctime_ns: int


def identity(st: os.stat_result) -> Identity:
    return Identity(st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns)


def _why(dir_fd: int, name: str, rel: str) -> str:
    """Why ``name`` in ``dir_fd`` could not be opened as a folder or note (it exists)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return f"{rel} cannot be opened"
    if stat.S_ISLNK(st.st_mode):
        return f"{rel} is a symlink; vaultsync reads and writes only real files and folders inside the vault"
    if stat.S_ISREG(st.st_mode):
        return f"{rel} is a file, not a folder"
    return f"{rel} is not a regular file or folder"


@contextlib.contextmanager
def folder(root: str | os.PathLike[str], parts: list[str], *, create: bool = False) -> Iterator[int]:
    """A descriptor of the vault folder ``parts`` (NFC names), walked without following symlinks.

    FileNotFoundError when a part is missing (and ``create`` is false); NotANote when a part is a
    symlink, a file or on another device.
    """
    fd = os.open(root, _DIR & ~os.O_NOFOLLOW)  # the vault folder itself was resolved when the vault was opened
    try:
        device = os.fstat(fd).st_dev
        walked: list[str] = []
        for part in parts:
            walked.append(part)
            name = disk_name(fd, part)
            try:
                child = os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:  # made meanwhile, or a dangling symlink: opening says which
                    pass
                try:
                    child = os.open(name, _DIR, dir_fd=fd)
                except OSError as exc:
                    raise NotANote(_why(fd, name, "/".join(walked)) if exc.errno != errno.ENOENT
                                   else f"{'/'.join(walked)} vanished while it was made") from None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise NotANote(_why(fd, name, "/".join(walked))) from None
                raise
            os.close(fd)
            fd = child
            if os.fstat(fd).st_dev != device:
                raise NotANote(f"{'/'.join(walked)} is on another file system (a mount inside the vault)")
        yield fd
    finally:
        os.close(fd)


def _open_file(dir_fd: int, name: str, rel: str, device: int) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(name, _FILE | os.O_NONBLOCK, dir_fd=dir_fd)  # O_NONBLOCK: a FIFO never blocks the open
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise NotANote(_why(dir_fd, name, rel)) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_dev != device:
        os.close(fd)
        raise NotANote(f"{rel} is not a regular file in the vault")
    return fd, st


def stat_note(root: str | os.PathLike[str], rel: str) -> os.stat_result:
    """``fstat`` of the note file ``rel`` (FileNotFoundError, NotANote, or OSError as raised)."""
    *parts, last = rel.split("/")
    with folder(root, parts) as dir_fd:
        fd, st = _open_file(dir_fd, disk_name(dir_fd, last), rel, os.fstat(dir_fd).st_dev)
        os.close(fd)
    return st


def read_note(root: str | os.PathLike[str], rel: str, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the note file ``rel`` (at most ``limit`` + 1: more means it is too large) and its stat."""
    *parts, last = rel.split("/")
    with folder(root, parts) as dir_fd:
        fd, st = _open_file(dir_fd, disk_name(dir_fd, last), rel, os.fstat(dir_fd).st_dev)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(min(st.st_size, limit) + 1), st


def kind(root: str | os.PathLike[str], rel: str) -> str | None:
    """"folder" or "file" for a real folder or regular file at ``rel`` (no symlink on the way), else None."""
    *parts, last = rel.split("/")
    try:
        with folder(root, parts) as dir_fd:
            st = os.stat(disk_name(dir_fd, last), dir_fd=dir_fd, follow_symlinks=False)
            if st.st_dev != os.fstat(dir_fd).st_dev:
                return None
    except (OSError, NotANote):
        return None
    return "folder" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else None


def _temp(dir_fd: int, data: bytes, mode: int | None) -> str:
    """A new temp file holding ``data`` in ``dir_fd`` (synced); its name. ``mode`` None: the umask decides."""
    for _ in range(100):
        name = f".vaultsync-{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(name, _NEW, 0o666, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 collisions of 48 random bits
        raise PathError("cannot make a temp file in the vault folder")
    try:
        if mode is not None:
            os.fchmod(fd, stat.S_IMODE(mode))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink(dir_fd, name)
        raise
    os.close(fd)
    return name


def _unlink(dir_fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)


def create(root: str | os.PathLike[str], rel: str, data: bytes) -> None:
    """Create the note ``rel`` holding ``data``, making its folders; FileExistsError if anything has that name."""
    *parts, last = rel.split("/")
    with folder(root, parts, create=True) as dir_fd:
        name = disk_name(dir_fd, last)
        if _exists(dir_fd, name):
            raise FileExistsError(errno.EEXIST, "exists", rel)
        tmp = _temp(dir_fd, data, None)
        try:
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)  # EEXIST if taken
        except OSError as exc:  # no hard links here (some FUSE and network file systems)
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS):
                raise
            if _exists(dir_fd, name):
                raise FileExistsError(errno.EEXIST, "exists", rel) from None
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        finally:
            _unlink(dir_fd, tmp)
        os.fsync(dir_fd)


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


RENAME_EXCHANGE = 2
"""``renameat2`` flag: swap two names atomically (Linux 3.15+, most local file systems)."""

try:
    _renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
except (AttributeError, OSError):  # not glibc / not Linux: a plain rename, checked just before
    _renameat2 = None


def _exchange(dir_fd: int, a: str, b: str) -> bool:
    """Swap the names ``a`` and ``b`` in ``dir_fd`` atomically; False where the system cannot."""
    if _renameat2 is None:
        return False
    if _renameat2(dir_fd, os.fsencode(a), dir_fd, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), b)


def edit(root: str | os.PathLike[str], rel: str, limit: int, change: Callable[[bytes], bytes]) -> bytes:
    """Read the note ``rel``, write ``change(old_bytes)`` in its place keeping its mode, and return
    the new bytes. NoteChanged when another writer touched the note meanwhile (nothing is written then).
    """
    *parts, last = rel.split("/")
    with folder(root, parts) as dir_fd:
        device = os.fstat(dir_fd).st_dev
        name = disk_name(dir_fd, last)
        fd, st = _open_file(dir_fd, name, rel, device)
        with os.fdopen(fd, "rb") as handle:
            old = handle.read(min(st.st_size, limit) + 1)
        before = identity(st)
        new = change(old)
        tmp = _temp(dir_fd, new, st.st_mode)
        try:
            fd, now = _open_file(dir_fd, name, rel, device)  # the note as it is just before replacing it
            with os.fdopen(fd, "rb") as handle:
                current = handle.read(min(now.st_size, limit) + 1)
            if identity(now) != before or current != old:
                raise NoteChanged(rel)
            if _exchange(dir_fd, tmp, name):
                # the note is ours now and what it replaced sits at ``tmp``: if another writer got in
                # between the check and the swap, swap back (their version returns) and try again
                try:
                    fd, gone = _open_file(dir_fd, tmp, rel, device)
                except NotANote:  # swapped for a link or a folder meanwhile: put it back, refuse next try
                    gone, replaced = None, b""
                else:
                    with os.fdopen(fd, "rb") as handle:
                        replaced = handle.read(min(gone.st_size, limit) + 1)
                # (its ctime moved with the swap itself, so the inode, mtime, size and bytes decide)
                if (gone is None or (gone.st_ino, gone.st_mtime_ns, gone.st_size)
                        != (before.inode, before.mtime_ns, before.size) or replaced != old):
                    _exchange(dir_fd, tmp, name)
                    raise NoteChanged(rel)
            else:
                os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        finally:
            _unlink(dir_fd, tmp)
        os.fsync(dir_fd)
    return new

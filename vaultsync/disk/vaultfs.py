"""The vault folder opened without following symlinks: every read of a note and every write into it.

A note is a regular file inside the vault folder, reached through real folders only. Where the OS
has directory descriptors (``capabilities.current().dir_fd``: Linux, macOS), each path is walked
one component at a time from a descriptor of the vault folder (``openat`` with ``O_NOFOLLOW``), so
neither a committed symlink (``cfg.md -> .git/config``), nor a folder alias (``docs -> ../..``),
nor a folder swapped for a symlink while we work can lead outside it: the kernel refuses the
symlink at the component where it is met. What is opened is checked again with ``fstat``: a
regular file (or folder) on the vault's own device.

Without directory descriptors (Windows) each component is checked with ``lstat`` (symlinks and
junctions refused: ``capabilities.is_link``), and after the open the folders on the way are checked
again and the opened file's (st_dev, st_ino) must be the ``lstat``'s. What remains: a folder swapped
for a symlink and back between those checks, more than once, within microseconds, can make a read
return a file outside the vault; a temp file is created empty and written only after the check, so
a write can leave at most an empty ``.vaultsync-*.tmp`` where such a symlink pointed. Without
``O_NOFOLLOW`` the same ``lstat`` / identity check guards each open.

Names are matched as ``disk_name`` says: a part stored in NFD on disk (as macOS writes it) is
found under its NFC name, so a write never creates a twin file. On a file system that folds case
(``capabilities.case_folds``) ``stat_note`` and ``kind`` see a note only under its name's exact
case, so ``note.md`` renamed to ``Note.md`` is one rename, never two notes.

``create`` links a temp file in the same folder to the new name (``link`` never replaces anything,
not even a dangling symlink). ``edit`` (a whole-note rewrite) swaps a temp file with the note
(``capabilities.exchange``) after checking that the note is still the file that was read; where no
exchange exists, a rename (retried while Windows reports a sharing violation) replaces it. An
append writes into the note itself (``appendfs``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import ConfigError, NotANote, NoteChanged, PathError
from . import capabilities
from .capabilities import is_link, same_file
from .paths import nfc

_CLOEXEC = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Identity:
    """What a note file was when it was read: a later change to it shows in one of these."""

    inode: int
    mtime_ns: int
    size: int
    ctime_ns: int


def identity(st: os.stat_result) -> Identity:
    return Identity(st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns)


@dataclass(slots=True)
class Folder:
    """A real folder of the vault: open as a descriptor (``fd``), or, without directory descriptors,
    its path and the ``lstat`` of every folder on the way, checked again after each open."""

    fd: int | None
    path: str
    device: int
    folds: bool
    """Its file system matches names ignoring case."""
    trail: list[tuple[str, os.stat_result]] = field(default_factory=list)

    def at(self, name: str) -> str:
        """``name`` as the calls below take it: itself with ``dir_fd=self.fd``, else joined to the path."""
        return name if self.fd is not None else os.path.join(self.path, name)

    def lstat(self, name: str) -> os.stat_result:
        return os.stat(self.at(name), dir_fd=self.fd, follow_symlinks=False)

    def recheck(self, rel: str) -> None:
        """Without descriptors: every folder on the way is still the one walked (NotANote if not)."""
        for path, seen in self.trail:
            try:
                now = os.lstat(path)
            except OSError:
                now = None
            if now is None or is_link(now) or not same_file(now, seen):
                raise NotANote(f"{rel}: a folder on the way was replaced while it was used (a symlink swapped in?)")


ALLOW_NETWORK_ENV = "VAULTSYNC_ALLOW_NETWORK"


def check_root(root: str) -> None:
    """Refuse a Windows network (UNC) vault folder unless ``VAULTSYNC_ALLOW_NETWORK=1``: ConfigError saying why."""
    reason = capabilities.network_root(root)
    if reason is not None and os.environ.get(ALLOW_NETWORK_ENV, "") in ("", "0"):
        raise ConfigError(reason)


def _why(where: Folder, name: str, rel: str) -> str:
    """Why ``name`` in ``where`` could not be opened as a folder or note (it exists)."""
    try:
        st = where.lstat(name)
    except OSError:
        return f"{rel} cannot be opened"
    if is_link(st):
        return f"{rel} is a symlink; vaultsync reads and writes only real files and folders inside the vault"
    if stat.S_ISREG(st.st_mode):
        return f"{rel} is a file, not a folder"
    return f"{rel} is not a regular file or folder"


def disk_name(where: Folder, part: str, *, exact: bool = False) -> str:
    """The name in ``where`` of the NFC path part ``part``: itself when it exists, else an entry whose
    NFC form it is (a name macOS wrote in NFD), else ``part`` (a new name). Where names fold case,
    ``exact`` asks for the entry as it is spelled on disk (then compared by the caller)."""
    simulated = capabilities.current().case_insensitive
    if part.isascii() and not simulated and not (exact and where.folds):
        return part
    try:
        where.lstat(part)
        if not (exact and where.folds):
            return part
    except FileNotFoundError:
        pass
    with os.scandir(where.fd if where.fd is not None else where.path) as entries:
        names = [e.name for e in entries]
    key = nfc(part)
    found = next((n for n in names if nfc(n) == key), None)
    if found is None and where.folds:
        found = next((n for n in names if nfc(n).casefold() == key.casefold()), None)
    return found if found is not None else part


def _open_dir(where: Folder, name: str, rel: str) -> tuple[int | None, os.stat_result]:
    """Open the sub-folder ``name`` of ``where`` (its descriptor, or None without descriptors) and its stat."""
    caps = capabilities.current()
    before = None
    if where.fd is None or not caps.no_follow:
        before = where.lstat(name)  # FileNotFoundError propagates
        if is_link(before) or not stat.S_ISDIR(before.st_mode):
            raise NotANote(_why(where, name, rel))
        if where.fd is None:
            return None, before
    flags = os.O_RDONLY | caps.o_directory | caps.no_follow | _CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=where.fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise NotANote(_why(where, name, rel)) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode) or (before is not None and not same_file(before, st)):
        os.close(fd)
        raise NotANote(f"{rel} is not a folder (or was replaced while it was opened)")
    return fd, st


@contextlib.contextmanager
def folder(
    root: str | os.PathLike[str], parts: list[str], *, create: bool = False, exact: bool = False
) -> Iterator[Folder]:
    """The vault folder ``parts`` (NFC names), walked without following symlinks.

    FileNotFoundError when a part is missing (and ``create`` is false; with ``exact``, also when it
    exists only under another case); NotANote when a part is a symlink, a file or on another device.
    """
    caps = capabilities.current()
    top = capabilities.long_path(os.fspath(root))
    folds = capabilities.case_folds(top)
    fd: int | None
    if caps.dir_fd:  # the vault folder itself was resolved when the vault was opened
        fd = os.open(top, os.O_RDONLY | caps.o_directory | _CLOEXEC)
        where = Folder(fd, top, os.fstat(fd).st_dev, folds)
    else:
        st = os.stat(top)
        where = Folder(None, top, st.st_dev, folds, [(top, st)])
    try:
        walked: list[str] = []
        for part in parts:
            walked.append(part)
            name = disk_name(where, part, exact=exact)
            if exact and nfc(name) != nfc(part):
                raise FileNotFoundError(errno.ENOENT, "only under another case", "/".join(walked))
            try:
                fd, st = _open_dir(where, name, "/".join(walked))
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(where.at(name), 0o777, dir_fd=where.fd)
                except FileExistsError:  # made meanwhile, or a dangling symlink: opening says which
                    pass
                try:
                    fd, st = _open_dir(where, name, "/".join(walked))
                except FileNotFoundError:
                    raise NotANote(f"{'/'.join(walked)} vanished while it was made") from None
            if st.st_dev != where.device:
                if fd is not None:
                    os.close(fd)
                raise NotANote(f"{'/'.join(walked)} is on another file system (a mount inside the vault)")
            path = os.path.join(where.path, name)
            if where.fd is not None:
                os.close(where.fd)
            where = Folder(fd, path, where.device, folds, [*where.trail, (path, st)] if fd is None else [])
        yield where
    finally:
        if where.fd is not None:
            os.close(where.fd)


def open_file(where: Folder, name: str, rel: str, mode: int = os.O_RDONLY) -> tuple[int, os.stat_result]:
    """Open the note file ``name`` (as on disk) in ``where`` without following a symlink: a regular file on
    the vault's device, else NotANote. ``mode`` is O_RDONLY, or O_RDWR | O_APPEND for an append (never
    O_CREAT); an open for writing is tried again while Windows reports a sharing violation."""
    caps = capabilities.current()
    before = None
    if where.fd is None or not caps.no_follow:  # the open itself cannot refuse a symlink: lstat, then compare
        before = where.lstat(name)
        if is_link(before):
            raise NotANote(_why(where, name, rel))
        if not stat.S_ISREG(before.st_mode):
            raise NotANote(f"{rel} is not a regular file in the vault")
    flags = mode | caps.no_follow | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC  # a FIFO never blocks the open
    try:
        fd = (
            os.open(where.at(name), flags, dir_fd=where.fd)
            if mode == os.O_RDONLY
            else held_retry(lambda: os.open(where.at(name), flags, dir_fd=where.fd))
        )
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise NotANote(_why(where, name, rel)) from None
        raise
    st = os.fstat(fd)
    try:
        if before is not None and not same_file(before, st):
            raise NotANote(f"{rel} was replaced while it was opened (a symlink swapped in?)")
        if where.fd is None:
            where.recheck(rel)
        if not stat.S_ISREG(st.st_mode) or st.st_dev != where.device:
            raise NotANote(f"{rel} is not a regular file in the vault")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def stat_note(root: str | os.PathLike[str], rel: str) -> os.stat_result:
    """``fstat`` of the note file ``rel`` (FileNotFoundError, NotANote, or OSError as raised).

    Where names fold case, a note found only under another case is not there (FileNotFoundError).
    """
    *parts, last = rel.split("/")
    with folder(root, parts, exact=True) as where:
        name = disk_name(where, last, exact=True)
        if nfc(name) != nfc(last):
            raise FileNotFoundError(errno.ENOENT, "only under another case", rel)
        fd, st = open_file(where, name, rel)
        os.close(fd)
    return st


def read_note(root: str | os.PathLike[str], rel: str, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the note file ``rel`` (at most ``limit`` + 1: more means it is too large) and its stat."""
    *parts, last = rel.split("/")
    with folder(root, parts) as where:
        fd, st = open_file(where, disk_name(where, last), rel)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(min(st.st_size, limit) + 1), st


def kind(root: str | os.PathLike[str], rel: str) -> str | None:
    """ "folder" or "file" for a real folder or regular file at ``rel`` (no symlink on the way, its
    name's exact case where names fold case), else None."""
    *parts, last = rel.split("/")
    try:
        with folder(root, parts, exact=True) as where:
            name = disk_name(where, last, exact=True)
            if nfc(name) != nfc(last):
                return None
            st = where.lstat(name)
            if st.st_dev != where.device or is_link(st):
                return None
    except (OSError, NotANote):
        return None
    return "folder" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else None


def _temp(where: Folder, data: bytes, mode: int | None) -> str:
    """A new temp file holding ``data`` in ``where`` (synced); its name. ``mode`` None: the umask decides."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | capabilities.current().no_follow | _CLOEXEC
    for _ in range(100):
        name = f".vaultsync-{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(where.at(name), flags, 0o666, dir_fd=where.fd)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 collisions of 48 random bits
        raise PathError("cannot make a temp file in the vault folder")
    try:
        if where.fd is None:  # created empty; written only once it is known to be in the vault
            where.recheck(name)
            if not same_file(where.lstat(name), os.fstat(fd)):
                raise NotANote("the vault folder was replaced while a temp file was made in it")
        if mode is not None and hasattr(os, "fchmod"):
            os.fchmod(fd, stat.S_IMODE(mode))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink(where, name)
        raise
    os.close(fd)
    return name


def _unlink(where: Folder, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(where.at(name), dir_fd=where.fd)


def remove_empty_folder(root: str | os.PathLike[str], rel: str) -> bool:
    """Remove the vault folder ``rel`` if it is empty: never the vault folder itself, never a symlink or a
    folder reached through one, never one on another device; a folder holding anything is kept. Whether it
    was removed."""
    parts = rel.split("/")
    if not rel or any(part in ("", ".", "..") for part in parts):
        return False
    *up, last = parts
    try:
        with folder(root, up) as where:
            name = disk_name(where, last)
            st = where.lstat(name)
            if is_link(st) or not stat.S_ISDIR(st.st_mode) or st.st_dev != where.device:
                return False
            where.recheck(rel)
            os.rmdir(where.at(name), dir_fd=where.fd)  # removes an empty folder only, and never follows a link
    except (OSError, PathError):
        return False
    return True


def _sync(where: Folder) -> None:
    """Make the folder's new names durable (without a descriptor: not possible on Windows; skipped)."""
    if where.fd is not None:
        os.fsync(where.fd)


W = TypeVar("W", bound=Callable[..., object])


def write_door(write: W) -> W:
    """A write into the vault (``write(root, rel, ...)``) whose path the file system finds too long (a name past
    its limit, which ``writable_note_path`` checks for the common one) fails as a PathError naming the note,
    never as a bare OSError."""

    @functools.wraps(write)
    def checked(root: str | os.PathLike[str], rel: str, *args: Any, **kwargs: Any) -> object:
        try:
            return write(root, rel, *args, **kwargs)
        except OSError as exc:
            if exc.errno != errno.ENAMETOOLONG:
                raise
            shown = rel if len(rel) <= 80 else rel[:80] + "…"
            raise PathError(f"{shown!r}: a name in this path is longer than the file system allows") from None

    return checked  # type: ignore[return-value]  # functools.wraps keeps the signature of W


@write_door
def create(root: str | os.PathLike[str], rel: str, data: bytes) -> None:
    """Create the note ``rel`` holding ``data``, making its folders; FileExistsError if anything has that name."""
    *parts, last = rel.split("/")
    with folder(root, parts, create=True) as where:
        name = disk_name(where, last)
        if _exists(where, name):
            raise FileExistsError(errno.EEXIST, "exists", rel)
        tmp = _temp(where, data, None)
        no_follow = {"follow_symlinks": False} if os.link in os.supports_follow_symlinks else {}
        try:  # EEXIST if taken
            os.link(where.at(tmp), where.at(name), src_dir_fd=where.fd, dst_dir_fd=where.fd, **no_follow)
        except OSError as exc:  # no hard links here (some FUSE and network file systems)
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS):
                raise
            if _exists(where, name):
                raise FileExistsError(errno.EEXIST, "exists", rel) from None
            os.rename(where.at(tmp), where.at(name), src_dir_fd=where.fd, dst_dir_fd=where.fd)
        finally:
            _unlink(where, tmp)
        _sync(where)


def _exists(where: Folder, name: str) -> bool:
    try:
        where.lstat(name)
    except FileNotFoundError:
        return False
    return True


def _exchange(where: Folder, a: str, b: str) -> bool:
    """Swap the names ``a`` and ``b`` in ``where`` atomically; False where the system cannot."""
    return capabilities.exchange(where.fd, where.at(a), where.at(b))


REPLACE_TRIES = 10
"""How often a replace is tried while Windows reports a sharing violation (an indexer, antivirus or
the editor holding the note open); about 2.5 s in all."""

SHARING_VIOLATIONS = (5, 32, 33)
"""Windows errors (access denied, sharing violation, lock violation) that go away when the other program lets go."""


def held_retry(call: Callable[[], T], sleep: Callable[[float], None] = time.sleep) -> T:
    """``call()``, tried again (bounded) while another program holds the file on Windows (a sharing violation)."""
    for attempt in range(REPLACE_TRIES):
        try:
            return call()
        except PermissionError as exc:
            if getattr(exc, "winerror", None) not in SHARING_VIOLATIONS or attempt == REPLACE_TRIES - 1:
                raise
            sleep(min(0.5, 0.02 * 2**attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def replace(
    src: str,
    dst: str,
    *,
    dir_fd: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rename: Callable[..., None] = os.replace,
) -> None:
    """``os.replace``, tried again (bounded) while another program holds the file open on Windows."""
    held_retry(lambda: rename(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd), sleep)


@write_door
def edit(root: str | os.PathLike[str], rel: str, limit: int, change: Callable[[bytes], bytes]) -> bytes:
    """Read the note ``rel``, write ``change(old_bytes)`` in its place keeping its mode, and return
    the new bytes. NoteChanged when another writer touched the note meanwhile (nothing is written then).

    For whole-note rewrites (``edit_note``, ``restore_note``); an append writes in place (``appendfs``).
    What remains: the note is a new file afterwards, so a program that opened the old one before the
    swap (an editor holding it open, a shell's ``>>``) and writes to it after the check of what was
    swapped out writes into a file that is then deleted: that write is lost. No check after the swap
    can close this while the old file is reachable through an open descriptor. A note with other
    hard links is split from them (the other names keep the old bytes).
    """
    *parts, last = rel.split("/")
    with folder(root, parts) as where:
        name = disk_name(where, last)
        fd, st = open_file(where, name, rel)
        with os.fdopen(fd, "rb") as handle:
            old = handle.read(min(st.st_size, limit) + 1)
        before = identity(st)
        new = change(old)
        tmp = _temp(where, new, st.st_mode)
        try:
            fd, now = open_file(where, name, rel)  # the note as it is just before replacing it
            with os.fdopen(fd, "rb") as handle:
                current = handle.read(min(now.st_size, limit) + 1)
            if identity(now) != before or current != old:
                raise NoteChanged(rel)
            if _exchange(where, tmp, name):
                # the note is ours now and what it replaced sits at ``tmp``: if another writer got in
                # between the check and the swap, swap back (their version returns) and try again
                gone: os.stat_result | None
                try:
                    fd, gone = open_file(where, tmp, rel)
                    with os.fdopen(fd, "rb") as handle:
                        replaced = handle.read(min(gone.st_size, limit) + 1)
                except NotANote:  # swapped for a link or a folder meanwhile: put it back, refuse next try
                    gone, replaced = None, b""
                # (its ctime moved with the swap itself, so the inode, mtime, size and bytes decide)
                if (
                    gone is None
                    or (gone.st_ino, gone.st_mtime_ns, gone.st_size) != (before.inode, before.mtime_ns, before.size)
                    or replaced != old
                ):
                    _exchange(where, tmp, name)
                    raise NoteChanged(rel)
            else:  # no exchange here: a writer between the check above and this rename loses its change
                replace(where.at(tmp), where.at(name), dir_fd=where.fd)
        finally:
            _unlink(where, tmp)
        _sync(where)
    return new

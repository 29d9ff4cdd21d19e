"""Appending to a note in place: whatever another program writes to the note is never lost.

An append adds bytes to the note file itself; it never replaces the file. A program that holds the
note open (an editor, a shell's ``>>``, a plugin) keeps writing into the note, before, during and
after the append, and nothing it writes goes to a file that is then deleted (a swap of a temp file
for the note cannot promise that: ``vaultfs.edit``). The note is reached as every write reaches it
(``vaultfs.folder`` and ``vaultfs.open_file``: no symlink followed, a regular file in the vault);
being the same file, it keeps its mode, owner and extended attributes, and every descriptor open
on it still writes into the note. A note that is not writable (mode 444) is refused by the open
(PermissionError), where a swap would have replaced it.

The steps, and what each promises:

1. Open the note once, ``O_RDWR | O_APPEND`` (never created), and read it; ``addition(old)``
   decides the bytes to add (and may refuse by raising: nothing is written).
2. Check again just before writing (``_unchanged``): the open file has the size, times and bytes
   read, and the note's name still leads to it. Else NoteChanged: nothing written, read again.
3. Write (``_write_at_end``): with ``O_APPEND`` the kernel moves to the end and writes in one step,
   so another appender is never overwritten; then ``fsync``.
4. Open the note again by its name (``_landed``): it must hold the added bytes where they landed.
   If not, another program saved over it right after, from a copy read before the append (a new
   file renamed over the note, or the note truncated and rewritten): that save wins, as saves do,
   and NoteChanged makes the caller append again to the note as saved. A save after this check
   is the other program's last word; the append has returned by then.

What remains:

- Another program appending in the microseconds between step 2 and step 3 puts its bytes before
  ours. Both are kept; the newline rule and ``addition``'s own checks (an expected revision) saw
  the bytes before it. It is logged.
- Another program truncating the note in that moment puts ours at the new end, and what it then
  writes at its own offset overwrites ours: step 4 notices and appends again (nothing of the other
  program's is lost), but if it wrote less than our text, the rest of ours stays after it.
- A short write (disk full) is continued by further writes, between which another appender may
  get in. If a write fails after some bytes, PathError says how many are at the end of the note;
  they are left there (a truncate could cut bytes another program wrote after them).
- A reader (the watcher) may see a prefix of the added bytes, then the rest: each write raises
  its own events, and the watcher reads the note again once they settle (its debounce).
- ``O_APPEND`` is atomic on local POSIX file systems; Windows emulates it (seek, then write) and
  some network file systems do too, so two appenders meeting in that step can overlap there.
- A note with other hard links is refused (PathError): an in-place append would change it under
  every name, perhaps outside the vault.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable

from ..errors import NotANote, NoteChanged, PathError
from .capabilities import same_file
from .vaultfs import Folder, disk_name, folder, identity, open_file, write_door

logger = logging.getLogger(__name__)


@write_door
def append(root: str | os.PathLike[str], rel: str, limit: int, addition: Callable[[bytes], bytes]) -> None:
    """Append ``addition(old_bytes)`` to the note file ``rel`` in place (reading at most ``limit`` + 1
    bytes of it). NoteChanged when another writer changed the note meanwhile: the caller tries again.
    """
    *parts, last = rel.split("/")
    with folder(root, parts) as where:
        name = disk_name(where, last)
        fd, st = open_file(where, name, rel, os.O_RDWR | os.O_APPEND)
        try:
            if st.st_nlink > 1:
                raise PathError(
                    f"{rel} has {st.st_nlink} names (hard links, perhaps outside the vault): an append "
                    "would change every one of them; vaultsync does not write to it"
                )
            old = _read_from(fd, 0, min(st.st_size, limit) + 1)
            data = addition(old)
            if not data:
                return
            _unchanged(where, name, rel, fd, st, old, limit)
            start = _write_at_end(fd, data, rel)
            os.fsync(fd)
            if start != len(old):
                logger.warning(
                    "%s changed size just before the append landed (another program wrote to it); "
                    "the appended text follows what it wrote",
                    rel,
                )
            _landed(where, name, rel, start, data)  # while ``fd`` is open, so its inode cannot be reused meanwhile
        finally:
            os.close(fd)


def _read_from(fd: int, offset: int, size: int) -> bytes:
    """Up to ``size`` bytes of ``fd`` from ``offset`` (fewer at the end of the file)."""
    os.lseek(fd, offset, os.SEEK_SET)
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.read(fd, size)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _unchanged(where: Folder, name: str, rel: str, fd: int, st: os.stat_result, old: bytes, limit: int) -> None:
    """NoteChanged unless the open note is still what was read (size, times, bytes) and still the note's name."""
    now = os.fstat(fd)
    try:
        named = where.lstat(name)
    except FileNotFoundError:
        named = None
    if (
        identity(now) != identity(st)
        or named is None
        or not same_file(named, st)
        or _read_from(fd, 0, min(now.st_size, limit) + 1) != old
    ):
        raise NoteChanged(rel)


def _write_at_end(fd: int, data: bytes, rel: str) -> int:
    """Write ``data`` through the ``O_APPEND`` descriptor; the offset its first byte landed at."""
    view, done, start = memoryview(data), 0, -1
    try:
        while done < len(data):
            wrote = os.write(fd, view[done:])
            if not wrote:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            if start < 0:
                start = os.lseek(fd, 0, os.SEEK_CUR) - wrote
            done += wrote
    except OSError as exc:
        if not done:
            raise
        raise PathError(
            f"cannot append to {rel}: {exc.strerror}; the first {done} of its {len(data)} bytes "
            "were written at the end of the note and are left there"
        ) from None
    return start


def _landed(where: Folder, name: str, rel: str, start: int, data: bytes) -> None:
    """NoteChanged unless the note, opened again by its name, holds ``data`` at ``start``."""
    try:
        fd, _ = open_file(where, name, rel)
    except (FileNotFoundError, NotANote):  # gone, or no longer a note: the next try says which
        raise NoteChanged(rel) from None
    try:
        if _read_from(fd, start, len(data)) != data:
            logger.info("%s was saved over right after the append, without the appended text", rel)
            raise NoteChanged(rel)
    finally:
        os.close(fd)

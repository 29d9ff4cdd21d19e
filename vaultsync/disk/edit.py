"""Opt-in writes into the vault folder: create a note (atomically) or append to one (in place), never outside the vault.

Every write goes through ``vaultfs``: no symlink is followed at any component, the file written is
a regular ``.md`` file inside the vault and outside dot-folders, and an append writes into the note
itself (``appendfs``: same file, so its mode, owner and every program's open descriptor stay
valid), never overwriting anything. An append that finds the note changed under it (an editor
saving at the same moment) reads it again; one whose text an editor's save dropped right after
(a copy of the note from before the append, saved over it) appends it again to the note as saved.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable

from ..errors import NotANote, NoteChanged, NoteNotFound, PathError
from . import appendfs, vaultfs
from .folder import MAX_FILE_BYTES
from .paths import writable_note_path

logger = logging.getLogger(__name__)

MAX_WRITE_CHARS = 1_000_000
"""The most text one create or append may write."""

APPEND_TRIES = 20
"""How many times an append reads the note again when another writer changed it meanwhile."""


def create_file(root: str, path: str, content: str) -> str:
    """Create a new note file; refuses to overwrite anything. Returns the vault-relative NFC path."""
    _check_size(content)
    rel = writable_note_path(path)
    try:
        vaultfs.create(root, rel, content.encode("utf-8"))
    except FileExistsError:
        raise PathError(f"{rel} already exists; use append_to_note to add to it, or pick a new path") from None
    except NotANote:
        raise
    except OSError as exc:
        raise PathError(f"cannot create {rel}: {exc.strerror}") from None
    logger.info("created %s (%d chars)", rel, len(content))
    return rel


def append_file(root: str, path: str, text: str, check: Callable[[bytes], None] | None = None) -> str:
    """Append ``text`` to an existing note file (a newline is put before it if the note lacks one);
    ``check`` sees the bytes the text is appended to and may refuse by raising (nothing is written).

    When this returns, the note on disk held the text where it was written (an editor's save after
    that is the editor's: the last save wins). A note with other hard links is refused (PathError).
    """
    _check_size(text)
    rel = writable_note_path(path)
    added = text.encode("utf-8")

    def appended(old: bytes) -> bytes:
        """What is added after ``old``."""
        if check is not None:
            check(old)
        if len(old) + len(added) + 1 > MAX_FILE_BYTES:
            raise PathError(f"{rel} would grow past {MAX_FILE_BYTES // 2**20} MB; start a new note instead")
        return (b"" if not old or old.endswith(b"\n") else b"\n") + added

    for attempt in range(1, APPEND_TRIES + 1):
        try:
            appendfs.append(root, rel, MAX_FILE_BYTES, appended)
        except NoteChanged:
            logger.info("%s changed while appending to it (try %d); reading it again", rel, attempt)
            continue
        except (FileNotFoundError, NotADirectoryError):
            raise NoteNotFound(f"{rel} does not exist in the vault folder; use create_note to make it") from None
        except NotANote:
            raise
        except OSError as exc:
            reason = "it is too large" if exc.errno == errno.EFBIG else exc.strerror
            raise PathError(f"cannot append to {rel}: {reason}") from None
        logger.info("appended %d chars to %s", len(text), rel)
        return rel
    raise PathError(f"{rel} kept changing while appending ({APPEND_TRIES} tries); nothing was written, try again")


def _check_size(text: str) -> None:
    if len(text) > MAX_WRITE_CHARS:
        raise PathError(f"the text is {len(text)} characters; at most {MAX_WRITE_CHARS} can be written at once")
    if "\x00" in text:
        raise PathError("the text contains NUL bytes; notes are plain UTF-8 text")

"""Opt-in writes into the vault folder: create or append to a note, atomically, never outside the vault."""

from __future__ import annotations

import logging
import os
import posixpath
import tempfile
from pathlib import Path

from .errors import NoteNotFound, PathError
from .folder import MAX_FILE_BYTES
from .paths import is_note_path, nfc

logger = logging.getLogger(__name__)

MAX_WRITE_CHARS = 1_000_000
"""The most text one create or append may write."""


def checked_path(root: Path, path: str) -> tuple[str, Path]:
    """The vault-relative NFC path and the real file path for a note to write.

    Refuses absolute paths, ``..``, dot-folders, names not ending in ``.md`` and anything that
    resolves outside the vault through a symlink.
    """
    raw = str(path)
    if "\x00" in raw:
        raise PathError("a note path cannot contain NUL bytes")
    rel = nfc(raw.replace("\\", "/").strip())
    if not rel or rel.startswith("/") or (len(rel) > 1 and rel[1] == ":"):
        raise PathError(f"{path!r} is absolute; give a vault-relative path like Folder/Note.md")
    if ".." in rel.split("/"):
        raise PathError(f"{path!r} contains '..'; give a path inside the vault like Folder/Note.md")
    rel = posixpath.normpath(rel)
    if not rel.endswith(".md"):
        raise PathError(f"{path!r} is not a Markdown note; the name must end in .md")
    if not is_note_path(rel):
        raise PathError(f"{path!r} is inside a hidden folder or has an empty part; choose a visible folder")
    real_root = root.resolve()
    target = (real_root / rel).resolve()
    if not target.is_relative_to(real_root):
        raise PathError(f"{path!r} leads outside the vault (through a symlink); choose another path")
    return rel, target


def atomic_write(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` through a temp file in the same folder and ``os.replace``."""
    fd, tmp = tempfile.mkstemp(prefix=".vaultsync-", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def create_file(root: Path, path: str, content: str) -> str:
    """Create a new note file; refuses to overwrite. Returns the vault-relative path."""
    _check_size(content)
    rel, target = checked_path(root, path)
    if target.exists() or target.is_symlink():
        raise PathError(f"{rel} already exists; use append_to_note to add to it, or pick a new path")
    real_root = root.resolve()
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    if not parent.resolve().is_relative_to(real_root):
        raise PathError(f"{path!r} leads outside the vault (through a symlink); choose another path")
    fd, tmp = tempfile.mkstemp(prefix=".vaultsync-", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, target)  # atomic, and never replaces an existing file
        except FileExistsError:
            raise PathError(f"{rel} already exists; use append_to_note to add to it, or pick a new path") from None
        except OSError:  # no hard links on this file system: check, then rename
            if target.exists():
                raise PathError(f"{rel} already exists; use append_to_note to add to it, or pick a new path") from None
            os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    logger.info("created %s (%d chars)", rel, len(content))
    return rel


def append_file(root: Path, path: str, text: str) -> str:
    """Append ``text`` to an existing note file (a newline is put before it if the note lacks one)."""
    _check_size(text)
    rel, target = checked_path(root, path)
    if not target.is_file():
        raise NoteNotFound(f"{rel} does not exist in the vault folder; use create_note to make it")
    old = target.read_bytes()
    if len(old) + len(text.encode("utf-8")) + 1 > MAX_FILE_BYTES:
        raise PathError(f"{rel} would grow past {MAX_FILE_BYTES // 2**20} MB; start a new note instead")
    sep = b"" if not old or old.endswith(b"\n") else b"\n"
    atomic_write(target, old + sep + text.encode("utf-8"))
    logger.info("appended %d chars to %s", len(text), rel)
    return rel


def _check_size(text: str) -> None:
    if len(text) > MAX_WRITE_CHARS:
        raise PathError(f"the text is {len(text)} characters; at most {MAX_WRITE_CHARS} can be written at once")
    if "\x00" in text:
        raise PathError("the text contains NUL bytes; notes are plain UTF-8 text")

"""The one place that decides what is a note path: dot-folders, ``.md``, NFC/NFD names, paths given by users.

Every door asks these functions: the scanner and the path observer (``folder``), the watcher's
event filter (``observe``), the git backfill (``gitimport``), the write tools (``edit``) and the
readers (``Vault``).
"""

from __future__ import annotations

import os
import posixpath
import unicodedata

from .errors import PathError

NOTE_SUFFIX = ".md"


def nfc(rel: str) -> str:
    """A path in Unicode NFC, the form the store keys notes by (macOS writes names in NFD)."""
    return unicodedata.normalize("NFC", rel)


def is_hidden(name: str) -> bool:
    """A dot-file or dot-folder (``.obsidian``, ``.trash``, ``.git``), skipped as Obsidian skips them."""
    return name.startswith(".")


def is_note_path(rel: str) -> bool:
    """A Markdown file that Obsidian would index: ``.md``, no dot-file or dot-folder on the way."""
    return rel.endswith(NOTE_SUFFIX) and not any(is_hidden(part) or part == "" for part in rel.split("/"))


def is_visible_folder(rel: str) -> bool:
    """A vault-relative folder the scanner enters (no dot-folder on the way; "" is the vault itself)."""
    return rel == "" or not any(is_hidden(part) or part == "" for part in rel.split("/"))


def relative(root: str | os.PathLike[str], fs_path: str) -> str:
    """The vault-relative POSIX path (as named on disk) of a file system path below ``root``."""
    return os.path.relpath(fs_path, root).replace(os.sep, "/")


def note_path(path: str) -> str:
    """A user-given note path as the vault-relative NFC path the store uses (PathError if it leaves the vault)."""
    if "\x00" in str(path):
        raise PathError("a note path cannot contain NUL bytes")
    rel = nfc(str(path).replace("\\", "/").strip())
    if not rel or rel.startswith("/") or (len(rel) > 1 and rel[1] == ":"):
        raise PathError(f"{path!r} is not a vault-relative note path (like Folder/Note.md)")
    normal = posixpath.normpath(rel)
    if normal == ".." or normal.startswith("../"):
        raise PathError(f"{path!r} points outside the vault")
    return normal


def inside(real_root: str, target: str) -> bool:
    """Whether the resolved path ``target`` lies within the resolved vault root."""
    return os.path.commonpath([real_root, target]) == real_root


def disk_path(root: str | os.PathLike[str], rel: str) -> str:
    """The file system path of an NFC vault-relative path, whatever normalization its names have on disk.

    A file named in NFD (as macOS writes them) is stored under its NFC path; on file systems that
    keep names as bytes the NFC path does not open it, so each missing part is matched by its NFC form.
    """
    direct = os.path.join(root, rel)
    if rel.isascii() or os.path.lexists(direct):
        return direct
    current = str(root)
    for part in rel.split("/"):
        candidate = os.path.join(current, part)
        if not os.path.lexists(candidate):
            try:
                with os.scandir(current) as entries:
                    candidate = next((e.path for e in entries if nfc(e.name) == part), candidate)
            except OSError:
                pass
        current = candidate
    return current


__all__ = ["NOTE_SUFFIX", "disk_path", "inside", "is_hidden", "is_note_path", "is_visible_folder", "nfc",
           "note_path", "relative"]

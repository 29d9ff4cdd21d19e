"""The one place that decides what is a note path: dot-folders, ``.md``, NFC/NFD names, paths given by users.

Every door asks these functions: the scanner and the path observer (``folder``), the watcher's
event filter (``events``), the git backfill (``gitimport``), the write tools (``edit``), the
readers (``Vault``) and link resolution (``links``); a changed path is normalised once
(``changed_path``), and a note named without its optional ``.md`` is looked up one way
(``note_candidates``). How a note path is opened on disk (never through a symlink) is ``vaultfs``.

Symlinks: a note is a regular file reached through real folders inside the vault. A symlinked
file or folder is not a note and is not entered, by import, the watcher and the write tools alike
(Obsidian itself ignores folder symlinks that point back into the vault and does not support file
symlinks; vaultsync also skips those pointing out of it, since a cloned vault's committed symlinks
can point anywhere, including into ``.git``).
"""

from __future__ import annotations

import os
import posixpath
import unicodedata

from ..errors import PathError
from ..printable import UNPRINTABLE

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


def note_candidates(name: str) -> tuple[str, ...]:
    """The note paths a name may mean, in the order to try them: a name ending in ``.md`` means itself;
    otherwise the ``.md`` is optional (``Folder/Note`` means ``Folder/Note.md``, as in Obsidian links)."""
    return (name,) if name.endswith(NOTE_SUFFIX) else (name, name + NOTE_SUFFIX)


def note_name(path: str) -> str:
    """A note path without its ``.md``: how Obsidian names the note (links, ``obsidian://`` URIs)."""
    return path[: -len(NOTE_SUFFIX)] if path.endswith(NOTE_SUFFIX) else path


def changed_path(raw: str) -> str | None:
    """A path given to a sync (a watcher event's, a write's, a caller's) as the vault-relative NFC path
    it names (None: the vault itself, or outside it).

    The one normalisation of a changed path: ``Vault.sync`` applies it once, where a batch's paths
    enter; the observer before it and ``folder.observe_paths`` after it take paths as they are.
    """
    rel = nfc(raw.replace(os.sep, "/").strip("/"))
    return None if rel in ("", ".") or rel.startswith("../") else rel


def relative(root: str | os.PathLike[str], fs_path: str) -> str:
    """The vault-relative POSIX path (as named on disk) of a file system path below ``root``."""
    return os.path.relpath(fs_path, root).replace(os.sep, "/")


def _given(path: str) -> str:
    """A user-given path with forward slashes, trimmed, in NFC (PathError on NUL bytes)."""
    if "\x00" in str(path):
        raise PathError("a note path cannot contain NUL bytes")
    return nfc(str(path).replace("\\", "/").strip())


def _absolute(rel: str) -> bool:
    """Empty, rooted (``/x``) or with a drive letter (``C:x``): not vault-relative."""
    return not rel or rel.startswith("/") or (len(rel) > 1 and rel[1] == ":")


def note_path(path: str) -> str:
    """A user-given note path as the vault-relative NFC path the store uses (PathError if it leaves the vault)."""
    rel = _given(path)
    if _absolute(rel):
        raise PathError(f"{path!r} is not a vault-relative note path (like Folder/Note.md)")
    normal = posixpath.normpath(rel)
    if normal == ".." or normal.startswith("../"):
        raise PathError(f"{path!r} points outside the vault")
    return normal


MAX_NAME_BYTES = 255
"""The longest file or folder name (UTF-8 bytes) a write creates: what Linux, macOS and Windows file systems allow."""


def writable_note_path(path: str, *, attachment: bool = False) -> str:
    """A user-given path for a write as the vault-relative NFC note path, or PathError saying why not.

    Absolute paths, ``..``, names not ending in ``.md`` (unless ``attachment``: a restored file), dot-files and
    dot-folders are refused (the write itself then refuses symlinks and non-regular files on the way: ``vaultfs``),
    and so are names holding a control character (``printable.UNPRINTABLE``: a newline, an escape sequence)
    or a part longer than ``MAX_NAME_BYTES``.
    """
    rel = _given(path)
    control = UNPRINTABLE.search(rel)
    if control is not None:
        raise PathError(
            f"{path!r} holds the control character {control.group()!r}; "
            "a note's name cannot hold control characters (newlines, escape sequences)"
        )
    for part in rel.split("/"):
        size = len(part.encode("utf-8", "surrogatepass"))
        if size > MAX_NAME_BYTES:
            raise PathError(
                f"{part[:40]!r}… is {size} bytes long; a file or folder name can be at most {MAX_NAME_BYTES} bytes"
            )
    if _absolute(rel):
        raise PathError(f"{path!r} is absolute; give a vault-relative path like Folder/Note.md")
    if ".." in rel.split("/"):
        raise PathError(f"{path!r} contains '..'; give a path inside the vault like Folder/Note.md")
    rel = posixpath.normpath(rel)
    if not rel.endswith(NOTE_SUFFIX) and not attachment:
        raise PathError(f"{path!r} is not a Markdown note; the name must end in .md")
    if not is_note_path(rel if not attachment else rel + NOTE_SUFFIX):
        raise PathError(f"{path!r} is inside a hidden folder or has an empty part; choose a visible folder")
    return rel


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


__all__ = [
    "MAX_NAME_BYTES",
    "NOTE_SUFFIX",
    "changed_path",
    "disk_path",
    "is_hidden",
    "is_note_path",
    "is_visible_folder",
    "nfc",
    "note_candidates",
    "note_name",
    "note_path",
    "relative",
    "writable_note_path",
]

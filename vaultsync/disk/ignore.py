"""Which files of a vault are recorded: every file Obsidian keeps, less what the vault's ignore file names.

Notes (``.md``) and attachments (images, PDFs, canvases, bases, audio, anything else) are recorded alike;
dot-files and dot-folders (``.obsidian/``, ``.trash/``, ``.git/``) never are (``paths.is_visible_folder``), nor
editors' and browsers' temporary files (``TEMPORARY``). A vault may name more in ``.vaultsyncignore`` at its
top, in gitignore syntax (the syntax people already write, matched by ``pathspec``'s ``GitIgnoreSpec`` with git's
own rules for ``**``, anchoring, folders and ``!`` negation). The file is itself a dot-file, so Obsidian does not
show it and vaultsync does not record it.

Every door asks ``Recorded`` for its vault folder: the scanner, the watcher's event filter, the git history
import (which reads the ignore file of the working tree, as the scanner does).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

import pathspec

from .paths import is_hidden

IGNORE_FILE = ".vaultsyncignore"
"""The vault's own ignore file, at its top (gitignore syntax)."""

TEMPORARY = (
    "*~",
    "*.swp",
    "*.swx",
    "*.swo",
    "4913",  # vim's write test
    "\\#*#",  # emacs's auto-saves
    "*.tmp",
    "*.part",
    "*.crdownload",
    "~$*",  # Office's lock files
    "Thumbs.db",
    "desktop.ini",
)
"""Names never recorded: files an editor, a browser or a file manager writes beside the vault's own (a Markdown-only
vault's swap and backup files stayed out before attachments were recorded, and stay out)."""


class Recorded:
    """Whether a vault-relative NFC path names a file vaultsync records (call it): visible, not temporary, not
    ignored by the vault's ``.vaultsyncignore``."""

    __slots__ = ("_spec",)

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self._spec = pathspec.GitIgnoreSpec.from_lines([*TEMPORARY, *patterns])

    def __call__(self, rel: str) -> bool:
        parts = rel.split("/")
        if any(part == "" or is_hidden(part) for part in parts):
            return False
        return not self._spec.match_file(rel)


_cache: dict[str, tuple[tuple[int, int] | None, Recorded]] = {}
_lock = threading.Lock()


def recorded(root: str | os.PathLike[str]) -> Recorded:
    """The rules of the vault folder ``root``: its ``.vaultsyncignore`` as it is now (read again when it changed)."""
    where = os.path.join(root, IGNORE_FILE)
    try:
        st = os.stat(where)
        stamp: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
    except OSError:
        stamp = None
    key = os.fspath(root)
    with _lock:
        cached = _cache.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
    patterns: list[str] = []
    if stamp is not None:
        try:
            with open(where, encoding="utf-8", errors="replace") as handle:
                patterns = handle.read().splitlines()
        except OSError:
            patterns = []
    rules = Recorded(patterns)
    with _lock:
        _cache[key] = (stamp, rules)
    return rules


def from_text(text: str | None) -> Recorded:
    """The rules an ignore file's text gives (a git commit's ``.vaultsyncignore``; None: none)."""
    return Recorded(text.splitlines() if text else ())


__all__ = ["IGNORE_FILE", "TEMPORARY", "Recorded", "from_text", "recorded"]

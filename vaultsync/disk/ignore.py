"""Which files of a vault are recorded: every file Obsidian keeps, less what the vault's ignore file names.

Notes (``.md``) and attachments (images, PDFs, canvases, bases, audio, anything else) are recorded alike;
dot-files and dot-folders (``.obsidian/``, ``.trash/``, ``.git/``) never are (``paths.is_visible_folder``), nor
editors' and browsers' temporary files (``temporary``). A vault may name more in ``.vaultsyncignore`` at its
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

TEMPORARY_SUFFIXES = ("~", ".swp", ".swx", ".swo", ".tmp", ".part", ".crdownload")
TEMPORARY_NAMES = frozenset({"4913", "Thumbs.db", "desktop.ini"})
"""File names never recorded: files an editor, a browser or a file manager writes beside the vault's own (vim's
swap files and write test ``4913``, backups ``name~``, downloads in progress, emacs's ``#name#`` auto-saves, Office's
``~$name`` locks). A Markdown-only vault's swap and backup files stayed out before attachments were recorded, and
stay out."""


def temporary(name: str) -> bool:
    """Whether a file name is a temporary one: ``TEMPORARY_SUFFIXES``, ``TEMPORARY_NAMES``, ``#name#``, ``~$name``."""
    return (
        name.endswith(TEMPORARY_SUFFIXES)
        or name in TEMPORARY_NAMES
        or name.startswith("~$")
        or (len(name) > 1 and name[0] == "#" and name[-1] == "#")
    )


class Recorded:
    """Whether a vault-relative NFC path names a file vaultsync records (call it): visible, not temporary, not
    ignored by the vault's ``.vaultsyncignore``."""

    __slots__ = ("_spec",)

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        lines = [line for line in patterns if line.strip() and not line.lstrip().startswith("#")]
        self._spec = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None

    def __call__(self, rel: str) -> bool:
        parts = rel.split("/")
        if any(part == "" or is_hidden(part) for part in parts) or temporary(parts[-1]):
            return False
        return self._spec is None or not self._spec.match_file(rel)

    def listed(self, rel: str, name: str) -> bool:
        """``self(rel)`` for a scan's entry ``name`` at ``rel``: the scan skips dot-places itself, so only the name
        and the ignore file are asked (the cost of a no-change scan is per file)."""
        return not temporary(name) and (self._spec is None or not self._spec.match_file(rel))


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


__all__ = ["IGNORE_FILE", "TEMPORARY_NAMES", "TEMPORARY_SUFFIXES", "Recorded", "recorded", "temporary"]

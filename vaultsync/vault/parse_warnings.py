"""A note's parse warnings (broken YAML frontmatter, an unreadable ``valid_from``) told once per text: a note only
renamed is not warned about again (its text was, when it was stored), nor a text met again in a later batch of the
same run (a watch session, the commits of a git import); a changed text that still has the problem is."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..disk.folder import FileProblem

MAX_TOLD = 100_000
"""Texts' warnings remembered at most (then forgotten all at once: a long session may repeat one, never grows)."""


class Told:
    """The warnings told so far in one run (a watcher's session, one command)."""

    def __init__(self) -> None:
        self._told: set[tuple[str, str]] = set()
        self._lock = threading.Lock()  # a watcher reports its own batches and its desk's from two threads

    def untold(self, warnings: Iterable[FileProblem]) -> list[FileProblem]:
        """The warnings to tell now: not a pure rename's, not one told already for the same text and reason (each
        remembered from now on); one without a text hash (an answer handed over from another process) always."""
        out = []
        with self._lock:
            for warning in warnings:
                if warning.content_hash is not None:
                    key = (warning.content_hash, warning.reason)
                    if key in self._told:
                        continue
                    if len(self._told) >= MAX_TOLD:
                        self._told.clear()
                    self._told.add(key)
                if not warning.renamed:
                    out.append(warning)
        return out

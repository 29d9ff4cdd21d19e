"""What each part of the page shows, as JSON: built from the public ``Vault`` API only.

``Explorer`` answers the page's questions (the timeline, the tree, a note, a diff, a search, the
changes between two moments) for one vault. Times go both ways as integer UTC microseconds (exact in
JavaScript numbers until the year 2255), or as any form ``Vault`` accepts. Listings are cached per
batch cutoff: every moment between two batches shows the same vault, so dragging across a quiet
stretch costs nothing, and a new batch (or a purge) empties the caches.
"""

from __future__ import annotations

import bisect
import posixpath
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import NoteNotFound, StoreError
from ..links import Resolver
from ..revisions import resolve_cutoff, revision_id, short_revision
from ..search_filter import SearchFilter
from ..store import Revision
from ..times import TimeLike, as_micros, format_time
from ..vault import Vault, lookback
from .render import render, word_diff

T = TypeVar("T")
Listed = tuple[str, "str | None", "str | None"]
"""A note in a listing: path, title, content hash."""
CACHED_MOMENTS = 32
"""Listings kept (per kind): the moments a session moves between most."""


def _when(micros: int | None) -> dict[str, Any]:
    return {"us": micros, "iso": format_time(micros)}


def _revision(r: Revision) -> dict[str, Any]:
    return {
        "path": r.path,
        "kind": r.kind,
        "known_at": r.known_at,
        "iso": format_time(r.known_at),
        "renamed_from": r.renamed_from,
        "renamed_to": r.renamed_to,
        "size": r.size,
        "title": r.title,
        "id": revision_id(r),
        "revision": short_revision(r.content_hash),
    }


class Explorer:
    """The page's reads of one vault (thread-safe: one read at a time on the vault's connection)."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self.lock = threading.RLock()
        self._generation: Any = None
        self._cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._times: list[int] = []

    # ------------------------------------------------------------ caching

    def _fresh(self) -> None:
        """Empty the caches when the vault learned something (or forgot something) since they were filled."""
        generation = self.vault.generation
        if generation != self._generation:
            self._cache.clear()
            self._generation = generation
            self._times = [known_at for known_at, _ in self._batches()]

    def _cached(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        value = make()
        self._cache[key] = value
        while len(self._cache) > CACHED_MOMENTS * 4:
            self._cache.popitem(last=False)
        return value

    def _batches(self) -> list[tuple[int, int]]:
        return self._cached(("timeline",), self.vault.timeline)

    def cutoff(self, at: int | None) -> int | None:
        """The known_at of the last batch at or before ``at`` (what decides every listing), None for now,
        -1 before the first batch."""
        if at is None:
            return None
        i = bisect.bisect_right(self._times, at)
        return self._times[i - 1] if i else -1

    def _ls(self, at: int | None, valid: int | None = None) -> list[Listed]:
        """``(path, title, content hash)`` of the notes at ``at`` (with ``valid``: those applying then)."""
        key = self.cutoff(at)
        if key == -1:
            return []
        if valid is None:
            return self._cached(("ls", key), lambda: self.vault.listing(as_of=key))
        return self._cached(
            ("ls", key, valid),
            lambda: [(r.path, r.title, r.content_hash) for r in self.vault.ls(as_of=key, valid_at=valid)],
        )

    def _resolver(self, at: int | None) -> Resolver:
        key = self.cutoff(at)
        return self._cached(("resolver", key), lambda: Resolver(path for path, _, _ in self._ls(at)))

    # ------------------------------------------------------------ views

    def timeline(self) -> dict[str, Any]:
        """Every batch as ``[known_at, notes changed]``, the ends, and whether notes declare validity."""
        with self.lock:
            self._fresh()
            batches = self._batches()
            validity = self._cached(
                ("validity",), lambda: any(r.valid_from is not None or r.valid_to is not None for r in self.vault.ls())
            )
            return {
                "vault": self.vault.name,
                "batches": [list(b) for b in batches],
                "first": _when(batches[0][0] if batches else None),
                "last": _when(batches[-1][0] if batches else None),
                "validity": validity,
            }

    def moment(self, at: str) -> dict[str, Any]:
        """A typed moment as the page's time: a time, or a revision id (``r12``: the time of batch 12)."""
        with self.lock:
            cut = resolve_cutoff(self.vault, at)
        return {**_when(cut.as_of), "batch": cut.batch}

    def _moment(self, at: TimeLike, argument: str) -> int | None:
        """A moment of the page's addresses as UTC microseconds: a time, or a revision id (its batch's time)."""
        with self.lock:
            return resolve_cutoff(self.vault, at, argument).as_of

    def file(self, path: str, at: TimeLike = None, limit: int = 16 * 2**20) -> bytes:
        """A file's exact bytes as of ``at`` (the page shows an embedded image as it was then); StoreError when
        it is over ``limit`` bytes."""
        when, data = self._moment(at, "as_of"), bytearray()

        def take(piece: bytes) -> None:
            if len(data) + len(piece) > limit:
                raise StoreError(f"{path} is over {limit >> 20} MB: read it with `vaultsync read --output`")
            data.extend(piece)

        with self.lock:
            self._fresh()
            self.vault.read_bytes(path, take, as_of=when)
        return bytes(data)

    def tree(self, at: TimeLike = None, valid: TimeLike = None) -> dict[str, Any]:
        """The notes that existed at ``at`` (``ls --as-of``), each marked relative to now: modified,
        renamed (to its path now) or deleted since; and the notes added since."""
        when, valid_at = self._moment(at, "as_of"), as_micros(valid, "valid_at")
        with self.lock:
            self._fresh()
            tree = self._cached(("tree", self.cutoff(when), valid_at), lambda: self._tree(when, valid_at))
            return {"at": _when(when), "valid_at": _when(valid_at), **tree}

    def _tree(self, when: int | None, valid_at: int | None) -> dict[str, Any]:
        then = self._ls(when, valid_at)
        now = {path: content_hash for path, _, content_hash in self._ls(None)}
        gone = [path for path, _, _ in then if path not in now]
        fates = self.vault.fates(gone, as_of=self.cutoff(when)) if gone and when is not None else {}
        notes, moved_to = [], set()
        for path, title, content_hash in then:
            entry: dict[str, Any] = {"path": path, "title": title}
            if path in now:
                if now[path] != content_hash:
                    entry["mark"] = "modified"
            elif fates.get(path) is not None:
                entry["mark"], entry["now"] = "renamed", fates[path]
                moved_to.add(fates[path])
            else:
                entry["mark"] = "deleted"
            notes.append(entry)
        present = {path for path, _, _ in then}
        later = [p for p in now if p not in present and p not in moved_to]
        return {"notes": notes, "added_since": later, "folders": folders([path for path, _, _ in then])}

    def note(self, path: str, at: TimeLike = None, valid: TimeLike = None) -> dict[str, Any]:
        """The note as of ``at``: its text, safe HTML (links resolved then), frontmatter, and its revisions."""
        when, valid_at = self._moment(at, "as_of"), as_micros(valid, "valid_at")
        with self.lock:
            self._fresh()
            note = self.vault.read(path, as_of=when, valid_at=valid_at)
            resolver = self._resolver(when)
            rev = note.revision
            html = render(note.content, lambda link: resolver.resolve(link, rev.path))
            history = self.vault.history(rev.path)
            return {
                "path": rev.path,
                "title": rev.title,
                "at": _when(when),
                "revision": _revision(rev),
                "content": note.content,
                "html": html,
                "frontmatter": rev.frontmatter,
                "tags": rev.tags,
                "aliases": rev.aliases,
                "warnings": rev.warnings,
                "revisions": [_revision(r) for r in history],
            }

    def links(self, path: str, at: TimeLike = None) -> dict[str, Any]:
        """The notes linking to ``path`` as of ``at``, and its outgoing links resolved then."""
        with self.lock:
            self._fresh()
            report = self.vault.links(path, as_of=self._moment(at, "as_of"))
            backlinks = sorted({b["source"] for b in report.backlinks})
            return {
                "path": report.path,
                "backlinks": backlinks,
                "outgoing": [{"target": o.get("target"), "resolved": o.get("resolved")} for o in report.outgoing],
            }

    def diff(self, path_a: str, at_a: TimeLike, path_b: str, at_b: TimeLike) -> dict[str, Any]:
        """The word-level difference between the note ``path_a`` as of ``at_a`` and ``path_b`` as of ``at_b``
        (a side where the note did not exist is empty). Only the reads hold the vault's lock; the diff is
        worked out after (bounded: ``render.word_diff``), so the page's other requests never wait for it."""
        with self.lock:
            self._fresh()
            texts, sides = [], []
            for path, at in ((path_a, at_a), (path_b, at_b)):
                when = self._moment(at, "as_of")
                try:
                    texts.append(self.vault.read(path, as_of=when).content)
                except NoteNotFound:
                    texts.append("")  # not there then (before it was created, after it was deleted)
                sides.append({"path": path, **_when(when), "exists": bool(texts[-1]) or self._exists(path, when)})
            if not any(side["exists"] for side in sides):
                raise NoteNotFound(f"note {path_a!r} existed at neither moment")
        runs = word_diff(texts[0], texts[1])  # outside the lock: every other request is answered meanwhile
        counts = {op: sum(len(t.split()) for o, t in runs if o == op) for op in "-+"}
        return {
            "a": sides[0],
            "b": sides[1],
            "runs": runs,
            "removed_words": counts["-"],
            "added_words": counts["+"],
        }

    def _exists(self, path: str, when: int | None) -> bool:
        """Whether the (empty) note existed then: only asked for an empty text, which is rare."""
        return any(p == path for p, _, _ in self._ls(when))

    def search(
        self,
        query: str,
        at: TimeLike = None,
        valid: TimeLike = None,
        limit: int = 20,
        filters: SearchFilter | None = None,
    ) -> dict[str, Any]:
        """The default search mode as of ``at`` (exactly ``search --as-of``) in the notes ``filters`` admit;
        snippets mark matches ``**so**``."""
        with self.lock:
            return self.vault.search(
                query,
                as_of=self._moment(at, "as_of"),
                valid_at=as_micros(valid, "valid_at"),
                limit=limit,
                filters=filters,
            ).to_json()

    def changes(
        self, since: TimeLike, until: TimeLike = None, valid: TimeLike = None, limit: int = 500
    ) -> dict[str, Any]:
        """What changed in the whole vault after ``since`` up to ``until``: added, changed, renamed, deleted."""
        start, end = self._moment(since, "since"), self._moment(until, "until")
        with self.lock:
            revisions, counts, more = self.vault.changes_page(start, end, as_micros(valid, "valid_at"), limit=limit)
            return {
                "since": _when(start),
                "until": _when(end),
                "counts": counts,
                "more": more,
                "changes": [_revision(r) for r in revisions],
            }

    def deleted(self, until: TimeLike = None) -> dict[str, Any]:
        """The notes deleted up to ``until`` (default now) and still absent then, latest deletion first."""
        end = self._moment(until, "until")
        with self.lock:
            found = lookback.deleted(self.vault, None, end)
        rows = [{**d.to_json(), "deleted_us": d.deleted_at, "before_us": d.deleted_at - 1} for d in reversed(found)]
        return {"until": _when(end), "deleted": rows}


def folders(paths: list[str]) -> dict[str, int]:
    """Notes per folder (every ancestor counts its descendants; "" is the vault)."""
    counts: dict[str, int] = {"": len(paths)}
    for path in paths:
        folder = posixpath.dirname(path)
        while folder:
            counts[folder] = counts.get(folder, 0) + 1
            folder = posixpath.dirname(folder)
    return counts

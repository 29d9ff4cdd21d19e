"""Link resolution as of a time: a note's outgoing links and its backlinks, Obsidian-style."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .disk.attachments import is_attachment, mime_type
from .disk.paths import note_candidates
from .results import Links
from .revisions import revision_id
from .store.read import Revision
from .times import format_time

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _key(path: str) -> str:
    """A case-insensitive lookup key for a vault path."""
    return path.casefold()


class Resolver:
    """Resolves link targets against the files (notes and attachments) that existed at one time.

    Obsidian's rules, simplified: an exact vault path wins (``Folder/Note`` or ``Folder/Note.md``);
    otherwise a target naming a file (``Note``) or a path tail (``Sub/Note``) matches every note
    ending that way, preferring one in the linking note's folder, then the shortest path. Markdown
    links are also tried relative to the linking note's folder. Matching ignores case.
    """

    def __init__(self, paths: Iterable[str]) -> None:
        self.by_path: dict[str, str] = {}
        self.by_name: dict[str, list[str]] = {}
        for path in paths:
            self.by_path[_key(path)] = path
            name = _key(posixpath.basename(path))
            self.by_name.setdefault(name, []).append(path)

    def resolve(self, link: dict[str, Any], source: str) -> str | None:
        """The path the link points to, or None (dangling, or external)."""
        target = str(link.get("target") or "").strip().replace("\\", "/")
        if not target:
            return source if (link.get("heading") or link.get("block")) else None
        if _SCHEME.match(target):
            return None
        folder = posixpath.dirname(source)
        candidates = note_candidates(_key(target))  # every lookup below ignores case
        if link.get("kind") == "markdown" and not target.startswith("/"):
            relative = [posixpath.normpath(posixpath.join(folder, c)) for c in candidates]
            for cand in relative:
                found = self.by_path.get(_key(cand))
                if found:
                    return found
        for cand in candidates:
            found = self.by_path.get(_key(cand.lstrip("/")))
            if found:
                return found
        for cand in candidates:
            tail = _key(cand.lstrip("/"))
            matches = [
                p
                for p in self.by_name.get(posixpath.basename(tail), [])
                if _key(p) == tail or _key(p).endswith("/" + tail)
            ]
            if matches:
                return min(matches, key=lambda p: (posixpath.dirname(p) != folder, p.count("/"), len(p), p))
        return None


@dataclass
class LinkReport:
    """A note's outgoing links and backlinks as of one time."""

    path: str
    as_of: int | None
    outgoing: list[dict[str, Any]] = field(default_factory=list)
    backlinks: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return Links(
            path=self.path, as_of=format_time(self.as_of), outgoing=self.outgoing, backlinks=self.backlinks
        ).to_json()


def link_report(note: Revision, notes: list[Revision], as_of: int | None) -> LinkReport:
    """Resolve ``note``'s links and find the notes in ``notes`` (every file live then) linking to it. A link
    resolved to an attachment names what it was then: its MIME type and the revision id of the bytes it had
    (``r12``, which ``read --as-of`` and the assistants' ``read_attachment`` take)."""
    resolver = Resolver(r.path for r in notes)
    live = {r.path: r for r in notes}
    report = LinkReport(path=note.path, as_of=as_of)
    for link in note.links:
        resolved = resolver.resolve(link, note.path)
        found = {**link, "resolved": resolved}
        if resolved is not None and is_attachment(resolved) and resolved in live:
            found["mime_type"], found["revision"] = mime_type(resolved), revision_id(live[resolved])
        report.outgoing.append(found)
    for other in notes:
        for link in other.links:
            if other.path == note.path and not link.get("target"):
                continue  # [[#Heading]] inside the note itself is not a backlink
            if resolver.resolve(link, other.path) == note.path:
                report.backlinks.append({"source": other.path, **link})
    return report

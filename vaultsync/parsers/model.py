"""Value types the parser produces: a note's chunks, links and document-level facts."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any


@dataclass(slots=True, frozen=True)
class Chunk:
    """One bounded, contiguous piece of a note; a note's chunks joined give back its exact text."""

    chunk_id: str
    """Stable ID (16 hex chars), unique within the note: derived from the chunk's place in the
    heading tree (or its Obsidian block id), not from its absolute position."""
    text: str
    """The exact source text of the chunk, original line endings included."""
    heading_path: tuple[str, ...]
    """Headings the chunk sits under, outermost first (``("A", "B")`` for ``# A > ## B``)."""
    line_start: int
    """First line, 1-based."""
    line_end: int
    """Last line, 1-based, inclusive."""
    kind: str
    """``frontmatter``, ``heading`` (a section starting at its heading), ``text`` (any other
    run of blocks), ``code`` (a fence alone), ``table``, ``callout``, or ``name`` (an attachment's path, searched
    but not part of its text)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _reduce(self)


@dataclass(slots=True, frozen=True)
class Link:
    """A wikilink, embed or Markdown link found in the note (not inside code)."""

    target: str
    """Note or file the link points to, as written (``Note`` in ``[[Note#H|a]]``); empty for ``[[#H]]``."""
    heading: str | None = None
    """Heading after ``#``, if any."""
    block: str | None = None
    """Block id after ``#^`` or ``^``, if any."""
    alias: str | None = None
    """Display text after ``|`` (wikilinks) or the link text (Markdown links)."""
    embed: bool = False
    """True for ``![[...]]`` and ``![](...)``."""
    kind: str = "wikilink"
    """``wikilink`` or ``markdown``."""
    line: int = 0
    """1-based line of the link."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _reduce(self)


@dataclass(slots=True, frozen=True)
class Callout:
    """An Obsidian callout ``> [!type]- Title``."""

    type: str
    """Lower-cased callout type (``note``, ``warning`` ...)."""
    title: str
    """Title text after the marker (may be empty)."""
    fold: str
    """``+``, ``-`` or empty."""
    line: int
    """1-based line of the marker."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _reduce(self)


@dataclass(slots=True)
class ParsedNote:
    """Everything the parser learns about one note."""

    title: str
    """First H1, else the file name without ``.md``."""
    chunks: tuple[Chunk, ...]
    """Ordered chunks partitioning the text exactly."""
    frontmatter: dict[str, Any] | None = None
    """YAML frontmatter as JSON-compatible data (dates as ISO strings); None if absent or invalid."""
    frontmatter_text: str | None = None
    """The raw YAML between the ``---`` lines, kept even when it does not parse."""
    tags: tuple[str, ...] = ()
    """Unique tags without ``#``, in first-seen order: frontmatter ``tags`` then inline ``#tags``
    (nested ``a/b`` kept whole)."""
    aliases: tuple[str, ...] = ()
    """Frontmatter ``aliases`` (or ``alias``)."""
    links: tuple[Link, ...] = ()
    """Wikilinks, embeds and Markdown links in source order."""
    block_ids: tuple[str, ...] = ()
    """Obsidian block ids (``^id`` at the end of a block), without ``^``."""
    callouts: tuple[Callout, ...] = ()
    """Callouts in source order."""
    warnings: tuple[str, ...] = field(default_factory=tuple)
    """Problems that did not stop parsing (e.g. invalid YAML frontmatter, an unreadable ``valid_from``)."""
    valid_from: int | None = None
    """Frontmatter ``valid_from`` (UTC microseconds): when what the note says starts to hold (None: open)."""
    valid_to: int | None = None
    """Frontmatter ``valid_to`` (UTC microseconds): when it stops holding, exclusive (None: open)."""


_GETTERS: dict[type, attrgetter[Any]] = {}


def _reduce(value: Any) -> tuple[Any, ...]:
    """Pickle a small frozen record as its class and field values: what parse workers send back, per
    chunk and link, at a fraction of the cost of the dataclass default (``fields()`` for every object)."""
    cls = type(value)
    getter = _GETTERS.get(cls)
    if getter is None:
        getter = _GETTERS[cls] = attrgetter(*(f.name for f in fields(cls)))
    return cls, getter(value)

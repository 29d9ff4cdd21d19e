"""Per-note parse limits: how many facts one note may yield, so a note dense in them costs what a note costs.

A note of half a million ``#tags``, 300,000 ``[[links]]`` or 100,000 headings is a valid note (under the
size limit for a file), but every fact extracted from it is an object, a row and an index entry. The
parser therefore extracts at most ``ParseLimits`` of each kind from one note:

* ``tags``: inline ``#tags`` recognised (frontmatter tags count too, first); past the limit a ``#tag`` is
  plain text;
* ``links``: wikilinks, embeds and Markdown links recognised; past it, plain text;
* ``headings``: headings that start a section of the heading tree; past it a heading stays in the text of
  the section before it (it is still the note's text, and still a heading when read);
* ``chunks``: a note that would be cut into more chunks is cut into bigger ones (fewer, longer chunks).

The text itself is never limited: a note's chunks always give back its exact bytes, and every word of it
is searchable. A note over any limit is recorded with one warning naming the limits it reached. Counting
happens while markdown-it parses (in the parse ``env``), so tokens past a limit are never made, and once
tags and links are both used up the rest of each paragraph is taken as text in one step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt, rules_inline
from markdown_it.rules_inline import StateInline

__all__ = ["DEFAULT_LIMITS", "ParseLimits", "install", "limits_env", "over_limits", "take"]

_KEY = "vaultsync_limits"
_INLINE = ("tags", "links")


@dataclass(slots=True, frozen=True)
class ParseLimits:
    """The most facts of each kind one note yields (see the module docstring)."""

    tags: int = 10_000
    """Tags (frontmatter and inline, each occurrence, before duplicates are removed)."""
    links: int = 10_000
    """Wikilinks, embeds and Markdown links."""
    headings: int = 2_000
    """Headings that start a section (and so a chunk of their own)."""
    chunks: int = 4_000
    """Chunks; a note over it is cut into longer ones."""


DEFAULT_LIMITS = ParseLimits()


_STARTS = {"tags": "#", "links": "[!"}
"""The characters a fact of each kind starts with."""
_ALWAYS = "\n`\\<%"
"""Where skipping text always stops: a line's end (lines are counted by breaks), and what starts a code span,
an escape, HTML or an autolink, or a ``%%comment%%``, inside which nothing is a fact."""


class _Counts:
    __slots__ = ("left", "over", "stop")

    def __init__(self, limits: ParseLimits) -> None:
        self.left = {"tags": limits.tags, "links": limits.links}
        self.over: set[str] = set()
        self.stop: re.Pattern[str] | None = None
        """Once a kind is used up: where the text that can hold no fact still counted ends."""

    def spend(self, kind: str) -> None:
        self.left[kind] = 0
        if kind not in self.over:
            self.over.add(kind)
            starts = "".join(_STARTS[k] for k in _INLINE if k not in self.over)
            self.stop = re.compile("[" + re.escape(_ALWAYS + starts) + "]")


def limits_env(limits: ParseLimits) -> dict[str, Any]:
    """A markdown-it parse ``env`` that counts tags and links against ``limits``."""
    return {_KEY: _Counts(limits)}


def take(env: Any, kind: str, count: int = 1) -> bool:
    """Whether one more fact of ``kind`` (``tags`` or ``links``) may be made; counts it when so.

    A parse without limits in its ``env`` (the web page's rendering) always may.
    """
    counts: _Counts | None = env.get(_KEY) if isinstance(env, dict) else None
    if counts is None:
        return True
    if counts.left[kind] < count:
        counts.spend(kind)
        return False
    counts.left[kind] -= count
    return True


def over_limits(env: dict[str, Any]) -> set[str]:
    """The kinds whose limit the parse with ``env`` reached."""
    counts: _Counts | None = env.get(_KEY)
    return set(counts.over) if counts is not None else set()


def _spent_rule(state: StateInline, silent: bool) -> bool:
    """Once a kind is used up, text up to where a fact still counted could start is taken in one step
    (markdown-it would otherwise stop at every ``#`` or ``[`` of a dense note to try its rules there)."""
    counts: _Counts | None = state.env.get(_KEY)
    if counts is None or counts.stop is None or silent:
        return False
    found = counts.stop.search(state.src, state.pos, state.posMax)
    end = state.posMax if found is None else found.start()
    if end == state.pos:
        return False
    state.pending += state.src[state.pos : end]
    state.pos = end
    return True


def _counted(rule: Any) -> Any:
    """markdown-it's ``link`` or ``image`` rule, making a link only while the note's links last."""

    def counted(state: StateInline, silent: bool) -> bool:
        if silent or state.src[state.pos] not in "[!":
            return bool(rule(state, silent))
        counts: _Counts | None = state.env.get(_KEY)
        if counts is not None and not counts.left["links"]:
            counts.spend("links")
            return False
        made = bool(rule(state, silent))
        if made:
            take(state.env, "links")
        return made

    return counted


def install(md: MarkdownIt) -> None:
    """Count Markdown links and images against the parse's limits; take the rest as text once all are spent.

    (The tag and wikilink rules count their own tokens with ``take``.)
    """
    md.inline.ruler.at("link", _counted(rules_inline.link))
    md.inline.ruler.at("image", _counted(rules_inline.image))
    md.inline.ruler.before("text", "vaultsync_spent", _spent_rule)

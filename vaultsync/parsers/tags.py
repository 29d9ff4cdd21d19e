"""Obsidian ``#tags`` as a markdown-it inline rule, plus normalising frontmatter tag values.

Syntax: ``#`` at the start of the inline content or after whitespace or ``(``, followed by
letters, digits, ``_``, ``-`` or ``/`` (nested ``#a/b`` stays whole), with at least one
character that is not a digit (``#1984`` is not a tag). Headings markers never reach inline
parsing; code spans, escapes (``\\#x``), entities, autolinks and wikilinks (``[[Note#H]]``)
are consumed by their own rules first; a ``#`` glued to a URL (``http://x/#frag``) follows
no space. Emits one ``tag`` token whose ``meta`` holds ``tag`` (without ``#``) and ``line``, while the
note's tags last (``limits``).
"""

from __future__ import annotations

import re
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline

from .limits import take
from .lines import inline_line

_TAG_BODY = re.compile(r"[\w/-]+")
_NOT_DIGIT = re.compile(r"[^0-9]")
_ONLY_MARKS = re.compile(r"[/-]+")
_SEPARATORS = re.compile(r"[,\s]+")


def tags_plugin(md: MarkdownIt) -> None:
    """Recognise inline ``#tags`` and emit ``tag`` tokens."""
    md.inline.ruler.before("link", "tag", _tag_rule)


def is_tag(body: str) -> bool:
    """True when ``body`` (without ``#``) is a valid tag: some non-digit, not only ``-``/``/``."""
    return bool(body) and bool(_NOT_DIGIT.search(body)) and not _ONLY_MARKS.fullmatch(body)


def frontmatter_tags(value: Any) -> list[str]:
    """Tags from a frontmatter ``tags``/``tag`` value: a list, or a comma/space separated string.

    Example:
        >>> frontmatter_tags("#a, b/c d")
        ['a', 'b/c', 'd']
    """
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, bool) or item is None or isinstance(item, (dict, list)):
            continue
        text = str(item)
        pieces = _SEPARATORS.split(text) if isinstance(value, str) else [text.strip()]
        for piece in pieces:
            tag = piece.lstrip("#").strip()
            if tag:
                out.append(tag)
    return out


def _tag_rule(state: StateInline, silent: bool) -> bool:
    src, pos = state.src, state.pos
    if src[pos] != "#":
        return False
    if pos > 0:
        before = src[pos - 1]
        if not (before.isspace() or before == "("):
            return False
    match = _TAG_BODY.match(src, pos + 1, state.posMax)
    if match is None or not is_tag(match.group()):
        return False
    if not silent and not take(state.env, "tags"):  # past the note's limit a tag is text
        return False
    if not silent:
        token = state.push("tag", "", 0)
        token.content = src[pos : match.end()]
        token.markup = "#"
        token.meta = {"tag": match.group(), "line": inline_line(state, pos)}
    state.pos = match.end()
    return True

"""Obsidian wikilinks and embeds as a markdown-it inline rule.

Syntax (one line, no ``[`` or ``]`` inside)::

    [[Note]]  [[Note|alias]]  [[Note#Heading]]  [[Note#Heading|alias]]  [[#Heading]]
    [[Note#^block]]  [[Note^block]]  ![[image.png]]  ![[Note#Heading]]

The rule runs before markdown-it's ``link`` and ``image`` rules, so ``[[...]]`` never becomes a
Markdown link; code spans, escapes and HTML are consumed by their own rules first, so wikilinks
inside them are not seen. It emits one ``wikilink`` token whose ``meta`` holds ``target``,
``heading``, ``block``, ``alias``, ``embed`` and ``line`` (0-based line within the inline content), while
the note's links last (``limits``).
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline

from .limits import take
from .lines import inline_line

_STOP = re.compile(r"[\[\]\n]")


def wikilinks_plugin(md: MarkdownIt) -> None:
    """Recognise ``[[...]]`` and ``![[...]]`` and emit ``wikilink`` tokens."""
    md.inline.ruler.before("link", "wikilink", _wikilink_rule)


def split_wikilink(inner: str) -> tuple[str, str | None, str | None, str | None] | None:
    """Split the text between ``[[`` and ``]]`` into ``(target, heading, block, alias)``.

    A ``\\|`` (the escaped pipe Obsidian needs inside tables) separates the alias like ``|``.
    Returns None when nothing is linked (``[[ ]]``, ``[[|x]]``).

    Example:
        >>> split_wikilink("Note#Heading|shown")
        ('Note', 'Heading', None, 'shown')
    """
    target, bar, alias_text = inner.partition("|")
    alias = alias_text.strip() or None if bar else None
    target = target.rstrip("\\")
    heading = block = None
    target, hash_, sub = target.partition("#")
    if hash_:
        sub = sub.strip()
        if sub.startswith("^"):
            block = sub[1:].strip() or None
        else:
            heading = sub or None
    else:
        before, caret, after = target.partition("^")
        if caret and after.strip():
            target, block = before, after.strip()
    target = target.strip()
    if not target and heading is None and block is None:
        return None
    return target, heading, block, alias


def _wikilink_rule(state: StateInline, silent: bool) -> bool:
    src, pos = state.src, state.pos
    if src.startswith("[[", pos):
        embed, start = False, pos + 2
    elif src.startswith("![[", pos):
        embed, start = True, pos + 3
    else:
        return False
    stop = _STOP.search(src, start, state.posMax)  # the inner text has no brackets or newline,
    if stop is None or not src.startswith("]]", stop.start()):  # so the scan ends at the next one
        return False
    end = stop.start()
    parts = split_wikilink(src[start:end])
    if parts is None:
        return False
    if not silent and not take(state.env, "links"):  # past the note's limit a link is text
        return False
    if not silent:
        target, heading, block, alias = parts
        token = state.push("wikilink", "", 0)
        token.content = src[pos : end + 2]
        token.markup = "![[" if embed else "[["
        token.meta = {
            "target": target,
            "heading": heading,
            "block": block,
            "alias": alias,
            "embed": embed,
            "line": inline_line(state, pos),
        }
    state.pos = end + 2
    return True

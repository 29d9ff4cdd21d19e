"""Link destinations as markdown-it reads them, with the same results in fewer Python steps.

Parsing a note spends a large share of its time on Markdown links (the Hub's notes hold about seven per note,
most of them long URLs): markdown-it-py reads a destination one character at a time and normalizes every one
of them through ``mdurl``'s parse, format and encode. Here a run of ordinary characters is one regex step, and
a destination that normalizing would leave unchanged is recognised by a pattern and returned as it is.
Everything else goes through markdown-it's own code, so the results are the same; ``tests/parsers/test_destinations.py``
checks that against markdown-it on generated and real destinations.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

from markdown_it import MarkdownIt
from markdown_it.common.utils import unescapeAll
from markdown_it.helpers import parseLinkLabel, parseLinkTitle
from markdown_it.helpers.parse_link_destination import _Result

__all__ = ["install", "normalize_link", "parse_link_destination"]

_PLAIN = re.compile(r"[^\x00-\x20\x7f\\()]+")
"""Characters a bare destination takes one after another: anything but spaces, controls, ``\\`` and parentheses."""
_ANGLED = re.compile(r"[^\n<>\\]+")
"""Characters a ``<…>`` destination takes one after another."""


def parse_link_destination(string: str, pos: int, maximum: int) -> _Result:
    """``markdown_it.helpers.parseLinkDestination``, the same result for every input."""
    result = _Result()
    start = pos
    if string.startswith("<", pos):
        pos += 1
        while pos < maximum:
            run = _ANGLED.match(string, pos, maximum)
            if run is not None:
                pos = run.end()
                continue
            if pos >= len(string):  # markdown-it reads None there and goes on to ``maximum``: no ``>``
                return result
            char = string[pos]
            if char == "\n" or char == "<":
                return result
            if char == ">":
                result.pos, result.str, result.ok = pos + 1, unescapeAll(string[start + 1 : pos]), True
                return result
            pos += 2 if pos + 1 < maximum else 1  # a backslash escapes the next character
        return result

    level = 0
    while pos < maximum:
        run = _PLAIN.match(string, pos, maximum)
        if run is not None:
            pos = run.end()
            continue
        if pos >= len(string):
            break
        char = string[pos]
        if char <= " " or char == "\x7f":
            break
        if char == "\\":
            if pos + 1 < maximum:
                if string.startswith(" ", pos + 1):
                    break
                pos += 2
                continue
        elif char == "(":
            level += 1
            if level > 32:
                return result
        elif level == 0:  # ")"
            break
        else:
            level -= 1
        pos += 1

    if start == pos or level != 0:
        return result
    result.str, result.pos, result.ok = unescapeAll(string[start:pos]), pos, True
    return result


_KEPT = r"A-Za-z0-9;/?@&=+$,\-_.!~*'()#"
"""Characters ``mdurl.encode`` keeps as they are (besides a valid escape, ``%`` and two hex digits)."""
_UNCHANGED = re.compile(
    rf"https?://(?P<host>[A-Za-z0-9-]{{1,63}}(?:\.[A-Za-z0-9-]{{1,63}})*)"  # a web address
    rf"(?:[/?#](?:[{_KEPT}:]++|%[0-9A-Fa-f]{{2}})*+)?"
    rf"|(?!//)(?:[{_KEPT}]++|%[0-9A-Fa-f]{{2}})*+"  # a path without a scheme, a host or a colon
)
"""Destinations that ``normalizeLink`` returns unchanged: ASCII, nothing to percent-encode, and either a
relative path or an http(s) address whose host is plain labels (no port, user or IPv6)."""


def normalize_link(md: MarkdownIt, url: str) -> str:
    """``md.normalizeLink(url)`` (markdown-it's own), skipped for destinations it would leave unchanged."""
    plain = _UNCHANGED.fullmatch(url)
    if plain is not None and len(plain.group("host") or "") <= 255:  # mdurl drops a longer host
        return url
    return MarkdownIt.normalizeLink(md, url)


def install(md: MarkdownIt) -> None:
    """Make ``md`` read and normalize link destinations with the functions above."""
    # markdown-it types ``helpers`` as its helpers module; any object with these three functions serves
    md.helpers = SimpleNamespace(
        parseLinkDestination=parse_link_destination,  # type: ignore[assignment]  # a namespace serves as the module
        parseLinkLabel=parseLinkLabel,
        parseLinkTitle=parseLinkTitle,
    )
    md.normalizeLink = lambda url: normalize_link(md, url)  # type: ignore[method-assign]  # replaced on this instance on purpose

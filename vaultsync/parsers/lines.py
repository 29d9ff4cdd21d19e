"""Line arithmetic shared by the parser: cutting lines exactly as markdown-it counts them."""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Any

from markdown_it.rules_inline import StateInline

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_LINE_CACHE_KEY = "vaultsync_line_cache"


def split_lines(text: str) -> list[str]:
    """Split ``text`` into lines as markdown-it counts them, each keeping its own ending.

    ``\\r\\n``, ``\\r`` and ``\\n`` each end one line; nothing else does (unlike
    ``str.splitlines``, which also cuts at ``\\x0c``, ``\\u2028`` ...). ``"".join(split_lines(t)) == t``.

    Example:
        >>> split_lines("a\\r\\nb\\rc\\n\\nd")
        ['a\\r\\n', 'b\\r', 'c\\n', '\\n', 'd']
    """
    return _LINE.findall(text)


def line_offsets(lines: list[str]) -> list[int]:
    """Character offset of the start of each line, plus the total length at the end."""
    return list(accumulate(map(len, lines), initial=0))


def inline_line(state: StateInline, pos: int) -> int:
    """0-based line of ``pos`` within the inline content being parsed (``\\n`` count before it).

    Counts incrementally across calls on the same content, so many links in one paragraph stay linear.
    """
    env: Any = state.env
    src = state.src
    cache = env.get(_LINE_CACHE_KEY)
    count: int
    if cache is not None and cache[0] is src and cache[1] <= pos:
        count = cache[2] + src.count("\n", cache[1], pos)
    else:
        count = src.count("\n", 0, pos)
    env[_LINE_CACHE_KEY] = (src, pos, count)
    return count

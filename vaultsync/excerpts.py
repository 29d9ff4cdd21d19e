"""Excerpts of search hits that share a character budget: each hit's text cut around its first match.

``fit_excerpts`` gives every hit an equal share of the budget, and a hit whose whole text (spaces
collapsed) is shorter than its share hands the rest on to the others, so that short chunks come back
whole and long ones get as much of their text as fits. Each excerpt is a snippet of the chunk
(``store.search.snippets.snippet``) without match marks: it starts and ends between words, spaces
collapsed, with ``…`` where it was cut.
"""

from __future__ import annotations

from .embed.tokenizer import parse_query
from .store.search.snippets import snippet

MIN_EXCERPT = 60
"""No excerpt is cut shorter than this many characters, whatever the budget."""


def shares(lengths: list[int], budget: int) -> list[int]:
    """Characters for each text: equal shares of ``budget``, a text shorter than its share taking only its
    length and leaving the rest to the others (never less than ``MIN_EXCERPT`` unless the text is shorter)."""
    widths = [0] * len(lengths)
    todo, left = list(range(len(lengths))), budget
    while todo:
        share = max(MIN_EXCERPT, left // len(todo))
        short = [i for i in todo if lengths[i] <= share]
        if not short:
            for i in todo:
                widths[i] = share
            break
        for i in short:
            widths[i] = lengths[i]
            left -= lengths[i]
        todo = [i for i in todo if lengths[i] > share]
    return widths


def fit_excerpts(query: str, texts: list[str], budget: int) -> list[str]:
    """An excerpt of each text around the first match of ``query``, all of them together about ``budget``
    characters."""
    flat = [" ".join(t.split()) for t in texts]
    widths = shares([len(f) for f in flat], budget)
    parsed = parse_query(query)
    out = []
    for text, whole, width in zip(texts, flat, widths):
        if len(whole) <= width:
            out.append(whole)
        else:  # the snippet may run a word past its width and adds its '…' marks
            out.append(snippet(text, parsed, max(MIN_EXCERPT, width - 12), mark=False))
    return out

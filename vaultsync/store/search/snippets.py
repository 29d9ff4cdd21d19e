"""Hit snippets: a short excerpt of a chunk with the query's matches marked ``**like this**``.

What is marked is what FTS5 matched, token for token: the chunk's text is cut into the tokens FTS5
indexes (``text.TOKENIZE`` over the NFKC text, CJK runs as character pairs), and every instance of a
query phrase (its tokens consecutive, the last one a prefix for ``word*``) is marked from the start of
its first token to the end of its last, as FTS5's ``highlight()`` does. A mark never starts or ends
inside a word; a CJK run or a word NFKC rewrites (``ﬁle``) is marked whole when one of its indexed
tokens matches. The excerpt starts and ends between tokens; it is never empty when the chunk has text.
A match inside the note's own bold (``**Budget:**``, ``__Budget__``) is bold already: it is not marked again
(marking it would double the asterisks, ``****Budget**:**``).
A match inside a link's address (``[text](url)``, ``<https://…>``, a bare URL, a reference definition's URL)
is not marked (``(**Remote**%20Work.md)`` tells nothing); a link's text and a wiki link's text are. The
excerpt is cut around the first marked match, and its lead-in does not start inside an address.
"""

from __future__ import annotations

import functools
import re

from ...embed.tokenizer import KeywordQuery, normalize
from .signals import token_spans, tokens

WIDTH = 160
"""Characters of the excerpt (more when the first match is longer, whole tokens kept)."""


def _indexed_tokens(text: str) -> list[tuple[str, int, int]]:
    """(indexed token, start, end) in ``text``: each raw token's normalized tokens, with its span."""
    if text.isascii():  # normalizing changes no ASCII token: most chunks take this path
        return [(raw, start, end) for start, end, raw in token_spans(text)]
    out = []
    for start, end, raw in token_spans(text):
        piece = text[start:end]
        normal = None if piece.isascii() else _normal_tokens(piece)
        if normal is None:
            out.append((raw, start, end))
        else:
            out += [(tok, start, end) for tok in normal]
    return out


@functools.lru_cache(maxsize=16_384)
def _normal_tokens(piece: str) -> tuple[str, ...] | None:
    """The tokens of a raw token's normalized text (a CJK run's character pairs, ``ﬁle``'s ``file``), or None
    when normalizing leaves it as it is. Cached: the same runs recur across the hits of a search."""
    normal = normalize(piece)
    return None if normal == piece else tuple(tokens(normal))


_BOLD = re.compile(r"\*\*(?=[^\s*])([^\n]*?[^\s*])\*\*|(?<!\w)__(?=[^\s_])([^\n]*?[^\s_])__(?!\w)")
"""Markdown strong emphasis on one line: ``**text**``, or ``__text__`` not inside a word (``snake__case__x`` is no
emphasis); its inside is group 1 or 2."""


def _unbolded(text: str, marks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The marks that are not inside the text's own bold (those are shown bold as they are)."""
    if "**" not in text and "__" not in text:
        return marks
    bold = [m.span(1) if m.group(1) is not None else m.span(2) for m in _BOLD.finditer(text)]
    return [(s, e) for s, e in marks if not any(b <= s and e <= f for b, f in bold)]


_ADDRESSES = re.compile(
    r"\]\((?:<[^>\n]*>|(?:[^\s()]|\([^\s()]*\))*)(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)"  # [text](url "title")
    r"|<[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*>|<[^\s<>@]+@[^\s<>@]+\.[^\s<>@]+>"  # <https://…>, <a@b.c>
    r"|(?<![\w/])(?:[A-Za-z][A-Za-z0-9+.-]{1,31}://|www\.)[^\s<>]*[^\s<>.,;:!?'\")\]*_~]"  # a bare URL
    r"|^[ \t]{0,3}\[[^\]\n]+\]:[ \t]*(?P<ref>\S+)",  # [ref]: url
    re.MULTILINE,
)
"""The addresses of a text's links: an inline link's or image's ``(url "title")`` (from its ``](``), an autolink
``<…>``, a bare URL, a reference definition's URL (group ``ref``)."""


def _addresses(text: str) -> list[tuple[int, int]]:
    """The character spans of the text's link addresses, in order."""
    if "](" not in text and "<" not in text and "w." not in text and ":" not in text:
        return []
    return [m.span("ref") if m.group("ref") else m.span() for m in _ADDRESSES.finditer(text)]


def _outside(marks: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The marks that overlap none of ``spans``."""
    if not spans:
        return marks
    return [(s, e) for s, e in marks if not any(a < e and s < b for a, b in spans)]


def _marks(found: list[tuple[str, int, int]], query: KeywordQuery) -> list[tuple[int, int]]:
    """Character spans of every phrase instance, overlapping ones merged, in order."""
    toks = [tok for tok, _, _ in found]
    spans = []
    for phrase in query.phrases:
        want = tokens(phrase.text)
        if not want:
            continue
        n, last, prefix = len(want), want[-1], phrase.prefix
        if n == 1:
            starts = [i for i, tok in enumerate(toks) if (tok.startswith(last) if prefix else tok == last)]
        else:
            first, head = want[0], want[:-1]
            starts = [
                i
                for i, tok in enumerate(toks[: len(toks) - n + 1])
                if tok == first
                and toks[i : i + n - 1] == head
                and (toks[i + n - 1].startswith(last) if prefix else toks[i + n - 1] == last)
            ]
        spans += [(found[i][1], found[i + n - 1][2]) for i in starts]
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def snippet(text: str, query: KeywordQuery, width: int = WIDTH, mark: bool = True) -> str:
    """An excerpt of about ``width`` characters around the first match, matches marked (unless not ``mark``),
    spaces collapsed."""
    start, end, marks = _window(text, query, width)
    out, pos = [], start
    for s, e in _unbolded(text, marks):
        if e <= start or s >= end:
            continue
        out += [text[pos:s], "**", text[s:e], "**"] if mark else [text[pos:s], text[s:e]]
        pos = e
    out.append(text[pos:end])
    piece = " ".join("".join(out).split())
    if not piece and text.strip():  # a window of spaces only: show the text's start instead
        return snippet_plain(text, width)
    before = "…" if text[:start].strip() else ""
    after = "…" if text[end:].strip() else ""
    return before + piece + after


def _window(text: str, query: KeywordQuery, width: int) -> tuple[int, int, list[tuple[int, int]]]:
    """The excerpt's start and end in ``text`` and its marks: around the first match outside link addresses; when
    there is none, around the first link whose address matched (its text shown before it)."""
    found = _indexed_tokens(text)
    matched = _marks(found, query)
    addresses = _addresses(text)
    marks = _outside(matched, addresses)
    spans = [(s, e) for _, s, e in found]
    if marks:
        anchor = marks[0]
    else:
        first = next((a for a, b in addresses if matched and a <= matched[0][0] < b), 0)
        anchor = (first, first)
    return (*_cut(text, spans, addresses, marks, anchor, width), marks)


def _cut(
    text: str,
    spans: list[tuple[int, int]],
    addresses: list[tuple[int, int]],
    marks: list[tuple[int, int]],
    anchor: tuple[int, int],
    width: int,
) -> tuple[int, int]:
    """Start and end of a window of about ``width`` around ``anchor``, between tokens and outside phrases."""
    first = anchor[0]
    start = max(0, first - width // 3)
    for a, b in addresses:  # a lead-in starting inside an address starts after it (the text is worth more)
        if a < start < b <= first:
            start = b
            break
    for s, e in spans:  # never start inside a token
        if s < start < e:
            start = s
            break
    end = max(start + width, anchor[1])
    for s, e in spans:  # nor end inside one
        if s < end < e:
            end = s if s > first else e
            break
    for s, e in marks:  # nor inside a phrase
        if s < end < e:
            end = e
    return start, min(end, len(text))


def snippet_plain(text: str, width: int = WIDTH) -> str:
    """The text's start, spaces collapsed, cut between words."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    return (flat[:width].rsplit(" ", 1)[0] or flat[:width]) + "…"

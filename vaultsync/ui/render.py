"""Safe HTML for a note, and word-level diffs: what the page shows, made on the server.

A note's text never reaches the page as markup: markdown-it-py runs with raw HTML off (``<script>``,
``<svg onload=…>`` and every other tag come out escaped), its link check drops ``javascript:``,
``vbscript:``, ``file:`` and ``data:`` URLs, and images are shown as their alt text (the page loads
nothing a note names from the network or elsewhere), except an embed of the vault's own raster image
(``![[diagram.png]]``, ``![alt](Files/diagram.png)``) that existed at the page's moment: an ``<img>`` with
no ``src``, naming the file in ``data-file``, whose bytes as of that moment the page loads from its own
``/api/file`` (served as data, never as a document: ``app.py``). An embedded PDF shows as a box with its name and
its first page's text as of that moment (the stored text, set as text by ``ui.js``; the PDF itself is never
framed or run). Wikilinks become in-page links carrying the
resolved note path in a ``data-path`` attribute, escaped like every attribute; the page opens them as of
the same moment. The page's Content-Security-Policy (``guard.py``) forbids inline script on top of this.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin

from ..disk.attachments import mime_type
from ..parsers.comments import comments_plugin
from ..parsers.wikilinks import wikilinks_plugin
from .obsidian import obsidian_plugin

Resolve = Callable[[dict[str, Any]], "str | None"]
"""Resolves a link (``{"kind", "target", "heading", ...}``) to a note path as of the page's moment."""

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_SAFE_SCHEMES = ("http:", "https:", "mailto:")
RASTER_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp"})
"""The image types the page shows inline (never SVG: a document that may carry script)."""


def shown_image(path: str | None) -> bool:
    """Whether ``path`` (a resolved link) is an image the page shows."""
    return path is not None and mime_type(path) in RASTER_TYPES


def shown_pdf(path: str | None) -> bool:
    """Whether ``path`` (a resolved link) is a PDF, whose first page's text the page shows."""
    return path is not None and mime_type(path) == "application/pdf"


def _pdf_embedded(path: str, label: str) -> str:
    """A PDF's box: its name, and its first page's text as it was at the page's moment (filled in by ``ui.js`` from
    the PDF's stored text: text only, never the PDF itself run or framed)."""
    return (
        f'<span class="embed pdf" data-pdf="{escapeHtml(path)}"><span class="pdf-name">{escapeHtml(label)}</span>'
        '<span class="pdf-page"></span></span>'
    )


def _embedded(path: str, alt: str) -> str:
    return f'<img class="embed" alt="{escapeHtml(alt)}" data-file="{escapeHtml(path)}">'


def _wikilink(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    meta = tokens[idx].meta
    target, heading, alias = meta.get("target") or "", meta.get("heading"), meta.get("alias")
    label = alias or (target + (f" > {heading}" if heading else "")) or (heading or "")
    resolved = env["resolve"]({"kind": "wikilink", **meta})
    if meta.get("embed") and shown_image(resolved):
        return _embedded(str(resolved), alias or target)
    if meta.get("embed") and shown_pdf(resolved):
        return _pdf_embedded(str(resolved), alias or target)
    text = escapeHtml(("↳ " if meta.get("embed") else "") + label)
    if resolved is None:
        return f'<span class="wikilink dangling" title="no such note then">{text}</span>'
    anchor = f' data-heading="{escapeHtml(heading)}"' if heading else ""
    return f'<a class="wikilink" href="#" data-path="{escapeHtml(resolved)}"{anchor}>{text}</a>'


def _link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    href = str(tokens[idx].attrGet("href") or "")
    if _SCHEME.match(href):
        if not href.lower().startswith(_SAFE_SCHEMES):
            return '<a class="blocked">'
        return f'<a class="external" href="{escapeHtml(href)}" rel="noopener noreferrer" target="_blank">'
    if href.startswith("#"):
        return f'<a class="anchor" href="#" data-heading="{escapeHtml(unquote(href[1:]))}">'
    resolved = env["resolve"]({"kind": "markdown", "target": unquote(href.partition("#")[0])})
    if resolved is None:
        return '<a class="dangling" title="no such note then">'
    return f'<a class="wikilink" href="#" data-path="{escapeHtml(resolved)}">'


def _image(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    token = tokens[idx]
    alt = "".join(child.content for child in token.children or [])
    src = str(token.attrGet("src") or "")
    if not _SCHEME.match(src):
        resolved = env["resolve"]({"kind": "markdown", "target": unquote(src.partition("#")[0])})
        if shown_image(resolved):
            return _embedded(str(resolved), alt)
        if shown_pdf(resolved):
            return _pdf_embedded(str(resolved), alt or src)
    return (
        f'<span class="image" title="{escapeHtml(str(token.attrGet("src") or ""))}">[image: {escapeHtml(alt)}]</span>'
    )


def _nothing(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    return ""


def build_renderer() -> MarkdownIt:
    """markdown-it-py as the parser uses it (front matter, footnotes, comments, wikilinks), raw HTML off."""
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.use(front_matter_plugin)
    md.use(footnote_plugin)
    md.use(comments_plugin)
    md.use(wikilinks_plugin)
    md.use(obsidian_plugin)  # tasks, ==highlights==, ^block-ids, #tags
    for name, rule in (
        ("wikilink", _wikilink),
        ("link_open", _link_open),
        ("image", _image),
        ("front_matter", _nothing),
        ("comment", _nothing),
        ("comment_block", _nothing),
    ):
        md.add_render_rule(name, rule)
    return md


_MD = build_renderer()


def render(text: str, resolve: Resolve) -> str:
    """A note's Markdown as safe HTML, links resolved by ``resolve``."""
    return _MD.render(text, {"resolve": resolve})


# ------------------------------------------------------------------ word-level diffs

_WORDS = re.compile(r"\s+|\w+|[^\w\s]")

DIFF_BUDGET = 1_000_000
"""The most element pairs (lines by lines, words by words) one diff compares in all. The alignment
(``difflib``) costs up to the product of the two sides' lengths; once a diff has spent this budget, what is
left to align is shown as removed and added whole (still exact), so the work stays bounded however large
and however different the texts are."""


def _words(text: str) -> list[str]:
    return _WORDS.findall(text)


class _Aligner:
    """Aligns sequences within one diff's budget of compared pairs."""

    __slots__ = ("left",)

    def __init__(self, budget: int) -> None:
        self.left = budget

    def opcodes(self, a: Sequence[str], b: Sequence[str]) -> list[tuple[str, int, int, int, int]]:
        """``difflib`` opcodes for ``a`` against ``b``, the common ends taken off first (linear); a middle whose
        alignment would go over the budget is one ``replace``."""
        n, m = len(a), len(b)
        head = 0
        while head < min(n, m) and a[head] == b[head]:
            head += 1
        tail = 0
        while tail < min(n, m) - head and a[n - 1 - tail] == b[m - 1 - tail]:
            tail += 1
        out: list[tuple[str, int, int, int, int]] = [("equal", 0, head, 0, head)] if head else []
        ma, mb = a[head : n - tail], b[head : m - tail]
        if ma or mb:
            cost = len(ma) * len(mb)
            if ma and mb and cost <= self.left:
                self.left -= cost
                matcher = difflib.SequenceMatcher(None, ma, mb, autojunk=False)
                out += [(t, i1 + head, i2 + head, j1 + head, j2 + head) for t, i1, i2, j1, j2 in matcher.get_opcodes()]
            else:
                out.append(("replace" if ma and mb else "delete" if ma else "insert", head, n - tail, head, m - tail))
        if tail:
            out.append(("equal", n - tail, n, m - tail, m))
        return out


def word_diff(before: str, after: str, budget: int = DIFF_BUDGET) -> list[list[str]]:
    """The difference between two texts as runs ``[op, text]``: ``=`` kept, ``-`` removed, ``+`` added.

    Lines are aligned first, then the words of each changed stretch; common beginnings and ends are
    taken off before anything is aligned, so an edit costs about its changed part, and no diff compares
    more than ``budget`` pairs (past it, changed stretches are shown whole). Concatenating the ``=`` and
    ``-`` runs gives ``before``, the ``=`` and ``+`` runs ``after``.
    """
    runs: list[tuple[str, str]] = []
    aligner = _Aligner(budget)
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    for tag, i1, i2, j1, j2 in aligner.opcodes(a, b):
        old, new = "".join(a[i1:i2]), "".join(b[j1:j2])
        if tag == "equal":
            runs.append(("=", old))
            continue
        wa, wb = _words(old), _words(new)
        for wtag, k1, k2, m1, m2 in aligner.opcodes(wa, wb):
            if wtag == "equal":
                runs.append(("=", "".join(wa[k1:k2])))
            else:
                runs += [("-", "".join(wa[k1:k2])), ("+", "".join(wb[m1:m2]))]
    return _grouped([r for r in runs if r[1]])


def _grouped(runs: list[tuple[str, str]]) -> list[list[str]]:
    """Readable runs: blanks kept between two changes join them ("a b" -> "x y" is one change, not two
    around a kept space), and each stretch of changes reads as all it removed, then all it added."""
    out: list[list[str]] = []
    removed, added = "", ""
    for i, (op, text) in enumerate(runs):
        between = (
            op == "=" and text.isspace() and 0 < i < len(runs) - 1 and runs[i - 1][0] != "=" and runs[i + 1][0] != "="
        )
        if op == "=" and not between:
            out += [[o, t] for o, t in (("-", removed), ("+", added)) if t]
            removed, added = "", ""
            if out and out[-1][0] == "=":
                out[-1][1] += text
            else:
                out.append(["=", text])
        else:
            removed += text if op != "+" else ""
            added += text if op != "-" else ""
    out += [[o, t] for o, t in (("-", removed), ("+", added)) if t]
    return out

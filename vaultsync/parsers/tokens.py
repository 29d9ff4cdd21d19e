"""One pass over markdown-it's token stream: top-level blocks, links, tags, block ids, callouts."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote

from markdown_it.token import Token

from .model import Callout, Link

_BLOCK_KINDS = {
    "front_matter": "frontmatter",
    "heading_open": "heading",
    "fence": "code",
    "code_block": "code",
    "table_open": "table",
}
_CALLOUT = re.compile(r"\[!([^\]\s]+)\]([+-]?)[ \t]*(.*)")
_BLOCK_ID = re.compile(r"(?:^|[ \t])\^([A-Za-z0-9-]+)\Z", re.MULTILINE)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(slots=True)
class Block:
    """A top-level block as the chunker sees it."""

    start: int
    """First line, 0-based."""
    end: int
    """Line after the last, 0-based (markdown-it's ``map[1]``)."""
    kind: str
    """``frontmatter``, ``heading``, ``code``, ``table``, ``callout`` or ``other``."""
    level: int = 0
    """Heading level (1-6) for headings, else 0."""
    text: str = ""
    """Heading text as written (the heading's inline content); the YAML for frontmatter."""


@dataclass(slots=True)
class TokenFacts:
    """What one walk over the tokens found; lines are 1-based unless said otherwise."""

    blocks: list[Block] = field(default_factory=list)
    """Top-level blocks in source order, with monotone, non-overlapping line ranges."""
    links: list[Link] = field(default_factory=list)
    """Wikilinks, embeds and Markdown links, in token order."""
    tags: list[tuple[int, str]] = field(default_factory=list)
    """Inline ``(line, tag)`` pairs."""
    block_ids: list[tuple[int, str]] = field(default_factory=list)
    """``(line, id)`` pairs, line 0-based: the last line of the paragraph the id ends."""
    callouts: list[Callout] = field(default_factory=list)
    """Callouts at any depth."""


def walk_tokens(tokens: Sequence[Token], n_lines: int) -> TokenFacts:
    """Walk ``tokens`` once; block ranges are clamped to ``n_lines``.

    A top-level token whose range starts before the previous block's end is ignored, so the
    block list is monotone whatever a plugin does to token order.
    """
    found = TokenFacts()
    last_end = 0
    for i, tok in enumerate(tokens):
        ttype = tok.type
        span = tok.map
        if span is None:
            continue
        if ttype == "inline":
            _walk_inline(tok, span, tokens[i - 1].type == "paragraph_open", found)
            continue
        kind = _BLOCK_KINDS.get(ttype, "other")
        if ttype == "blockquote_open" or ttype == "alert_open":
            callout = _callout(tokens, i)
            if callout is not None:
                found.callouts.append(callout)
                kind = "callout"
        if tok.level != 0:
            continue
        start, end = span[0], min(span[1], n_lines)
        if start < last_end or end <= start:
            continue
        if kind == "heading":
            level = int(tok.tag[1:]) if tok.tag[1:].isdigit() else 1
            text = tokens[i + 1].content if i + 1 < len(tokens) else ""
            found.blocks.append(Block(start, end, kind, level, text))
        else:
            found.blocks.append(Block(start, end, kind, 0, tok.content if kind == "frontmatter" else ""))
        last_end = end
    return found


def _walk_inline(tok: Token, span: list[int], in_paragraph: bool, found: TokenFacts) -> None:
    base = span[0] + 1
    breaks = 0
    children = tok.children or []
    for k, child in enumerate(children):
        ctype = child.type
        if ctype == "softbreak" or ctype == "hardbreak":
            breaks += 1
        elif ctype == "wikilink":
            meta = child.meta
            found.links.append(
                Link(
                    meta["target"],
                    meta["heading"],
                    meta["block"],
                    meta["alias"],
                    meta["embed"],
                    "wikilink",
                    base + meta["line"],
                )
            )
        elif ctype == "tag":
            found.tags.append((base + child.meta["line"], child.meta["tag"]))
        elif ctype == "link_open":
            found.links.append(
                _markdown_link(str(child.attrGet("href") or ""), _link_text(children, k + 1), False, base + breaks)
            )
        elif ctype == "image":
            found.links.append(_markdown_link(str(child.attrGet("src") or ""), child.content, True, base + breaks))
    if in_paragraph:
        content = tok.content
        match = _BLOCK_ID.search(content, content.rfind("\n") + 1)
        if match is not None:
            found.block_ids.append((span[1] - 1, match.group(1)))


def _link_text(children: list[Token], start: int) -> str:
    parts: list[str] = []
    for child in children[start:]:
        if child.type == "link_close":
            break
        parts.append(" " if child.type in ("softbreak", "hardbreak") else child.content)
    return "".join(parts)


def _markdown_link(href: str, text: str, embed: bool, line: int) -> Link:
    """A Markdown link from markdown-it's normalised ``href``. A URL with a scheme is kept whole;
    a vault-relative target has ``#heading``/``#^block`` split off and is percent-decoded
    (``<My Note.md>`` and ``My%20Note.md`` both give ``My Note.md``)."""
    if _SCHEME.match(href):
        return Link(href, None, None, text or None, embed, "markdown", line)
    target, hash_, fragment = href.partition("#")
    heading = block = None
    if hash_:
        fragment = unquote(fragment) if "%" in fragment else fragment
        if fragment.startswith("^"):
            block = fragment[1:] or None
        else:
            heading = fragment or None
    target = unquote(target) if "%" in target else target
    return Link(target, heading, block, text or None, embed, "markdown", line)


def _callout(tokens: Sequence[Token], i: int) -> Callout | None:
    tok = tokens[i]
    if tok.type == "alert_open":
        kind = str((tok.meta or {}).get("kind", "note"))
        return Callout(kind.lower(), "", "", (tok.map or [0])[0] + 1)
    if i + 2 >= len(tokens) or tokens[i + 1].type != "paragraph_open":
        return None
    inline = tokens[i + 2]
    if inline.type != "inline" or inline.map is None:
        return None
    match = _CALLOUT.match(inline.content.split("\n", 1)[0])
    if match is None:
        return None
    return Callout(match.group(1).lower(), match.group(3).strip(), match.group(2), inline.map[0] + 1)

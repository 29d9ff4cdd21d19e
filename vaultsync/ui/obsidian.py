"""Obsidian's own inline syntax on the page: task checkboxes, ``==highlights==``, ``^block-ids`` and ``#tags``.

Syntax:

* ``- [ ] task`` / ``- [x] done``: a disabled checkbox (mdit-py-plugins' tasklists);
* ``==text==``: highlighted (``<mark>``); the text inside is parsed as inline Markdown, it neither starts
  nor ends with a space, and the pair stays within one paragraph;
* ``^block-id`` after a space at the end of a line (letters, digits and ``-``): shown dimmed, as the
  block's name rather than as its text;
* ``#tag``: the parser's own rule (``parsers.tags``), shown as a tag.

Everything here makes tokens whose text the renderer escapes: a note cannot bring markup in through them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from mdit_py_plugins.tasklists import tasklists_plugin

from ..parsers.tags import tags_plugin

_BLOCK_ID = re.compile(r"\^([A-Za-z0-9-]+)[ \t]*(?=\n|$)")


def obsidian_plugin(md: MarkdownIt) -> None:
    """Task checkboxes, highlights, block ids and tags, with their render rules."""
    md.use(tasklists_plugin)
    md.use(tags_plugin)
    md.inline.ruler.before("emphasis", "highlight", _highlight)
    md.inline.ruler.before("emphasis", "block_id", _block_id)
    md.add_render_rule("block_id", _render_block_id)
    md.add_render_rule("tag", _render_tag)


def _highlight(state: StateInline, silent: bool) -> bool:
    start, maximum = state.pos, state.posMax
    if silent or not state.src.startswith("==", start):
        return False
    end = state.src.find("==", start + 2, maximum)
    inner = state.src[start + 2 : end] if end > start + 2 else ""
    if not inner or inner[0].isspace() or inner[-1].isspace() or "\n\n" in inner:
        return False
    token = state.push("mark_open", "mark", 1)
    token.markup = "=="
    state.pos, state.posMax = start + 2, end
    state.md.inline.tokenize(state)
    token = state.push("mark_close", "mark", -1)
    token.markup = "=="
    state.pos, state.posMax = end + 2, maximum
    return True


def _block_id(state: StateInline, silent: bool) -> bool:
    pos = state.pos
    if state.src[pos] != "^" or (pos > 0 and not state.src[pos - 1].isspace()):
        return False
    match = _BLOCK_ID.match(state.src, pos, state.posMax)
    if match is None:
        return False
    if not silent:
        token = state.push("block_id", "", 0)
        token.content = match.group(1)
    state.pos = match.end()
    return True


def _render_block_id(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    name = escapeHtml(tokens[idx].content)
    return f'<span class="block-id" title="block id: ^{name}">^{name}</span>'


def _render_tag(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return f'<span class="tag">{escapeHtml(tokens[idx].content)}</span>'

"""Obsidian ``%%comments%%`` as markdown-it rules, so links and tags inside them are not indexed.

Syntax: ``%% hidden %%`` inside a line (inline rule, ``comment`` token), or a block that starts
with a line opening ``%%`` without closing it and runs through the next line containing ``%%``
(block rule, ``comment_block`` token with a source ``map``)::

    %%
    template instructions, [[Not A Link]]
    %%

An unclosed block comment runs to the end of its container, as an unclosed fence does. An
unclosed inline ``%%`` is plain text. Neither is rendered.
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline


def comments_plugin(md: MarkdownIt) -> None:
    """Recognise ``%%...%%`` comments, inline and as blocks."""
    md.block.ruler.before(
        "html_block", "comment_block", _comment_block_rule, {"alt": ["paragraph", "reference", "blockquote"]}
    )
    md.inline.ruler.before("link", "comment", _comment_rule)


def _comment_block_rule(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    if state.is_code_block(start_line):
        return False
    pos = state.bMarks[start_line] + state.tShift[start_line]
    maximum = state.eMarks[start_line]
    src = state.src
    if not src.startswith("%%", pos) or src.find("%%", pos + 2, maximum) >= 0:
        return False
    if silent:
        return True
    line = start_line
    closed = False
    while True:
        line += 1
        if line >= end_line:
            break
        begin = state.bMarks[line] + state.tShift[line]
        end = state.eMarks[line]
        if begin < end and state.sCount[line] < state.blkIndent:
            break
        if src.find("%%", begin, end) >= 0:
            closed = True
            break
    state.line = line + 1 if closed else line
    token = state.push("comment_block", "", 0)
    token.content = state.getLines(start_line, state.line, state.sCount[start_line], True)
    token.markup = "%%"
    token.map = [start_line, state.line]
    return True


def _comment_rule(state: StateInline, silent: bool) -> bool:
    src, pos = state.src, state.pos
    if not src.startswith("%%", pos):
        return False
    end = src.find("%%", pos + 2, state.posMax)
    if end < 0:
        return False
    if not silent:
        token = state.push("comment", "", 0)
        token.content = src[pos + 2 : end]
        token.markup = "%%"
    state.pos = end + 2
    return True

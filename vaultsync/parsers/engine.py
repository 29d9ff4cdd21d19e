"""The one markdown-it parser vaultsync uses, built once at import time."""

from __future__ import annotations

from markdown_it import MarkdownIt
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin

from .comments import comments_plugin
from .destinations import install as fast_destinations
from .limits import install as parse_limits
from .tags import tags_plugin
from .wikilinks import wikilinks_plugin


def build_markdown() -> MarkdownIt:
    """CommonMark + tables, task lists, alerts, YAML front matter, footnotes, Obsidian syntax.

        Footnotes are configured for *parsing*, not rendering: definitions stay where they are
        written (``move_to_end=False``, so top-level token maps stay in source order) and inline
        ``^[...]`` footnotes are left to the normal inline rules (``inline=False``) so that links in
        them keep their line. Linkify and the ``gfm-like`` presets are not used (linkify-it-py is not
        a dependency). Link destinations are read by ``destinations`` (markdown-it's results, faster); tags and
    links are counted against the note's ``limits`` when the parse ``env`` carries them.
    """
    md = MarkdownIt("commonmark", {"tasklists": True, "alerts": True}).enable("table")
    md.use(front_matter_plugin)
    md.use(footnote_plugin, inline=False, move_to_end=False)
    md.use(comments_plugin)
    md.use(wikilinks_plugin)
    md.use(tags_plugin)
    fast_destinations(md)
    parse_limits(md)
    return md


MD = build_markdown()
"""Shared parser; ``MD.parse`` is safe to call from several threads (state is per call)."""

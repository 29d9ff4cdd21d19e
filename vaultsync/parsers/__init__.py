"""Markdown → note record. Pure functions: text in, dataclasses out, no I/O."""

from __future__ import annotations

from .model import Callout, Chunk, Link, ParsedNote
from .note import DEFAULT_MAX_CHUNK_CHARS, parse_note, split_lines

__all__ = ["Callout", "Chunk", "DEFAULT_MAX_CHUNK_CHARS", "Link", "ParsedNote", "parse_note", "split_lines"]

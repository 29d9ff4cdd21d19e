"""Markdown → note record. Pure functions: text in, dataclasses out, no I/O."""

from __future__ import annotations

from .attachment import parse_attachment, parse_file
from .limits import DEFAULT_LIMITS, ParseLimits
from .model import Callout, Chunk, Link, ParsedNote
from .note import DEFAULT_MAX_CHUNK_CHARS, parse_note, split_lines

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_CHUNK_CHARS",
    "Callout",
    "Chunk",
    "Link",
    "ParseLimits",
    "ParsedNote",
    "parse_attachment",
    "parse_file",
    "parse_note",
    "split_lines",
]

"""Attachment → record: what a non-Markdown file of the vault yields. Pure, like the note parser.

An attachment's revision has a title (its file name, as Obsidian shows it) and no chunks of its own: its bytes are
kept whole beside the revision (``store/files.py``), not as text.
"""

from __future__ import annotations

from .model import ParsedNote
from .note import parse_note


def parse_attachment(path: str) -> ParsedNote:
    """The record of the attachment at ``path``: its file name as title, nothing to search by its text."""
    return ParsedNote(title=path.rpartition("/")[2], chunks=())


def parse_file(text: str, path: str) -> ParsedNote:
    """A recorded file's record: a note's (``parse_note``) when ``path`` is Markdown, else an attachment's."""
    return parse_note(text, path) if path.endswith(".md") else parse_attachment(path)


__all__ = ["parse_attachment", "parse_file"]

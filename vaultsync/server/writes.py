"""Opt-in write tools: create a note or append to one, recorded before returning.

A write either returns once the change is recorded (searchable, in ``note_history``) or fails with
one line; who records it, and when a write waits or is refused, is the writer role's
(``vaultsync.writer.WriterRole.write``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..edit import MAX_WRITE_CHARS
from ..times import format_time
from ..vault import Note
from .feed import note_uri
from .models import WriteResult
from .served import ServedVault
from .toolkit import WRITE, ToolSet, friendly

NewPath = Annotated[str, Field(description="Vault-relative path ending in .md, e.g. 'Inbox/Idea.md'",
                               min_length=4, max_length=1024)]


def add_write_tools(tools: ToolSet, served: ServedVault) -> None:
    """Add create_note and append_to_note (only when the server allows writes)."""

    @tools.add("Create a note", WRITE)
    @friendly
    def create_note(
        path: NewPath,
        content: Annotated[str, Field(description="The note's Markdown text", max_length=MAX_WRITE_CHARS)],
    ) -> WriteResult:
        """Create a new Markdown note inside the vault. Refuses to overwrite an existing note (use
        append_to_note), paths outside the vault and names not ending in .md. The note is
        searchable when this returns."""
        return _recorded(served.write(path, content, append=False))

    @tools.add("Append to a note", WRITE)
    @friendly
    def append_to_note(
        path: Annotated[str, Field(description="Vault-relative path of an existing note, e.g. 'Inbox.md'",
                                   min_length=4, max_length=1024)],
        text: Annotated[str, Field(description="Markdown to add at the end (a newline is put before it "
                                   "if the note does not end with one)", min_length=1, max_length=MAX_WRITE_CHARS)],
    ) -> WriteResult:
        """Append text to the end of an existing note in the vault. The change is searchable when
        this returns."""
        return _recorded(served.write(path, text, append=True))


def _recorded(note: Note) -> WriteResult:
    r = note.revision
    return WriteResult(path=r.path, known_at=format_time(r.known_at), content_hash=r.content_hash, size=r.size,
                       ingested=True, uri=note_uri(r.path))

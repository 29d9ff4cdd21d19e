"""Opt-in write tools: create a note or append to one, recorded before returning.

A write either returns once the change is recorded (searchable, in ``note_history``) or fails with
one line; who records it, and when a write waits or is refused, is the writer role's
(``vaultsync.live.writer_role.WriterRole.write``). Each takes an optional ``expected_revision``: the write is
refused, nothing written, when the note on disk is not that revision (``vaultsync.revisions``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..disk.edit import MAX_WRITE_CHARS
from ..disk.paths import writable_note_path
from .models import WriteResult
from .revise import Expected, add_revision_tools, recorded, refuse_create
from .served import ServedVault
from .toolkit import ToolSet, friendly

NewPath = Annotated[
    str, Field(description="Vault-relative path ending in .md, e.g. 'Inbox/Idea.md'", min_length=4, max_length=1024)
]


def add_write_tools(tools: ToolSet, served: ServedVault) -> None:
    """Add create_note, append_to_note, edit_note and restore_note (only when the server allows writes)."""

    @tools.add
    @friendly
    def create_note(
        path: NewPath,
        content: Annotated[str, Field(description="The note's Markdown text", max_length=MAX_WRITE_CHARS)],
        expected_revision: Expected = None,
    ) -> WriteResult:
        """Create a new Markdown note inside the vault. Refuses to overwrite an existing note (use
        append_to_note), paths outside the vault and names not ending in .md. The note is
        searchable when this returns."""
        return _write(served, path, content, append=False, expected=expected_revision)

    @tools.add
    @friendly
    def append_to_note(
        path: Annotated[
            str,
            Field(
                description="Vault-relative path of an existing note, e.g. 'Inbox.md'", min_length=4, max_length=1024
            ),
        ],
        text: Annotated[
            str,
            Field(
                description="Markdown to add at the end (a newline is put before it "
                "if the note does not end with one, and after it if it has none)",
                min_length=1,
                max_length=MAX_WRITE_CHARS,
            ),
        ],
        expected_revision: Expected = None,
    ) -> WriteResult:
        """Append text to the end of an existing note in the vault. The change is searchable when
        this returns."""
        return _write(served, path, text, append=True, expected=expected_revision)

    add_revision_tools(tools, served)


def _write(served: ServedVault, path: str, text: str, *, append: bool, expected: str | None) -> WriteResult:
    rel = writable_note_path(path)  # a bad path is refused before anything else
    if append and not text.endswith("\n"):
        text += "\n"  # the note keeps ending with a newline
    if expected is not None and not append:
        refuse_create(served.writing_vault(), rel, expected)
    return recorded(served.write(rel, text, append=append, expected=expected))

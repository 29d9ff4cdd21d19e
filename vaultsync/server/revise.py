"""Write tools that know what they overwrite: ``edit_note`` (one section or one exact text, with the
revision read) and ``restore_note`` (a past revision back as a new one). Only with --allow-writes."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ..disk.edit import MAX_WRITE_CHARS
from ..disk.paths import writable_note_path
from ..errors import LockedError, NoteNotFound
from ..live.handoff import perform
from ..revisions import check_expected, mismatch, revision_of
from ..times import format_time
from ..vault import Note, Vault
from .feed import note_uri
from .models import WriteResult
from .served import ServedVault
from .toolkit import PathArg, TimeArg, ToolSet, friendly

EXPECTED = (
    "The note's revision you last read: a revision id as note_history, list_changes and read_note show it (r12: "
    "the note as it stood right after batch 12), or its content hash (read_note's content_hash, or its first 8+ "
    "hex digits as search_notes and note_history show them). The write is refused, nothing written, if the note "
    "changed since"
)
Expected = Annotated[str | None, Field(description=EXPECTED, max_length=64)]
"""``expected_revision`` where it may be left out (create_note, append_to_note, restore_note)."""
Required = Annotated[str, Field(description=EXPECTED, min_length=1, max_length=64)]
"""``expected_revision`` where it must be given (edit_note)."""


def add_revision_tools(tools: ToolSet, served: ServedVault) -> None:
    @tools.add
    @friendly
    def edit_note(
        path: PathArg,
        expected_revision: Required,
        new_text: Annotated[
            str,
            Field(
                description="The replacement: the section's new body (its heading line "
                "stays), or the text that replaces old_text",
                max_length=MAX_WRITE_CHARS,
            ),
        ],
        heading: Annotated[
            str | None,
            Field(
                description="Replace the body of this section: its heading path, e.g. 'Plan > Risks'", max_length=1024
            ),
        ] = None,
        old_text: Annotated[
            str | None, Field(description="Replace this exact text, which must occur once", max_length=MAX_WRITE_CHARS)
        ] = None,
    ) -> WriteResult:
        """Edit a note in place: replace one section's body (by heading path) or one exact text
        occurrence. Requires expected_revision (read_note's id or content_hash): when the note changed
        since, nothing is written. Every earlier state stays in note_history (restore_note)."""
        if (heading is None) == (old_text is None):
            raise ToolError("give exactly one of heading and old_text")
        check_expected(expected_revision)
        writer, rel = served.writing_vault(), writable_note_path(path)
        done = _locked(
            writer,
            lambda: perform(
                writer,
                "edit",
                {
                    "path": rel,
                    "expected": expected_revision,
                    "new_text": new_text,
                    "heading": heading,
                    "old_text": old_text,
                },
                public=True,
            ),
        )
        if done.here is None:  # carried out by the process watching the vault
            return recorded(served.read(done.answer["path"]))
        summary, note = done.here
        served.on_batch(summary)
        return recorded(note)

    @tools.add
    @friendly
    def restore_note(
        path: PathArg,
        as_of: TimeArg = None,
        revision: Annotated[
            str | None,
            Field(
                description="The revision to bring back: a revision id from note_history or list_changes (r12: "
                "the note as it stood right after batch 12), or its content hash (8+ hex digits)",
                max_length=64,
            ),
        ] = None,
        expected_revision: Expected = None,
    ) -> WriteResult:
        """Write a past state of a note back (as_of a time, or a revision from note_history) as a new
        revision; a deleted note comes back at its old path, a renamed one under its current name.
        History is never rewritten."""
        writer = served.writing_vault()
        if expected_revision is not None:
            check_expected(expected_revision)
        done = _locked(
            writer,
            lambda: perform(
                writer,
                "restore_note",
                {"path": path, "as_of": as_of, "revision": revision, "expected": expected_revision},
                public=True,
            ),
        )
        if done.here is not None and done.here.summary is not None:
            served.on_batch(done.here.summary)
        return recorded(served.read(done.answer["path"]))


def _locked(writer: Vault, write):
    """A write's LockedError (another process holds the vault and did not carry it out) as the tool's error."""
    try:
        return write()
    except LockedError as exc:
        raise ToolError(str(exc)) from None


def refuse_create(writer: Vault, rel: str, expected: str) -> None:
    """create_note with an expected revision: a note already there is named with its revision."""
    try:
        data = writer.read_file(rel)
    except (FileNotFoundError, NotADirectoryError, NoteNotFound, OSError):
        return
    raise ToolError(str(mismatch(rel, revision_of(data), expected)))


def recorded(note: Note) -> WriteResult:
    """A write tool's answer: the note as recorded."""
    r = note.revision
    return WriteResult(
        path=r.path,
        known_at=format_time(r.known_at),
        content_hash=r.content_hash,
        size=r.size,
        ingested=True,
        uri=note_uri(r.path),
    )

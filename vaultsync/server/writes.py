"""Opt-in write tools: create a note or append to one, then ingest it before returning.

When another process holds the vault's writer lock (a watcher, an import), the file is written and
the tool waits for that process to record it; if it does not within ``WAIT_FOR_OTHER_WRITER_S``, the
tool error names the holder (pid, command, since when).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ..edit import MAX_WRITE_CHARS, checked_path
from ..errors import LockedError, NoteNotFound
from ..sync import BatchSummary
from ..times import format_time
from ..vault import Vault
from .models import WriteResult
from .notifications import note_uri
from .runtime import Runtime
from .toolkit import WRITE, ToolSet, friendly

logger = logging.getLogger(__name__)

WAIT_FOR_OTHER_WRITER_S = 10.0
"""How long a write waits for the process holding the writer lock (e.g. its watcher) to ingest it."""

NewPath = Annotated[str, Field(description="Vault-relative path ending in .md, e.g. 'Inbox/Idea.md'",
                               min_length=4, max_length=1024)]


def add_write_tools(tools: ToolSet, rt: Runtime) -> None:
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
        return _write(rt, path, lambda writer: writer.create_note(path, content))

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
        return _write(rt, path, lambda writer: writer.append_to_note(path, text))


def _write(rt: Runtime, path: str, action: Callable[[Any], BatchSummary]) -> WriteResult:
    """Run ``action(writer)`` (a create or append that ingests its batch), or, when another
    process holds the writer lock, wait for that process to ingest the file."""
    writer = _writer(rt)
    try:
        summary = action(writer)
    except LockedError as exc:
        return _wait_for_other_writer(rt, writer, checked_path(writer.root, path)[0], exc)
    return _result(rt, summary, checked_path(writer.root, path)[0])


def _writer(rt: Runtime) -> Vault:
    if rt.writer is None:
        rt.open()
    if rt.writer is None:
        raise ToolError("writes are disabled; the server was started without --allow-writes")
    return rt.writer


def _result(rt: Runtime, summary: BatchSummary, rel: str) -> WriteResult:
    rt.on_batch(summary)
    with rt.reading() as vault:
        return _recorded(vault.read(rel).revision)


def _recorded(r: Any) -> WriteResult:
    return WriteResult(path=r.path, known_at=format_time(r.known_at), content_hash=r.content_hash, size=r.size,
                       ingested=True, uri=note_uri(r.path))


def _wait_for_other_writer(rt: Runtime, writer: Vault, rel: str, refused: LockedError) -> WriteResult:
    """Another process holds the writer lock (a watcher ingests the file soon): wait until it has
    recorded the file, or fail with one line naming that process."""
    digest = hashlib.sha256((writer.root / rel).read_bytes()).hexdigest()
    deadline = time.monotonic() + WAIT_FOR_OTHER_WRITER_S
    while time.monotonic() < deadline:
        try:
            with rt.reading() as vault:
                note = vault.read(rel)
            if note.revision.content_hash == digest:
                return _recorded(note.revision)
        except NoteNotFound:
            pass
        time.sleep(0.2)
    holder = writer.lock.holder()
    why = (f"vault '{writer.name}' is being written by {holder}, which has not recorded it within "
           f"{WAIT_FOR_OTHER_WRITER_S:g} s" if holder else str(refused))
    logger.warning("%s written, but not recorded: %s", rel, why)
    raise ToolError(f"wrote {rel} in the vault folder, but it is not recorded yet: {why}; it becomes searchable "
                    "once that process records it or the vault is synced again (do not write it again)")

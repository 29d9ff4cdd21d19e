"""Opt-in write tools: create a note or append to one, then ingest it before returning."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ..edit import MAX_WRITE_CHARS, checked_path
from ..errors import LockedError, NoteNotFound
from ..sync import BatchSummary
from ..times import format_time
from .models import WriteResult
from .runtime import Runtime, note_uri
from .tools import friendly

logger = logging.getLogger(__name__)

WAIT_FOR_OTHER_WRITER_S = 10.0
"""How long a write waits for another process's watcher to ingest it."""

WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)

NewPath = Annotated[str, Field(description="Vault-relative path ending in .md, e.g. 'Inbox/Idea.md'",
                               min_length=4, max_length=1024)]


def register_write_tools(mcp: MCPServer, rt: Runtime) -> None:
    """Add create_note and append_to_note (only when the server allows writes)."""

    @mcp.tool(title="Create a note", annotations=WRITE)
    @friendly
    def create_note(
        path: NewPath,
        content: Annotated[str, Field(description="The note's Markdown text", max_length=MAX_WRITE_CHARS)],
    ) -> WriteResult:
        """Create a new Markdown note inside the vault. Refuses to overwrite an existing note (use
        append_to_note), paths outside the vault and names not ending in .md. The note is
        searchable when this returns."""
        return _write(rt, path, lambda writer: writer.create_note(path, content))

    @mcp.tool(title="Append to a note", annotations=WRITE)
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
    process's watcher holds the vault, wait for it to ingest the file."""
    writer = _writer(rt)
    try:
        summary = action(writer)
    except LockedError:
        return _wait_for_other_writer(rt, checked_path(writer.root, path)[0])
    return _result(rt, summary, checked_path(writer.root, path)[0])


def _writer(rt: Runtime):  # -> Vault
    if rt.writer is None:
        rt.open()
    if rt.writer is None:
        raise ToolError("writes are disabled; the server was started without --allow-writes")
    return rt.writer


def _result(rt: Runtime, summary: BatchSummary, rel: str) -> WriteResult:
    rt.on_batch(summary)
    with rt.reading() as vault:
        note = vault.read(rel)
    r = note.revision
    return WriteResult(path=r.path, known_at=format_time(r.known_at), content_hash=r.content_hash, size=r.size,
                       ingested=True, uri=note_uri(r.path))


def _wait_for_other_writer(rt: Runtime, rel: str) -> WriteResult:
    """Another process owns the writer (its watcher will ingest the file): wait until it has."""
    assert rt.writer is not None
    digest = hashlib.sha256((rt.writer.root / rel).read_bytes()).hexdigest()
    deadline = time.monotonic() + WAIT_FOR_OTHER_WRITER_S
    while time.monotonic() < deadline:
        try:
            with rt.reading() as vault:
                note = vault.read(rel)
            if note.revision.content_hash == digest:
                r = note.revision
                return WriteResult(path=r.path, known_at=format_time(r.known_at), content_hash=r.content_hash,
                                   size=r.size, ingested=True, uri=note_uri(r.path))
        except NoteNotFound:
            pass
        time.sleep(0.2)
    logger.warning("%s written, but the process holding the writer has not ingested it yet", rel)
    return WriteResult(path=rel, known_at=None, content_hash=digest, size=None, ingested=False, uri=note_uri(rel))

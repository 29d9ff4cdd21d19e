"""Opt-in write tools: create a note or append to one, then ingest it before returning.

A write either returns once the change is recorded (searchable, in ``note_history``) or fails:

* this process holds the writer lock (or takes it): write and record, one batch, serialized with
  the watcher's batches and every other write (``Vault._writing``);
* another process holds it and watches the vault (``watch``, ``serve --watch``): write the file,
  then wait until that process has recorded it (``WAIT_FOR_OTHER_WRITER_S``); if it stops
  meanwhile, this process takes the lock and records the file itself;
* another process holds it without watching (an import): wait up to ``WAIT_FOR_LOCK_S`` for the
  lock, then refuse with the holder named, before touching the file.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ..edit import MAX_WRITE_CHARS
from ..errors import LockedError, NoteNotFound
from ..paths import writable_note_path
from ..sync import BatchSummary
from ..times import format_time
from ..revisions import expecting
from ..vault import Vault
from .models import WriteResult
from .notifications import note_uri
from .revise import add_revision_tools, refuse_create
from .runtime import Runtime
from .toolkit import WRITE, ToolSet, friendly, public_holder

logger = logging.getLogger(__name__)

WAIT_FOR_OTHER_WRITER_S = 10.0
"""How long a write waits for the process holding the writer lock (e.g. its watcher) to ingest it."""

WAIT_FOR_LOCK_S = 5.0
"""How long a write waits for a process holding the writer lock without watching (an import) to finish."""

Expected = Annotated[str | None, Field(description="The note's revision you last read (read_note's content_hash, "
                                       "or its first 8+ characters): the write is refused, nothing written, if the "
                                       "note changed since", max_length=64)]

NewPath = Annotated[str, Field(description="Vault-relative path ending in .md, e.g. 'Inbox/Idea.md'",
                               min_length=4, max_length=1024)]


def add_write_tools(tools: ToolSet, rt: Runtime) -> None:
    """Add create_note and append_to_note (only when the server allows writes)."""

    @tools.add("Create a note", WRITE)
    @friendly
    def create_note(
        path: NewPath,
        content: Annotated[str, Field(description="The note's Markdown text", max_length=MAX_WRITE_CHARS)],
        expected_revision: Expected = None,
    ) -> WriteResult:
        """Create a new Markdown note inside the vault. Refuses to overwrite an existing note (use
        append_to_note), paths outside the vault and names not ending in .md. The note is
        searchable when this returns."""
        return _write(rt, path, content, append=False, expected=expected_revision)

    @tools.add("Append to a note", WRITE)
    @friendly
    def append_to_note(
        path: Annotated[str, Field(description="Vault-relative path of an existing note, e.g. 'Inbox.md'",
                                   min_length=4, max_length=1024)],
        text: Annotated[str, Field(description="Markdown to add at the end (a newline is put before it "
                                   "if the note does not end with one)", min_length=1, max_length=MAX_WRITE_CHARS)],
        expected_revision: Expected = None,
    ) -> WriteResult:
        """Append text to the end of an existing note in the vault. The change is searchable when
        this returns."""
        return _write(rt, path, text, append=True, expected=expected_revision)

    add_revision_tools(tools, rt)


def _write(rt: Runtime, path: str, text: str, *, append: bool, expected: str | None = None) -> WriteResult:
    """Write and record (see the module docstring for who records, and when a write is refused)."""
    writer = _writer(rt)
    rel = writable_note_path(path)  # a bad path is refused before anything else
    check = expecting(rel, expected)
    if expected is not None and not append:
        refuse_create(writer, rel, expected)
    deadline = time.monotonic() + WAIT_FOR_LOCK_S
    while True:
        try:
            summary, note = writer.write_note(rel, text, append=append, check=check)
            rt.on_batch(summary)
            return _recorded(note.revision)
        except LockedError as refused:
            holder = writer.lock.holder_info()
            if holder and holder.get("watching"):
                writer.write_file(rel, text, append=append, check=check)
                return _wait_for_other_writer(rt, writer, rel, refused)
            if time.monotonic() >= deadline:
                raise ToolError(f"vault '{writer.name}' is being written by {public_holder(holder)}; nothing was "
                                "written, try again when it has finished") from None
        time.sleep(0.1)


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
    """Another process that watches the vault holds the writer lock: wait until it has recorded the
    file as written (or later), take over when it stops, or fail with one line naming it."""
    written = writer.root / rel
    digest = hashlib.sha256(writer.read_file(rel)).hexdigest()
    deadline = time.monotonic() + WAIT_FOR_OTHER_WRITER_S
    while time.monotonic() < deadline:
        try:
            with rt.reading() as vault:
                note = vault.read(rel)
            if note.revision.content_hash == digest:
                return _recorded(note.revision)
        except NoteNotFound:
            pass
        if writer.lock.holder_info() is None:  # the watcher stopped: record it here
            try:
                return _result(rt, writer.sync([rel], source="write"), rel)
            except LockedError:
                pass
        time.sleep(0.1)
    holder = writer.lock.holder_info()
    why = (f"vault '{writer.name}' is being written by {public_holder(holder)}, which has not recorded it within "
           f"{WAIT_FOR_OTHER_WRITER_S:g} s" if holder is not None else "the vault's watcher stopped")
    logger.warning("%s written, but not recorded: %s (%s)", written, why, writer.lock.holder() or refused)
    raise ToolError(f"wrote {rel} in the vault folder, but it is not recorded yet: {why}; it becomes searchable "
                    "once that process records it or the vault is synced again (do not write it again)")

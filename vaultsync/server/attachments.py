"""Attachments for assistants: listed and read as of a date, binary ones as a resource link, never inline.

``list_attachments`` names a vault's non-Markdown files as of a time with their type and size. ``read_attachment``
gives a text-bearing file's reading text (a canvas's cards, a base's views) and, for every attachment, a
``ResourceLink`` to ``attachment://{revision}/{+path}``: that exact revision's bytes (the revision id names the
batch that made it, so the link reads the same bytes whenever it is followed), served as a base64 blob up to
``MAX_BLOB_BYTES``.
"""

from __future__ import annotations

import re
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import ResourceLink
from pydantic import Field

from ..disk.attachments import is_attachment, mime_type
from ..errors import VaultsyncError
from ..parsers.attachment import TEXT_SUFFIXES, is_pdf
from ..revisions import resolve_cutoff, revision_id
from ..times import format_time
from .models import Compact
from .served import ServedVault
from .toolkit import CutoffArg, PathArg, ToolSet, decode_cursor, friendly, moment, page

ATTACHMENT_TEMPLATE = "attachment://{revision}/{+path}"
MAX_BLOB_BYTES = 8 * 2**20
"""The largest attachment the resource serves (base64 makes it a third larger on the wire)."""
REVISION = re.compile(r"r[0-9]{1,18}")


def attachment_uri(revision: str, path: str) -> str:
    return f"attachment://{revision}/{path}"


class AttachmentRow(Compact):
    path: str
    mime_type: str
    size: int | None = Field(default=None, description="Bytes")
    id: str = Field(description="The revision id (r12: the one batch 12 made); read_attachment takes it as as_of")
    known_at: str | None = None


class AttachmentList(Compact):
    """A page of attachments by path."""

    attachments: list[AttachmentRow]
    as_of: str | None = Field(default=None, description="The knowledge cutoff listed (absent: now)")
    next_cursor: str | None = Field(default=None, description="Pass as cursor for the next page; absent on the last")


class AttachmentResult(Compact):
    """One attachment as of a time: its facts, its reading text if it has one, and a link to its bytes."""

    path: str
    mime_type: str
    size: int | None = Field(default=None, description="Bytes")
    id: str = Field(description="The revision id (r12: the one batch 12 made)")
    known_at: str | None = None
    text: str | None = Field(
        default=None,
        description="The reading text of a canvas (its cards in reading order), a base, or a PDF (its pages'); "
        "absent else",
    )
    uri: str = Field(description="The resource with this revision's exact bytes (resources/read: a base64 blob)")
    readable: bool = Field(description=f"False when the resource will refuse it: over {MAX_BLOB_BYTES >> 20} MB")

    def resource_link(self) -> ResourceLink:
        """The MCP content block naming the bytes (``wire.CompactMetadata`` adds it after the JSON)."""
        name = self.path.rpartition("/")[2]
        return ResourceLink(uri=self.uri, name=name, title=self.path, mime_type=self.mime_type, size=self.size)


def add_attachment_tools(tools: ToolSet, rt: ServedVault) -> None:
    @tools.add
    @friendly
    def list_attachments(
        prefix: Annotated[
            str | None, Field(description="Only paths starting with this, e.g. 'Assets/'", max_length=1024)
        ] = None,
        as_of: CutoffArg = None,
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page", max_length=2048)] = None,
        limit: Annotated[int, Field(ge=1, le=500, description="Attachments per page")] = 100,
    ) -> AttachmentList:
        """List the vault's attachments (images, PDFs, canvases, bases, audio: every file that is not a Markdown
        note) that existed at a time (default now), by path, with their MIME type, size in bytes and revision id.
        Read one with read_attachment(path, as_of)."""
        with rt.reading() as vault:
            cut = resolve_cutoff(vault, as_of)
        try:
            after = decode_cursor(cursor)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        at = cut.as_of if cut.batch is None else as_of
        found = [r for r in rt.listing(at, prefix or "") if is_attachment(r.path)]
        chosen, nxt = page(found, after, limit, key=lambda r: r.path)
        rows = [
            AttachmentRow(
                path=r.path,
                mime_type=mime_type(r.path),
                size=r.size,
                id=revision_id(r),
                known_at=format_time(r.known_at),
            )
            for r in chosen
        ]
        return AttachmentList(attachments=rows, as_of=format_time(cut.as_of), next_cursor=nxt)

    @tools.add
    @friendly
    def read_attachment(path: PathArg, as_of: CutoffArg = None) -> AttachmentResult:
        """Read an attachment as it was at a time (default now): its MIME type, size and revision id; a canvas's
        or a base's reading text, or a PDF's pages' text (each page under "# Page N"); and for every file a resource
        link (attachment://r12/path) whose resources/read gives that revision's exact bytes as a base64 blob. The
        bytes are never inline in this answer."""
        if not is_attachment(path):
            raise ToolError(f"{path!r} is a Markdown note: read it with read_note")
        with rt.reading() as vault:
            note = vault.read(path, as_of=moment(as_of, "as_of"))
        rev = note.revision
        text = note.content if rev.path.lower().endswith(TEXT_SUFFIXES) or is_pdf(rev.path) else None
        return AttachmentResult(
            path=rev.path,
            mime_type=mime_type(rev.path),
            size=rev.size,
            id=revision_id(rev),
            known_at=format_time(rev.known_at),
            text=text,
            uri=attachment_uri(revision_id(rev), rev.path),
            readable=rev.size is not None and rev.size <= MAX_BLOB_BYTES,
        )


def register_attachment_resource(mcp: MCPServer, rt: ServedVault) -> None:
    @mcp.resource(
        ATTACHMENT_TEMPLATE,
        name="attachment",
        title="Attachment (one revision's bytes)",
        mime_type="application/octet-stream",
        description="An attachment's exact bytes as they stood right after a batch, e.g. attachment://r12/Assets/a.png "
        f"(read_attachment gives the link; at most {MAX_BLOB_BYTES >> 20} MB)",
    )
    def attachment(revision: str, path: str) -> bytes:
        if not REVISION.fullmatch(revision) or not is_attachment(path):
            raise ResourceNotFoundError("not an attachment link: use the uri read_attachment gives")
        data = bytearray()

        def take(piece: bytes) -> None:
            if len(data) + len(piece) > MAX_BLOB_BYTES:
                raise ResourceNotFoundError(
                    f"{path} is over {MAX_BLOB_BYTES >> 20} MB: read it with `vaultsync read --as-of {revision}`"
                )
            data.extend(piece)

        try:
            with rt.reading() as vault:
                vault.read_bytes(path, take, as_of=revision)
        except VaultsyncError as exc:
            raise ResourceNotFoundError(exc.for_clients()) from None
        return bytes(data)


__all__ = ["ATTACHMENT_TEMPLATE", "MAX_BLOB_BYTES", "add_attachment_tools", "register_attachment_resource"]

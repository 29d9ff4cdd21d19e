"""Notes as ``note://{+path}`` resources: read, listed a page at a time, subscribable in both eras."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.types import (
    INVALID_PARAMS,
    Annotations,
    EmptyResult,
    ListResourcesResult,
    PaginatedRequestParams,
    Resource,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)

from ..disk.attachments import is_attachment, mime_type
from ..errors import VaultsyncError
from ..revisions import revision_id
from ..times import format_time
from .attachments import attachment_uri, register_attachment_resource
from .feed import NOTE_TEMPLATE, note_uri
from .sdk import lowlevel_server
from .served import ServedVault
from .toolkit import decode_cursor, page


def register_resources(mcp: MCPServer, rt: ServedVault, *, page_size: int = 100) -> None:
    """The note template, a paginated resources/list, and legacy resources/subscribe handlers."""

    @mcp.resource(
        NOTE_TEMPLATE,
        name="note",
        title="Note (current text)",
        mime_type="text/markdown",
        description="A note's current Markdown text by vault-relative path, e.g. note://Projects/Atlas.md",
    )
    def note(path: str) -> str:
        try:
            with rt.reading() as vault:
                return vault.read(path).content
        except VaultsyncError as exc:
            raise ResourceNotFoundError(exc.for_clients()) from None

    register_attachment_resource(mcp, rt)

    lowlevel = lowlevel_server(mcp)  # MCPServer has no paginated resources/list and no resources/subscribe

    async def list_resources(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        try:
            after = decode_cursor(params.cursor if params is not None else None)
        except ValueError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None

        revisions = await anyio.to_thread.run_sync(rt.listing)
        chosen, nxt = page(revisions, after, page_size, key=lambda r: r.path)
        resources = [
            Resource(
                # an attachment: its current revision's bytes (a note: its text, subscribable)
                uri=attachment_uri(revision_id(r), r.path) if is_attachment(r.path) else note_uri(r.path),
                name=r.path,
                title=r.title,
                mime_type=mime_type(r.path),
                size=r.size,
                annotations=Annotations(last_modified=format_time(r.known_at)),
            )
            for r in chosen
        ]
        return ListResourcesResult(resources=resources, next_cursor=nxt)

    async def subscribe(ctx: ServerRequestContext[Any], params: SubscribeRequestParams) -> EmptyResult:
        try:
            rt.feed.subscribe_legacy(str(params.uri), ctx.session)
        except ValueError as exc:
            raise MCPError(
                INVALID_PARAMS, f"{exc}; subscribe to a note://Folder/Note.md URI from resources/list"
            ) from None
        return EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any], params: UnsubscribeRequestParams) -> EmptyResult:
        rt.feed.unsubscribe_legacy(str(params.uri), ctx.session)
        return EmptyResult()

    lowlevel.add_request_handler("resources/list", PaginatedRequestParams, list_resources)
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)

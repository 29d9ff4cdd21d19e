"""The only place vaultsync touches the MCP SDK's private attributes, each behind one checked function.

``MCPServer`` (mcp 2.x) has no public way to reach the low-level ``Server`` it wraps, yet three things
vaultsync does are public API of that low-level server only:

* ``add_request_handler`` for a paginated ``resources/list`` and the 2025-era ``resources/subscribe``
  and ``resources/unsubscribe`` (``MCPServer`` lists every resource at once and offers no subscribe);
* ``run(read, write, options)`` on our own guarded stdin reader (``run_stdio_async`` takes no streams);
* ``streamable_http_app(auth=..., token_verifier=...)`` to add bearer auth to a server that was built
  before the transport was chosen (``MCPServer`` takes the verifier only in its constructor).

A legacy subscription belongs to a client connection, but ``ServerSession`` (built per request) only
exposes the connection privately; ``connection_key`` names it.

When the SDK moves one of these, the functions here raise ``SDKChanged`` naming the attribute, and
``tests/server/test_mcp_sdk_adapter.py`` fails with the same message.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession

from ..errors import SDKChanged

LOWLEVEL_SERVER = "_lowlevel_server"
"""``MCPServer``'s low-level ``Server`` (mcp 2.3: set in ``MCPServer.__init__``)."""
SESSION_CONNECTION = "_connection"
"""``ServerSession``'s per-client ``Connection`` (mcp 2.3: set in ``ServerSession.__init__``)."""


def lowlevel_server(mcp: MCPServer) -> Server[Any]:
    """The low-level ``Server`` behind ``mcp`` (for handlers, ``run`` and the HTTP app with auth)."""
    server = getattr(mcp, LOWLEVEL_SERVER, None)
    if not isinstance(server, Server):
        raise SDKChanged(
            f"mcp.server.MCPServer.{LOWLEVEL_SERVER} is no longer the low-level mcp.server.lowlevel.Server "
            f"(got {type(server).__name__}); update vaultsync/server/sdk.py for this SDK version"
        )
    return server


def connection_key(session: ServerSession) -> int:
    """A key for the client connection behind a per-request ``ServerSession`` (stable across requests)."""
    connection = getattr(session, SESSION_CONNECTION, None)
    if connection is None:
        raise SDKChanged(
            f"mcp.server.session.ServerSession.{SESSION_CONNECTION} is gone; legacy resources/subscribe "
            "cannot tell connections apart: update vaultsync/server/sdk.py for this SDK version"
        )
    return id(connection)

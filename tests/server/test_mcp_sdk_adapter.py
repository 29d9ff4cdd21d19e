"""The private MCP SDK attributes vaultsync relies on (all in vaultsync/server/sdk.py) are still there.

When an SDK upgrade moves one, these tests fail with a message naming the attribute and the file to update.
"""

from __future__ import annotations

import inspect

import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context

from vaultsync.server import sdk


def test_mcpserver_still_wraps_a_lowlevel_server() -> None:
    server = MCPServer("probe")
    try:
        lowlevel = sdk.lowlevel_server(server)
    except sdk.SDKChanged as exc:
        pytest.fail(str(exc))
    assert isinstance(lowlevel, Server)
    # what vaultsync calls on it (public API of the low-level server)
    for method in ("add_request_handler", "run", "create_initialization_options", "streamable_http_app"):
        assert callable(getattr(lowlevel, method, None)), f"mcp.server.lowlevel.Server.{method} is gone"
    http_app = inspect.signature(lowlevel.streamable_http_app).parameters
    for name in ("auth", "token_verifier", "transport_security", "max_request_body_size", "host"):
        assert name in http_app, f"Server.streamable_http_app no longer takes {name}="


def test_the_adapter_names_the_attribute_it_misses() -> None:
    with pytest.raises(sdk.SDKChanged, match=r"MCPServer\._lowlevel_server .*vaultsync/server/sdk\.py"):
        sdk.lowlevel_server(object())  # type: ignore[arg-type]
    with pytest.raises(sdk.SDKChanged, match=r"ServerSession\._connection is gone"):
        sdk.connection_key(object())  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_connection_key_is_one_per_client_connection() -> None:
    """Sessions are built per request; the key of the connection behind them is stable across requests
    of one 2025-era client and differs between clients (what legacy resources/subscribe needs; 2026-era
    requests are stateless and subscribe through subscriptions/listen instead)."""
    seen: list[int] = []
    server = MCPServer("probe")

    @server.tool()
    def whoami(ctx: Context) -> str:
        try:
            seen.append(sdk.connection_key(ctx.request_context.session))
        except sdk.SDKChanged as exc:
            pytest.fail(str(exc))
        return "ok"

    async with Client(server, mode="legacy") as first, Client(server, mode="legacy") as second:
        await first.call_tool("whoami", {})
        await first.call_tool("whoami", {})
        await second.call_tool("whoami", {})
    assert seen[0] == seen[1] != seen[2], seen

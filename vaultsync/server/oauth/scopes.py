"""Scopes are roles: which scope each tool needs, and the server middleware that shows a token only its tools.

``vault:read`` covers every tool declared read-only and the ``note://`` resources; ``vault:write`` every other
tool (``registry.required_scope``: the scope follows from the tool's annotations, and a tool without them, or a
name the registry does not know, needs ``vault:write``); ``vault:admin`` implies both (no tool needs more today).
The HTTP gate (``gate``) answers a call of a tool the token may not use with 403 before the MCP handler runs; this
middleware keeps such tools out of ``tools/list``, refuses them again as unknown (should a call get past the gate),
and records writes for the token's subject (``write_caller``: the batch's caller, ``changes --caller``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp import MCPError
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.types import METHOD_NOT_FOUND

from ... import write_caller
from ..registry import required_scope


def allowed(tool: str, scopes: Iterable[str]) -> bool:
    """Whether a token holding (effective) ``scopes`` may call ``tool``."""
    return required_scope(tool) in set(scopes)


class ScopeGate:
    """SDK server middleware for a server behind OAuth: tools filtered by the token's (effective) scopes."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        token = get_access_token()
        if token is None:
            return await call_next(ctx)
        scopes = set(token.scopes)
        if ctx.method == "tools/list":
            result = await call_next(ctx)
            tools = result.get("tools") if isinstance(result, dict) else None
            if not isinstance(tools, list):
                return result
            assert isinstance(result, dict)
            return {**result, "tools": [t for t in tools if allowed(str(t.get("name")), scopes)]}
        if ctx.method == "tools/call":
            params = ctx.params if isinstance(ctx.params, dict) else {}
            name = params.get("name")
            if isinstance(name, str) and not allowed(name, scopes):
                raise MCPError(code=METHOD_NOT_FOUND, message=f"Unknown tool: {name}")
        if token.subject:
            with write_caller.acting_for(token.subject):
                return await call_next(ctx)
        return await call_next(ctx)

"""What the resource-server tests share (``server/test_oauth_resource.py``, ``hardened/test_oauth_hosted.py``): the
small issuer with its first signing key, and JSON-RPC messages posted raw, with or without a bearer token."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx2

from support.oauth_issuer import Issuer
from vaultsync.server import registry

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
WRITES = set(registry.names(writes=True))
"""The write tools: listed only for a token holding ``vault:write`` (where the grant allows it)."""


@contextlib.contextmanager
def signing_issuer() -> Iterator[Issuer]:
    """``support.oauth_issuer.Issuer`` serving, with one published RS256 key ``k1`` (what a module's ``issuer``
    fixture yields)."""
    with Issuer() as issuer:
        issuer.add_key("k1")
        yield issuer


def call(tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``tools/call`` request."""
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments or {}}}


def post(url: str, body: Any, token: str | None = None, **params: str) -> httpx2.Response:
    """``body`` posted to the MCP endpoint ``url`` as a client would, with ``Authorization: Bearer token`` when given
    (``params``: a query string)."""
    headers = dict(HEADERS) | ({"Authorization": f"Bearer {token}"} if token else {})
    return httpx2.post(url, json=body, headers=headers, params=params or None, timeout=30)


def challenge(response: httpx2.Response) -> str:
    """The answer's ``WWW-Authenticate`` ("" without one)."""
    return response.headers.get("www-authenticate", "")

"""Who a write is done for: the MCP caller a batch is recorded for (``batches.caller``).

The MCP server sets it around each call of a tool that changes the vault (``acting_for``): the caller's
id in hardened mode (the bearer token's ``caller_id``, or ``stdio`` / ``local``), ``mcp`` otherwise.
``Vault`` reads it when it writes a batch, so every door below the server stays unaware of it; a
batch written by the CLI or a watcher thread has none. A context variable, so it follows the call
into the worker thread that runs a synchronous tool, and never leaks into another call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

ANONYMOUS = "mcp"
"""The caller recorded for an MCP write outside hardened mode (the server knows no identity there)."""

_CALLER: ContextVar[str | None] = ContextVar("vaultsync_caller", default=None)


def caller() -> str | None:
    """The MCP caller the current write is done for (None: not an MCP tool's write)."""
    return _CALLER.get()


@contextlib.contextmanager
def acting_for(caller_id: str) -> Iterator[None]:
    """Record batches written inside this block as done for ``caller_id``."""
    token = _CALLER.set(caller_id)
    try:
        yield
    finally:
        _CALLER.reset(token)

"""Who a write is done for: the MCP caller a batch is recorded for (``batches.caller``).

The MCP server sets it around each call of a tool that changes the vault (``acting_for``): the caller's
id in hardened mode (the bearer token's ``caller_id``, or ``stdio`` / ``local``), ``mcp`` otherwise.
``Vault`` reads it when it writes a batch, so every door below the server stays unaware of it; a
batch written by the CLI or a watcher thread has none. A context variable, so it follows the call
into the worker thread that runs a synchronous tool, and never leaks into another call.

Likewise ``carrying``: the write request of another process this one carries out (``vaultsync.live.handoff``),
whose batch marks the request done inside its own transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True, slots=True)
class Carried:
    """A write request another process asked of this one, being carried out (``vaultsync.live.handoff``)."""

    request_id: int
    source: str
    """The source of the batch that carries it out: that batch marks the request done, in its transaction."""
    note_steps: Callable[[list[Any]], None] | None = None
    """Told the files a restore is about to write, before it writes them (to put them back after a crash)."""


_CARRIED: ContextVar[Carried | None] = ContextVar("vaultsync_carried", default=None)


def carried() -> Carried | None:
    """The write request being carried out here (None: this write is this process's own)."""
    return _CARRIED.get()


@contextlib.contextmanager
def carrying(request_id: int, source: str, note_steps: Callable[[list[Any]], None] | None = None) -> Iterator[None]:
    """Carry the write request ``request_id`` out inside this block (see ``Carried``)."""
    token = _CARRIED.set(Carried(request_id, source, note_steps))
    try:
        yield
    finally:
        _CARRIED.reset(token)

"""What one client can make the server hold, bounded: JSON nesting, requests in flight, HTTP
connections and the time a connection may take to send its request.

Each limit is a module constant, named where it is enforced, and each refusal is an answer the
client can read (a JSON-RPC error, an HTTP 503, a closed half-sent connection), never a crash.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any

import h11

logger = logging.getLogger(__name__)

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects a JSON-RPC message may have (tool arguments need a few)."""

MAX_IN_FLIGHT = 64
"""Requests one stdio connection may have unanswered at once; more are answered with an error at once."""

MAX_HTTP_CONNECTIONS = 256
"""Open HTTP connections; beyond it uvicorn answers 503 (``limit_concurrency``)."""

MAX_WAITING_FOR_HEADERS = 64
"""HTTP connections that have not finished sending a request; when another arrives the oldest is closed."""

HEADER_TIMEOUT_S = 10.0
"""How long an HTTP connection may take to send a request's headers (from connecting or its last response)."""

BODY_TIMEOUT_S = 60.0
"""How long an HTTP request's body may take to arrive once its headers have."""

KEEP_ALIVE_S = 5
"""How long an idle HTTP connection stays open between requests."""


def depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """How deeply ``value`` nests lists and dicts, counting no further than ``limit`` + 1 (iterative)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def valid_id(ident: Any) -> bool:
    """A JSON-RPC id MCP allows: a string or an integer (not a bool, a float, an object or null)."""
    return isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool))


class InFlight:
    """The requests a connection has sent and not yet had answered (by id; a repeated id counts twice)."""

    def __init__(self, limit: int = MAX_IN_FLIGHT) -> None:
        self.limit = limit
        self.pending: collections.Counter[str | int] = collections.Counter()

    @property
    def full(self) -> bool:
        return sum(self.pending.values()) >= self.limit

    def sent(self, ident: str | int) -> None:
        self.pending[ident] += 1

    def answered(self, ident: Any) -> None:
        """A response or error left for ``ident`` (or the client cancelled it: no response follows)."""
        if valid_id(ident) and self.pending.get(ident):
            self.pending[ident] -= 1
            if not self.pending[ident]:
                del self.pending[ident]


def guarded_h11(
    base: type,
    *,
    waiting_limit: int = MAX_WAITING_FOR_HEADERS,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    body_timeout_s: float = BODY_TIMEOUT_S,
) -> type:
    """uvicorn's h11 protocol with a deadline for each request to arrive and a cap on connections
    still sending one (the oldest is closed when the cap is reached): slow or half-sent requests
    cannot hold the server, and a client that sends its request promptly is always read."""
    waiting: collections.OrderedDict[int, Any] = collections.OrderedDict()

    class GuardedH11Protocol(base):
        _deadline: asyncio.TimerHandle | None = None
        _phase: object = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._watch()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop()
            super().connection_lost(exc)

        def _watch(self) -> None:
            """Arm the deadline of the phase the request is in (headers, body), or disarm it once read."""
            state = self.conn.their_state
            phase = "headers" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
            if phase == self._phase:
                return
            self._stop()
            self._phase = phase
            if phase is None or self.transport.is_closing():
                return
            if phase == "headers" and self.cycle is not None and not self.cycle.response_complete:
                return  # pipelined: the next request is read after this response
            timeout = header_timeout_s if phase == "headers" else body_timeout_s
            self._deadline = self.loop.call_later(timeout, self._expire, phase)
            waiting[id(self)] = self
            while len(waiting) > waiting_limit:
                _, oldest = waiting.popitem(last=False)
                oldest._expire("a newer request (too many connections sending one)")

        def _stop(self) -> None:
            waiting.pop(id(self), None)
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            self._phase = None

        def _expire(self, why: str) -> None:
            self._stop()
            if not self.transport.is_closing():
                logger.info("closing an HTTP connection that did not send its request in time (%s)", why)
                self.transport.close()

    return GuardedH11Protocol

"""How many streamable HTTP sessions a caller may hold open: at most ``MAX_SESSIONS_PER_CALLER`` each and
``MAX_SESSIONS`` in all, the oldest idle one closed to make room, so one caller opening sessions in a loop
cannot lock anyone else out (nor grow the server's memory without bound).

A session belongs to the caller whose credential opened it: an OAuth token's subject (with its issuer, through
any client), a manifest token's caller, or the one token of a plain server (all of its clients are one caller).
A session is idle while none of its requests is being served (an open GET stream counts as a request);
closing it is what its client would do (a DELETE), so the client's next request gets 404 and the client opens
a new session, as the MCP specification asks. When every session in the way is busy, the new one is refused
with 503 and nothing is closed. Sessions a client leaves alone end after ``SESSION_IDLE_S`` anyway.

Only the 2025-era (session) protocol opens sessions; the 2026 protocol keeps none.
"""

from __future__ import annotations

import collections
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

logger = logging.getLogger(__name__)

MAX_SESSIONS = 512
"""Open sessions in all (the SDK's own default, 10,000, takes about 400 MB)."""
MAX_SESSIONS_PER_CALLER = 32
"""Open sessions one caller may hold; opening another closes its oldest idle one."""
SESSION_IDLE_S = 30 * 60
"""A session without a request for this long is closed (the SDK's ``session_idle_timeout``)."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"


@dataclass
class _Session:
    caller: tuple[Any, ...]
    scope: Scope
    """The opening request's scope: its credential and Host, for closing the session as its client would."""
    busy: int = 0
    last_used: float = field(default_factory=time.monotonic)


class SessionBound:
    """ASGI app in front of the SDK's session manager that keeps the session limits (see the module)."""

    def __init__(self, app: App, *, total: int = MAX_SESSIONS, per_caller: int = MAX_SESSIONS_PER_CALLER) -> None:
        self.app = app
        self.total = total
        self.per_caller = per_caller
        self.sessions: collections.OrderedDict[str, _Session] = collections.OrderedDict()
        """Open sessions, least recently used first."""
        self.opening: collections.Counter[tuple[Any, ...]] = collections.Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        sid = headers.get(SESSION_HEADER, b"").decode("latin-1")
        if sid:
            return await self._within(sid, scope, receive, send)
        version = headers.get(VERSION_HEADER)
        if scope.get("method") != "POST" or (
            version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
        ):
            return await self.app(scope, receive, send)  # cannot open a session
        caller = _caller(scope)
        opened: list[str] = []

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                found = dict(message.get("headers") or []).get(SESSION_HEADER)
                if found:  # open from now on: counted as a session, no longer as one being opened
                    opened.append(found.decode("latin-1"))
                    self.sessions[opened[0]] = _Session(caller, dict(scope), busy=1)
                    self._opened(caller)
            await send(message)

        self.opening[caller] += 1  # counted before making room: requests opening sessions at once each get room
        try:
            refusal = await self._make_room(caller)
            if refusal is not None:
                return await _refuse(send, refusal)
            await self.app(scope, receive, noting)
        finally:
            if not opened:
                self._opened(caller)
            elif opened[0] in self.sessions:
                self._done(self.sessions[opened[0]])

    def _opened(self, caller: tuple[Any, ...]) -> None:
        self.opening[caller] -= 1
        if not self.opening[caller]:
            del self.opening[caller]

    async def _within(self, sid: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A request of an open session: the session is busy while it is served."""
        session = self.sessions.get(sid)
        if session is None or session.caller != _caller(scope):
            return await self.app(scope, receive, send)  # the SDK answers 404 (unknown, or not this caller's)
        self.sessions.move_to_end(sid)
        session.busy += 1
        status: list[int] = []

        async def watching(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watching)
        finally:
            self._done(session)
            if scope.get("method") == "DELETE" or status[:1] == [404]:
                self.sessions.pop(sid, None)  # closed by its client, or ended by the SDK (idle)

    @staticmethod
    def _done(session: _Session) -> None:
        session.busy -= 1
        session.last_used = time.monotonic()

    async def _make_room(self, caller: tuple[Any, ...]) -> str | None:
        """Close the oldest idle sessions in the way of the one ``caller`` is opening (counted in ``opening``);
        why not, when all of them are busy."""
        while sum(1 for s in self.sessions.values() if s.caller == caller) + self.opening[caller] > self.per_caller:
            if not await self._close_oldest_idle(caller):
                return f"too many open sessions for this caller: at most {self.per_caller}, all busy"
        while len(self.sessions) + sum(self.opening.values()) > self.total:
            if not await self._close_oldest_idle(None):
                return f"too many open sessions: at most {self.total}, all busy"
        return None

    async def _close_oldest_idle(self, caller: tuple[Any, ...] | None) -> bool:
        """Close the least recently used idle session (of ``caller``, or anyone's); False when none is idle."""
        idle = (sid for sid, s in self.sessions.items() if s.busy == 0 and (caller is None or s.caller == caller))
        sid = next(idle, None)
        if sid is None:
            return False
        session = self.sessions.pop(sid)
        logger.info("closing an idle HTTP session to make room for a new one (%s)", _said(session.caller))
        await self._delete(sid, session.scope)
        return True

    async def _delete(self, sid: str, opening: Scope) -> None:
        """End a session through the SDK exactly as its client would: a DELETE with its id and credential."""
        kept = [(k, v) for k, v in opening.get("headers") or [] if k in (b"host", b"authorization", VERSION_HEADER)]
        scope = {**opening, "method": "DELETE", "headers": [*kept, (SESSION_HEADER, sid.encode("latin-1"))]}

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            return None

        try:
            await self.app(scope, receive, discard)
        except Exception:  # the session is gone either way: forgotten here, and the SDK ends idle ones
            logger.warning("closing an idle HTTP session failed", exc_info=True)


def _caller(scope: Scope) -> tuple[Any, ...]:
    """Who a request comes from: an OAuth token's subject (whatever client it uses), else the token's client
    (a manifest token's caller, or the one token of a plain server)."""
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser):
        context = authorization_context(user)
        if context["subject"] is not None:
            return ("subject", context["issuer"], context["subject"])
        return ("client", context["client_id"])
    return ("",)


def _said(caller: tuple[Any, ...]) -> str:
    return "/".join(str(part) for part in caller if part) or "anonymous"


async def _refuse(send: Send, reason: str) -> None:
    logger.warning("refused a new HTTP session: %s", reason)
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": reason}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def bound_sessions(manager: Any) -> None:
    """Keep the session limits on the SDK's ``StreamableHTTPSessionManager`` (its public ``asgi_app``; its own
    ``max_sessions`` stays as a backstop at the same total)."""
    manager.max_sessions = MAX_SESSIONS
    manager.session_idle_timeout = SESSION_IDLE_S
    manager.asgi_app = SessionBound(manager.asgi_app)

"""The page's door: a token on every request, loopback Host and Origin only, read-only, strict headers.

Like a notebook server, ``vaultsync ui`` prints a URL carrying a random token; every request must
carry it (``?token=`` or the ``X-Vaultsync-Token`` header), compared in constant time. A page on
another site cannot read answers anyway (no CORS), and DNS rebinding (a hostile name resolving to
127.0.0.1) is refused by the Host check; a cross-site request is refused by the Origin check before
it does anything. Only GET and HEAD exist. Every answer forbids inline script, framing, and loading
anything from elsewhere (Content-Security-Policy), and is never cached or sent on as a referrer.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
TOKEN_HEADER = b"x-vaultsync-token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


class Guard:
    """ASGI middleware in front of the page's app, for a server listening on loopback ``port``."""

    def __init__(self, app: App, token: str, port: int) -> None:
        self.app = app
        self.token = token.encode()
        self.hosts = {f"{name}:{port}".encode() for name in LOOPBACK_NAMES}
        self.origins = {b"http://" + host for host in self.hosts}

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why the request is refused (status, reason), or None when it may go through."""
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", []):
            if name in headers:  # two Host (or token) headers: ambiguous, refuse
                return 400, f"repeated {name.decode('latin-1')} header"
            headers[name] = value
        if headers.get(b"host", b"").lower() not in self.hosts:
            return 403, "foreign Host header (only the loopback address this server listens on)"
        origin = headers.get(b"origin")
        if origin is not None and origin.lower() not in self.origins:
            return 403, "foreign Origin"
        if headers.get(b"sec-fetch-site", b"same-origin") not in (b"same-origin", b"none"):
            return 403, "cross-site request"
        if scope.get("method") not in ("GET", "HEAD"):
            return 405, "read-only: only GET and HEAD"
        given = headers.get(TOKEN_HEADER)
        if given is None:
            values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [])
            given = values[0].encode("latin-1") if len(values) == 1 else b""
        if not hmac.compare_digest(given, self.token):
            return 401, "missing or wrong token (open the URL vaultsync ui printed)"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return  # no websockets
        refused = self.refusal(scope)
        if refused is not None:
            status, reason = refused
            body = json.dumps({"error": reason}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        *HEADERS,
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":  # the app's own policy (a served file's) stands
                own = {name.lower() for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *(h for h in HEADERS if h[0] not in own)]
            await send(message)

        await self.app(scope, receive, send_with_headers)

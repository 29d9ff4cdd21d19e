"""The HTTP gate in front of one MCP endpoint of a resource server, before the MCP handler sees a byte.

In this order:

- a token in the query string (``access_token=…``) is refused: 400 ``invalid_request`` (it would be logged
  and cached along the way); only ``Authorization: Bearer`` is read;
- no token: 401 ``WWW-Authenticate: Bearer resource_metadata="…", scope="…"`` (no ``error``: RFC 6750 §3.1);
- a token that does not verify (``verify``): 401 ``error="invalid_token"`` with the reason; a token whose key
  cannot be checked now (the issuer's key set cannot be fetched): 503 ``temporarily_unavailable`` with the
  reason and ``Retry-After``, at once while the fetch is failing;
- a subject the vault's grant does not name: 403, without ``error``/``scope`` (asking for more scopes cannot
  help); a token holding no vault scope: 403 ``insufficient_scope`` naming ``vault:read``;
- a ``tools/call`` (alone or in a batch) of a tool the effective scopes do not allow: 403 ``insufficient_scope``
  naming the scope it needs, so a client can step up. The JSON-RPC body is read for this (up to the request
  limit; beyond it, 413) and handed on unchanged.

Each 403 is logged and, in the hardened mode, recorded in the audit log as a ``denial`` of the token's subject.

The request then goes on with the token's **effective** scopes (the token's, capped by the subject's grant) as
the SDK's authenticated user, which the server's middleware (``scopes.ScopeGate``, the hardened ``Guard``) read.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import anyio
import anyio.to_thread
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.authentication import AuthCredentials

from ...errors import VaultsyncError
from ...hardened.access import ADMIN, READ, Grant, ladder, level_of
from .. import probes
from ..registry import required_scope
from .scopes import allowed
from .verify import TokenVerifier, Unavailable

RETRY_AFTER_S = 5
"""The ``Retry-After`` of a 503: the issuer's keys could not be fetched (``keys.RETRY_MAX_S``)."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endpoint:
    """One protected MCP endpoint: where it answers, what it is called publicly, who may use it."""

    path: str
    """The route path on this server (the public URL's path)."""
    resource: str
    """The canonical URL: the audience its tokens must name."""
    metadata_url: str
    """Its Protected Resource Metadata (RFC 9728)."""
    grant: Grant
    scopes: tuple[str, ...]
    """The scopes to ask for (the 401 challenge) and that its metadata lists."""
    label: str = "this vault"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', "'") + '"'


def challenge(endpoint: Endpoint, error: str | None = None, description: str | None = None, scope: Any = ...) -> str:
    """The ``WWW-Authenticate`` value: ``scope`` ... = the endpoint's scopes; None: no scope parameter."""
    parts = []
    if error:
        parts.append(f"error={_quoted(error)}")
    if description:
        parts.append(f"error_description={_quoted(description)}")
    wanted = " ".join(endpoint.scopes) if scope is ... else scope
    if wanted:
        parts.append(f"scope={_quoted(wanted)}")
    parts.append(f"resource_metadata={_quoted(endpoint.metadata_url)}")
    return "Bearer " + ", ".join(parts)


class Gate:
    """ASGI: the checks of the module docstring, then ``app`` (the SDK's streamable HTTP app)."""

    def __init__(
        self, app: Any, endpoint: Endpoint, verifier: TokenVerifier, limit: int, audit: Any = None, vault: Any = None
    ) -> None:
        self.app = AuthContextMiddleware(app)
        self.endpoint = endpoint
        self.verifier = verifier
        self.limit = limit
        self.audit = audit
        """The hardened mode's audit log: a refusal of a verified token is recorded as a ``denial``."""
        self.vault = vault

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        ep = self.endpoint
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "access_token" in query:
            desc = "send the token in the Authorization header, never in the URL"
            return await _answer(send, 400, "invalid_request", desc, challenge(ep, "invalid_request", desc))
        raw = _bearer(scope)
        if raw is None:
            return await _answer(send, 401, None, "authentication required", challenge(ep))
        checked = await self.verifier.check(raw, ep.resource)
        if isinstance(checked, Unavailable):
            logger.info("could not check a bearer token: %s", checked)  # the key set's fetch logs the warning
            return await _answer(send, 503, "temporarily_unavailable", checked, None, retry_after=RETRY_AFTER_S)
        if isinstance(checked, str):
            logger.info("refused a bearer token: %s", checked)
            return await _answer(send, 401, "invalid_token", checked, challenge(ep, "invalid_token", checked))
        body = b""
        if scope["method"] == "POST":
            read = await _body(receive, self.limit)
            if read is None:
                return await _answer(send, 413, "invalid_request", f"request body over {self.limit} bytes", None)
            body, receive = read, _replay(read, receive)
        token = self._effective(checked)
        who = checked.subject or checked.client_id
        if not token.scopes:
            if level_of(checked.scopes) == 0:
                desc = f"the token holds none of the scopes {READ}, vault:write, {ADMIN}"
                await self._deny(who, _method(body), desc)
                head = challenge(ep, "insufficient_scope", desc, READ)
                return await _answer(send, 403, "insufficient_scope", desc, head)
            desc = f"{checked.subject} may not use {ep.label}"
            await self._deny(who, _method(body), desc)
            return await _answer(send, 403, "access_denied", desc, challenge(ep, scope=None))
        missing = _missing_scope(body, token.scopes) if body else None
        if missing is not None:
            tool, need = missing
            desc = f"{tool} needs the scope {need}"
            await self._deny(who, tool, f"{desc}; the token's scopes on {ep.label}: {' '.join(token.scopes)}")
            head = challenge(ep, "insufficient_scope", desc, need)
            return await _answer(send, 403, "insufficient_scope", desc, head)
        probes.name_subject(scope, who)
        scope = {**scope, "user": AuthenticatedUser(token), "auth": AuthCredentials(token.scopes)}
        await self.app(scope, receive, send)

    async def _deny(self, who: str, what: str, reason: str) -> None:
        """Log a refusal of a verified token, and record it in the audit log when there is one."""
        logger.info("refused %s (%s): %s", who, what, reason)
        if self.audit is None:
            return
        audit = self.audit
        try:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(
                    lambda: audit.denial(caller_id=who, tool_name=what, reason=reason, vault=self.vault)
                )
        except (VaultsyncError, OSError) as exc:  # the request is refused anyway
            logger.error("vaultsync: the audit log refused a record: %s", exc)

    def _effective(self, token: AccessToken) -> AccessToken:
        """``token`` with its scopes capped by the endpoint's grant (a static token: the operator's, all of them)."""
        if token.subject is None:
            level = level_of(token.scopes)
        else:
            groups = (token.claims or {}).get("groups") or []
            level = min(level_of(token.scopes), self.endpoint.grant.level(token.subject, groups))
        return token.model_copy(update={"scopes": list(ladder(level))})


def _bearer(scope: Any) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            text = value.decode("latin-1")
            if text[:7].lower() == "bearer " and text[7:].strip():
                return text[7:].strip()
            return None
    return None


async def _body(receive: Any, limit: int) -> bytes | None:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body"):
            break
    return bytes(body)


def _replay(body: bytes, receive: Any) -> Any:
    sent = False

    async def replayed() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _method(body: bytes) -> str:
    """The JSON-RPC method of ``body`` (the first of a batch), for the audit log; ``-`` when there is none."""
    try:
        data = json.loads(body) if body else None
    except (ValueError, RecursionError):
        return "-"
    first = data[0] if isinstance(data, list) and data else data
    method = first.get("method") if isinstance(first, dict) else None
    return method[:100] if isinstance(method, str) else "-"


def _missing_scope(body: bytes, scopes: list[str]) -> tuple[str, str] | None:
    """The first tool called in ``body`` that ``scopes`` do not allow, with the scope it needs."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None  # the MCP handler answers a malformed body
    for message in data if isinstance(data, list) else [data]:
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            continue
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if isinstance(name, str) and not allowed(name, scopes):
            return name, required_scope(name)
    return None


async def _answer(
    send: Any, status: int, error: str | None, description: str, www: str | None, retry_after: int | None = None
) -> None:
    shown = {"error": error, "error_description": description} if error else {"message": description}
    body = json.dumps(shown).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if www is not None:
        headers.append((b"www-authenticate", www.encode()))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    headers.append((b"cache-control", b"no-store"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

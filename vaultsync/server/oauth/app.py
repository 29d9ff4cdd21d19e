"""The HTTP app of a resource server: one protected MCP endpoint per vault, each with its own metadata document.

One vault: ``{public_url}/mcp``. Several (a hosted server, ``OAuthSettings.vaults``): ``{public_url}/vaults/<name>/mcp``
each, every one its own canonical URL, hence its own token audience: a token obtained for one vault is refused
by every other, and a subject sees only the vaults whose grant names it. Each endpoint's Protected Resource
Metadata (RFC 9728) is at ``/.well-known/oauth-protected-resource`` + the endpoint's path. The server answers on
the public URL's paths: a proxy in front forwards them unchanged.

Starting it fetches the issuer's metadata (``keys.IssuerKeys.discover``); an issuer that cannot be reached or
names another issuer stops the start with one line.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
from mcp.server import MCPServer
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.routes import cors_middleware
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.auth import ProtectedResourceMetadata
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route

from ...hardened.access import READ, WRITE, Grant, OAuthSettings
from ..sdk import lowlevel_server
from ..sessions import bound_sessions
from .gate import Endpoint, Gate
from .keys import IssuerKeys
from .verify import TokenCheck, TokenVerifier


@dataclass(frozen=True)
class Protected:
    """One vault to serve behind OAuth: its server, its name on a hosted server (None: the one vault), its grant."""

    mcp: MCPServer
    vault: str | None
    grant: Grant
    writes: bool
    audit: Any = None
    """The hardened mode's audit log (``AuditLog``), which records the gate's refusals too."""


def endpoint(settings: OAuthSettings, vault: str | None, grant: Grant, writes: bool) -> Endpoint:
    resource = settings.resource(vault)
    parts = urlsplit(resource)
    return Endpoint(
        path=parts.path,
        resource=resource,
        metadata_url=f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}",
        grant=grant,
        scopes=(READ, WRITE) if writes else (READ,),
        label=f"vault {vault!r}" if vault else "this vault",
    )


def metadata_routes(settings: OAuthSettings, ep: Endpoint, root: bool = False) -> list[Route]:
    """The endpoint's metadata document at its RFC 9728 path; ``root``: also at
    ``/.well-known/oauth-protected-resource`` (the one vault of a server: for clients that look there first)."""
    metadata = ProtectedResourceMetadata.model_validate(
        {
            "resource": ep.resource,
            "authorization_servers": [settings.issuer],
            "scopes_supported": list(ep.scopes),
            "bearer_methods_supported": ["header"],
            "resource_name": settings.resource_name or "vaultsync",
        }
    )
    handler = cors_middleware(ProtectedResourceMetadataHandler(metadata).handle, ["GET", "OPTIONS"])
    paths = [urlsplit(ep.metadata_url).path] + (["/.well-known/oauth-protected-resource"] if root else [])
    return [Route(path, endpoint=handler, methods=["GET", "OPTIONS"]) for path in dict.fromkeys(paths)]


def public_security(settings: OAuthSettings, base: TransportSecuritySettings) -> TransportSecuritySettings:
    """``base`` with the public URL's host (with any port, or none: a proxy may forward the name alone) and its
    origin allowed too."""
    parts = urlsplit(settings.public_url)
    name = parts.hostname or ""
    name = f"[{name}]" if ":" in name else name
    hosts = [name, f"{name}:*"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*base.allowed_hosts, *hosts],
        allowed_origins=[*base.allowed_origins, f"{parts.scheme}://{parts.netloc}"],
    )


def resource_server_app(
    settings: OAuthSettings,
    vaults: Sequence[Protected],
    *,
    host: str,
    limit: int,
    security: TransportSecuritySettings,
    static: TokenCheck | None = None,
    routes: Sequence[BaseRoute] = (),
    keys: IssuerKeys | None = None,
) -> Starlette:
    """The app: ``routes`` (the probes), each vault's metadata and its gated MCP endpoint."""
    keys = keys or IssuerKeys(settings)
    introspection = None
    if settings.introspection_file is not None:
        from .introspect import Introspector

        introspection = Introspector(settings, keys)
    verifier = TokenVerifier(settings, keys, static, introspection)
    security = public_security(settings, security)
    inner: list[Starlette] = []
    all_routes: list[BaseRoute] = list(routes)
    for vault in vaults:
        ep = endpoint(settings, vault.vault, vault.grant, vault.writes)
        app = lowlevel_server(vault.mcp).streamable_http_app(
            streamable_http_path=ep.path, max_request_body_size=limit, transport_security=security, host=host
        )
        bound_sessions(lowlevel_server(vault.mcp).session_manager)  # sessions per subject, oldest idle closed first
        inner.append(app)
        gate = Gate(app, ep, verifier, limit, audit=vault.audit, vault=vault.vault)
        all_routes += [*metadata_routes(settings, ep, root=len(vaults) == 1), Route(ep.path, endpoint=gate)]

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        await keys.discover()
        if introspection is not None:
            await introspection.start()
        try:
            async with anyio.create_task_group() as background:
                keys.background = background  # a stale key set is fetched again while requests go on
                try:
                    async with contextlib.AsyncExitStack() as stack:
                        for app in inner:
                            await stack.enter_async_context(app.router.lifespan_context(app))
                        yield
                finally:
                    background.cancel_scope.cancel()
        finally:
            keys.background = None
            await keys.aclose()

    return Starlette(routes=all_routes, lifespan=lifespan)

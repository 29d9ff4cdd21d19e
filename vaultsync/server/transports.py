"""Serving over streamable HTTP (loopback by default, Origin/Host checked, a bearer token on loopback too, request size
limit, connections and request time bounded, HTTPS with a certificate), and what both transports share; stdio is in
``stdio``. The limits themselves are in ``limits``."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import socket
from pathlib import Path
from typing import Any

from mcp.server import MCPServer
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings

from ..errors import ConfigError, VaultsyncError
from . import probes
from .limits import KEEP_ALIVE_S, MAX_HTTP_CONNECTIONS, guarded_h11
from .sdk import lowlevel_server
from .sessions import bound_sessions

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest JSON-RPC message (stdio line or HTTP request body) the server reads."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def vaultsync_error(exc: BaseException) -> VaultsyncError | None:
    """The VaultsyncError ``exc`` is, or the only one inside its exception groups (said as one line)."""
    if isinstance(exc, VaultsyncError):
        return exc
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return vaultsync_error(exc.exceptions[0])
    return None


# ------------------------------------------------------------------ HTTP


class StaticTokenVerifier:
    """Accepts exactly one bearer token (compared in constant time)."""

    def __init__(self, token: str) -> None:
        self.token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self.token.encode()):
            return AccessToken(token=token, client_id="vaultsync-user", scopes=["vault"])
        return None


class HashedTokenVerifier:
    """Accepts the bearer tokens whose SHA-256 a manifest lists (``TokenRule``); each token stands for
    its own caller (``client_id`` = the rule's ``caller_id``). Tokens are never held in clear."""

    def __init__(self, rules: Any) -> None:
        self.rules = tuple(rules)

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        found = None
        for rule in self.rules:  # every rule compared, in constant time each
            if hmac.compare_digest(digest, rule.sha256):
                found = rule
        if found is None:
            return None
        return AccessToken(token=token, client_id=found.caller_id, scopes=["vault"])


def parse_bind(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[::1]:PORT`` or just ``PORT`` (loopback)."""
    text = value.strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
        if not 0 < number < 65536:
            raise ValueError
    except ValueError:
        raise ConfigError(f"--http {value!r}: give HOST:PORT, e.g. 127.0.0.1:8765") from None
    return host, number


def read_token(path: Path) -> str:
    """The bearer token in ``path``; refused when other users may read or change the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            token = handle.read().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read --token-file {path}: {exc.strerror}") from None
    if os.name == "posix" and mode & 0o077:
        raise ConfigError(
            f"the token file {path} is readable or writable by other users (mode {mode & 0o777:o}); "
            f"make it private: chmod 600 {path}"
        )
    if len(token) < 16:
        raise ConfigError(f"the token in {path} is too short; use at least 16 characters (e.g. openssl rand -hex 32)")
    return token


def _host_names(host: str) -> list[str]:
    names = {"127.0.0.1", "localhost", "[::1]"}
    if host not in ("0.0.0.0", "::"):
        names.add(f"[{host}]" if ":" in host else host)
    else:
        try:
            hostname = socket.gethostname()
            names.update({hostname, socket.getfqdn()})
            for info in socket.getaddrinfo(hostname, None):
                addr = str(info[4][0])
                names.add(f"[{addr}]" if ":" in addr else addr)
        except OSError:
            pass
    return sorted(names)


def http_app(
    mcp: MCPServer,
    host: str,
    port: int,
    *,
    token: str | None,
    limit: int = MAX_MESSAGE_BYTES,
    tls: bool = False,
    verifier: Any = None,
    served: Any = None,
    oauth: Any = None,
    protected: Any = None,
) -> Any:
    """The Starlette app for ``/mcp``: DNS-rebinding checks always on, bearer auth always: ``token`` (or
    a ``verifier`` of several tokens, ``HashedTokenVerifier``, or ``oauth``); with the ``served`` vault, ``/health`` and
    ``/ready`` beside it, without a token (``probes``). With ``oauth`` (``OAuthSettings``): an OAuth resource
    server (``oauth.app``) for ``mcp`` or the ``protected`` vaults, the static tokens still accepted."""
    if token is None and verifier is None and oauth is None:
        raise ConfigError("an HTTP server needs a bearer token (or OAuth), loopback too: other users can reach it")
    names = _host_names(host)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:*" for n in names],
        allowed_origins=[f"{scheme}://{n}:*" for n in names for scheme in ("http", "https")],
    )
    if oauth is not None:
        from .oauth.app import Protected, resource_server_app

        if protected is None:
            writes = bool(served is not None and served.allow_writes)
            protected = [Protected(mcp, None, oauth.grant, writes)]
        static = verifier if verifier is not None else (StaticTokenVerifier(token) if token is not None else None)
        routes = probes.routes(served) if served is not None else []
        return resource_server_app(
            oauth, protected, host=host, limit=limit, security=security, static=static, routes=routes
        )
    shown = f"[{host}]" if ":" in host else host
    base = f"{'https' if tls else 'http'}://{shown}:{port}"
    auth = AuthSettings.model_validate(
        {
            "issuer_url": base,
            "resource_server_url": f"{base}/mcp",
            "validate_token_resource": False,
            "required_scopes": ["vault"],
        }
    )
    if verifier is None:
        assert token is not None  # (checked above)
        verifier = StaticTokenVerifier(token)
    # MCPServer takes a token verifier only in its constructor; the low-level app takes one here
    app = lowlevel_server(mcp).streamable_http_app(
        streamable_http_path="/mcp",
        max_request_body_size=limit,
        transport_security=security,
        host=host,
        auth=auth,
        token_verifier=verifier,
    )
    bound_sessions(lowlevel_server(mcp).session_manager)
    if served is not None:
        app.router.routes[0:0] = probes.routes(served)
    return app


LOCAL_TOKEN_FILE = "http-token"
"""The file in the user data directory holding the token local HTTP clients send (made on first use, mode 600)."""


def local_token_file() -> Path:
    """Where ``serve --http`` on loopback keeps its bearer token when no --token-file is given."""
    from ..config import data_dir

    return data_dir() / LOCAL_TOKEN_FILE


def local_token(path: Path) -> str:
    """The token in ``path``, which is made (a random token, readable by this user only) when it does not exist.

    The file appears whole or not at all (written aside, then linked into place), so two servers starting
    at once agree on one token."""
    if not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            aside = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
            fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(secrets.token_urlsafe(32) + "\n")
                os.link(aside, path)
            except FileExistsError:
                pass  # another server made it first: use theirs
            finally:
                aside.unlink(missing_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot make the bearer token file {path} ({exc.strerror}): name a token file of your own"
            ) from None
    return read_token(path)


def resolve_token(host: str, token_file: Path | None) -> tuple[str, bool, Path | None]:
    """The bearer token to require, whether it was generated here (show it once), and the file it is in.

    Every HTTP door takes a token, loopback included: another user of this machine can connect to
    127.0.0.1 too. On loopback without ``token_file`` it is the user's own (``local_token_file``), so client
    configurations keep working across restarts; beyond loopback one is generated for this run."""
    if token_file is not None:
        return read_token(token_file), False, token_file
    if host in LOOPBACK:
        path = local_token_file()
        return local_token(path), False, path
    return secrets.token_urlsafe(32), True, None


def check_tls(cert: Path | None, key: Path | None) -> tuple[str, str] | None:
    """The certificate and key files for HTTPS (both or neither), checked readable."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ConfigError("HTTPS needs both --tls-cert and --tls-key")
    for name, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not path.is_file():
            raise ConfigError(f"{name} {path} is not a readable file")
    return str(cert), str(key)


def clear_text_warning(host: str, tls: tuple[str, str] | None) -> str | None:
    """The warning to show when the bearer token would cross the network unencrypted (None when it does not)."""
    if tls is not None or host in LOOPBACK:
        return None
    return (
        f"WARNING: serving plain HTTP on {host}, beyond this machine: the bearer token and every note travel "
        "in clear text; give --tls-cert and --tls-key, or put a TLS proxy in front"
    )


async def serve_http(
    mcp: MCPServer,
    host: str,
    port: int,
    *,
    token: str | None,
    limit: int = MAX_MESSAGE_BYTES,
    tls: tuple[str, str] | None = None,
    verifier: Any = None,
    served: Any = None,
    oauth: Any = None,
    protected: Any = None,
    trusted_proxies: tuple[str, ...] = (),
    metrics: bool = False,
) -> None:
    """Serve streamable HTTP at ``http(s)://HOST:PORT/mcp`` until SIGINT/SIGTERM (limits: ``guards``), with
    ``/health`` and ``/ready`` for the ``served`` vault (or vaults), and one access-log line per request
    (``probes``; ``trusted_proxies``: whose ``X-Forwarded-For`` names the client there; ``metrics``: answer
    ``/metrics``)."""
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    failed: list[VaultsyncError] = []
    app = _quiet_startup(
        probes.logged(
            http_app(
                mcp,
                host,
                port,
                token=token,
                limit=limit,
                tls=tls is not None,
                verifier=verifier,
                served=served,
                oauth=oauth,
                protected=protected,
            ),
            trusted_proxies,
            probes.metrics_of(served) if metrics else None,
        ),
        failed,
    )
    if probes.access.level == logging.NOTSET:
        probes.access.setLevel(logging.INFO)  # the access log is on unless the embedding program says otherwise
    cert, key = tls if tls is not None else (None, None)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        http=guarded_h11(H11Protocol),
        h11_max_incomplete_event_size=64 * 1024,
        limit_concurrency=MAX_HTTP_CONNECTIONS,
        timeout_keep_alive=KEEP_ALIVE_S,
        ssl_certfile=cert,
        ssl_keyfile=key,
    )
    quiet = _Unless(failed)  # uvicorn's own line for it: the error says it better
    logging.getLogger("uvicorn.error").addFilter(quiet)
    try:
        await uvicorn.Server(config).serve()
    except SystemExit:
        if failed:  # the vault could not be opened: nothing was served
            raise failed[0] from None
        raise
    finally:
        logging.getLogger("uvicorn.error").removeFilter(quiet)


class _Unless(logging.Filter):
    """Drops log records once ``failed`` holds an error (it is reported instead)."""

    def __init__(self, failed: list[VaultsyncError]) -> None:
        super().__init__()
        self.failed = failed

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.failed


def _quiet_startup(app: Any, failed: list[VaultsyncError]) -> Any:
    """``app`` whose lifespan startup, when it fails with a VaultsyncError (a vault that cannot be
    opened), puts the error in ``failed`` and tells the server to exit without logging a traceback."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            return await app(scope, receive, send)
        held: list[Any] = []

        async def sending(message: Any) -> None:
            if message["type"] == "lifespan.startup.failed":
                held.append(message)  # sent below, once the error is known
            else:
                await send(message)

        try:
            await app(scope, receive, sending)
        except BaseException as exc:
            if not held:
                raise
            found = vaultsync_error(exc)
            if found is None:
                await send(held[0])
                raise
            failed.append(found)
            await send({"type": "lifespan.startup.failed", "message": ""})

    return wrapped

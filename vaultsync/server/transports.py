"""Serving: stdio (protocol only on stdout, bad input answered, size- and depth-limited, requests in
flight bounded) and streamable HTTP (loopback by default, Origin/Host checked, bearer token beyond
loopback, request size limit, connections and request time bounded, HTTPS with a certificate).
The limits themselves are in ``guards``."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server import MCPServer
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, JSONRPCResponse, jsonrpc_message_adapter
from pydantic import ValidationError

from ..errors import ConfigError, VaultsyncError
from . import probes
from .limits import KEEP_ALIVE_S, MAX_HTTP_CONNECTIONS, MAX_JSON_DEPTH, InFlight, depth, guarded_h11, valid_id
from .sdk import lowlevel_server

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest JSON-RPC message (stdio line or HTTP request body) the server reads."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")


# ------------------------------------------------------------------ stdio


END_OF_INPUT_S = 10.0
"""How long a stdio server whose input ended waits for the requests it already read to be answered."""


class GuardedLines:
    """stdin as JSON-RPC lines: oversized lines and malformed JSON are answered with a JSON-RPC
    error (``id: null`` when it cannot be known) instead of being dropped, and never buffered whole.

    Lines are read on a daemon thread, so a blocked read never keeps the process from exiting. At
    the end of the input the stream stays open until every request already read is answered: the
    SDK stops serving when its input ends, and would drop a request still being handled.
    """

    _OVERSIZED = b"\x00oversized"

    def __init__(self, raw: BinaryIO, limit: int = MAX_MESSAGE_BYTES) -> None:
        self.raw = raw
        self.limit = limit
        self.reply: Any = None
        self.in_flight = InFlight()
        self.ready = anyio.Event()
        self._answered = anyio.Event()
        self._send, self._recv = anyio.create_memory_object_stream[bytes](16)

    def __aiter__(self) -> Any:
        return self._lines()

    def _pump(self, token: Any) -> None:
        """Split fd reads into lines (os.read holds no Python lock, so exiting never waits on it)."""
        fd = self.raw.fileno()
        pending, skipping = bytearray(), False
        try:
            while chunk := os.read(fd, 1 << 16):
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    if not skipping:
                        pending += chunk[start : end + 1]
                    line = self._OVERSIZED if skipping or len(pending) > self.limit else bytes(pending)
                    pending.clear()
                    skipping = False
                    anyio.from_thread.run(self._send.send, line, token=token)
                    start = end + 1
                if not skipping:
                    pending += chunk[start:]
                    if len(pending) > self.limit:  # too long already: drop it and skip to its end
                        pending.clear()
                        skipping = True
            if pending or skipping:
                anyio.from_thread.run(self._send.send, self._OVERSIZED if skipping else bytes(pending), token=token)
        except Exception:  # the event loop is gone: nobody is listening any more
            logger.debug("stdin reader stopped", exc_info=True)
        finally:
            try:
                anyio.from_thread.run_sync(self._send.close, token=token)
            except Exception:
                pass

    async def _lines(self) -> Any:
        await self.ready.wait()
        token = anyio.lowlevel.current_token()
        threading.Thread(target=self._pump, args=(token,), name="vaultsync-stdin", daemon=True).start()
        async for line in self._recv:
            if line is self._OVERSIZED:
                await self._error(None, INVALID_REQUEST, f"message too large: the limit is {self.limit} bytes")
                continue
            text = line.decode("utf-8", "replace")
            if not text.strip():
                continue
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                await self._error(None, PARSE_ERROR, f"Parse error: not valid JSON ({exc.msg} at column {exc.colno})")
                continue
            except RecursionError:
                await self._error(None, INVALID_REQUEST, f"message nested too deeply: at most {MAX_JSON_DEPTH} levels")
                continue
            refusal = self._refusal(data)
            if refusal is not None:
                ident = data.get("id") if isinstance(data, dict) else None
                await self._error(ident if valid_id(ident) else None, INVALID_REQUEST, refusal)
                continue
            method, ident = data.get("method"), data.get("id")
            if method is not None and ident is not None:
                if self.in_flight.full:
                    await self._error(
                        ident,
                        INVALID_REQUEST,
                        f"too many requests in flight: at most "
                        f"{self.in_flight.limit} unanswered at once; wait for replies",
                    )
                    continue
                self.in_flight.sent(ident)
            elif method == "notifications/cancelled" and isinstance(data.get("params"), dict):
                self.in_flight.answered(data["params"].get("requestId"))
            yield text
        with anyio.move_on_after(END_OF_INPUT_S):  # end of input: answer what was read before stopping,
            while self.in_flight.pending:  # but never linger for a request the SDK drops unanswered
                self._answered = anyio.Event()
                await self._answered.wait()

    @staticmethod
    def _refusal(data: Any) -> str | None:
        """Why a parsed message is not one the server takes (None when it is)."""
        if depth(data) > MAX_JSON_DEPTH:
            return f"message nested too deeply: at most {MAX_JSON_DEPTH} levels"
        if isinstance(data, dict) and "id" in data and not valid_id(data["id"]):
            return "Invalid Request: the id must be a string or an integer"
        try:
            jsonrpc_message_adapter.validate_python(data, by_name=False)
        except (ValidationError, RecursionError):
            return "Invalid Request: expected a JSON-RPC 2.0 request, notification or response object"
        return None

    async def _error(self, ident: str | int | None, code: int, message: str) -> None:
        logger.info("refused a stdio message: %s", message)
        error = JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(code=code, message=message))
        await self.reply.send(SessionMessage(error))

    async def forward(self, from_server: Any, stdout: Any) -> None:
        """Pass the server's messages to stdout, counting each response as its request answered."""
        async with from_server, stdout:  # closing stdout's stream lets the SDK's writer finish
            async for message in from_server:
                await stdout.send(message)
                if isinstance(message.message, JSONRPCResponse | JSONRPCError):
                    self.in_flight.answered(message.message.id)
                    self._answered.set()


async def serve_stdio(mcp: MCPServer, *, limit: int = MAX_MESSAGE_BYTES) -> None:
    """Serve one client on stdin/stdout until stdin closes or SIGINT/SIGTERM arrives."""
    stdin = GuardedLines(sys.stdin.buffer, limit)
    lowlevel = lowlevel_server(mcp)  # MCPServer.run_stdio_async takes no streams: run ours on the low-level server
    with _one_error():
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_on_signals, tg.cancel_scope)
            # (the ignore below) GuardedLines stands in for the SDK's async stdin
            async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
                stdin.reply = write_stream
                server_out, to_stdout = anyio.create_memory_object_stream[SessionMessage](0)
                tg.start_soon(stdin.forward, to_stdout, write_stream)
                stdin.ready.set()
                async with server_out:
                    await lowlevel.run(read_stream, server_out, lowlevel.create_initialization_options())
            tg.cancel_scope.cancel()


@contextlib.contextmanager
def _one_error() -> Iterator[None]:
    """A VaultsyncError (a vault that cannot be opened in the lifespan) as itself, not inside task
    groups' exception groups: the command line says it in one line."""
    try:
        yield
    except BaseExceptionGroup as group:
        found = _vaultsync_error(group)
        if found is None:
            raise
        raise found from None


def _vaultsync_error(exc: BaseException) -> VaultsyncError | None:
    if isinstance(exc, VaultsyncError):
        return exc
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _vaultsync_error(exc.exceptions[0])
    return None


async def _cancel_on_signals(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            logger.info("received signal %d, stopping", signum)
            scope.cancel()
            return


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
    """The Starlette app for ``/mcp``: DNS-rebinding checks always on, bearer auth when ``token`` (or
    a ``verifier`` of several tokens, ``HashedTokenVerifier``); with the ``served`` vault, ``/health`` and
    ``/ready`` beside it, without a token (``probes``). With ``oauth`` (``OAuthSettings``): an OAuth resource
    server (``oauth.app``) for ``mcp`` or the ``protected`` vaults, the static tokens still accepted."""
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
    auth = None
    if token is not None or verifier is not None:
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
            assert token is not None
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
    if served is not None:
        app.router.routes[0:0] = probes.routes(served)
    return app


def resolve_token(host: str, token_file: Path | None) -> tuple[str | None, bool]:
    """The bearer token to require (None on loopback without a file) and whether it was generated."""
    if token_file is not None:
        return read_token(token_file), False
    if host in LOOPBACK:
        return None, False
    return secrets.token_urlsafe(32), True


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
) -> None:
    """Serve streamable HTTP at ``http(s)://HOST:PORT/mcp`` until SIGINT/SIGTERM (limits: ``guards``), with
    ``/health`` and ``/ready`` for the ``served`` vault (or vaults), and one access-log line per request
    (``probes``)."""
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
            )
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
            found = _vaultsync_error(exc)
            if found is None:
                await send(held[0])
                raise
            failed.append(found)
            await send({"type": "lifespan.startup.failed", "message": ""})

    return wrapped

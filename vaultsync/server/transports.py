"""Serving: stdio (protocol only on stdout, bad input answered, size-limited) and streamable HTTP
(loopback by default, Origin/Host checked, bearer token beyond loopback, request size limit)."""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
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
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, jsonrpc_message_adapter
from pydantic import ValidationError

from ..errors import ConfigError
from .sdk import lowlevel_server

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest JSON-RPC message (stdio line or HTTP request body) the server reads."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")


# ------------------------------------------------------------------ stdio


class GuardedLines:
    """stdin as JSON-RPC lines: oversized lines and malformed JSON are answered with a JSON-RPC
    error (``id: null`` when it cannot be known) instead of being dropped, and never buffered whole.

    Lines are read on a daemon thread, so a blocked read never keeps the process from exiting.
    """

    _OVERSIZED = b"\x00oversized"

    def __init__(self, raw: BinaryIO, limit: int = MAX_MESSAGE_BYTES) -> None:
        self.raw = raw
        self.limit = limit
        self.reply: Any = None
        self.ready = anyio.Event()
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
                        pending += chunk[start:end + 1]
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
            except ValueError as exc:
                await self._error(None, PARSE_ERROR, f"Parse error: not valid JSON ({exc.msg} at column {exc.colno})")
                continue
            try:
                jsonrpc_message_adapter.validate_python(data, by_name=False)
            except ValidationError:
                ident = data.get("id") if isinstance(data, dict) else None
                ident = ident if isinstance(ident, str | int) and not isinstance(ident, bool) else None
                await self._error(ident, INVALID_REQUEST, "Invalid Request: expected a JSON-RPC 2.0 request, "
                                  "notification or response object")
                continue
            yield text

    async def _error(self, ident: str | int | None, code: int, message: str) -> None:
        logger.info("refused a stdio message: %s", message)
        error = JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(code=code, message=message))
        await self.reply.send(SessionMessage(error))


async def serve_stdio(mcp: MCPServer, *, limit: int = MAX_MESSAGE_BYTES) -> None:
    """Serve one client on stdin/stdout until stdin closes or SIGINT/SIGTERM arrives."""
    stdin = GuardedLines(sys.stdin.buffer, limit)
    lowlevel = lowlevel_server(mcp)  # MCPServer.run_stdio_async takes no streams: run ours on the low-level server
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_on_signals, tg.cancel_scope)
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
            stdin.reply = write_stream
            stdin.ready.set()
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
        tg.cancel_scope.cancel()


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
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"cannot read --token-file {path}: {exc.strerror}") from None
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


def http_app(mcp: MCPServer, host: str, port: int, *, token: str | None, limit: int = MAX_MESSAGE_BYTES) -> Any:
    """The Starlette app for ``/mcp``: DNS-rebinding checks always on, bearer auth when ``token``."""
    names = _host_names(host)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:*" for n in names],
        allowed_origins=[f"{scheme}://{n}:*" for n in names for scheme in ("http", "https")],
    )
    auth = verifier = None
    if token is not None:
        shown = f"[{host}]" if ":" in host else host
        base = f"http://{shown}:{port}"
        auth = AuthSettings(issuer_url=base, resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
                            validate_token_resource=False, required_scopes=["vault"])
        verifier = StaticTokenVerifier(token)
    # MCPServer takes a token verifier only in its constructor; the low-level app takes one here
    return lowlevel_server(mcp).streamable_http_app(
        streamable_http_path="/mcp", max_request_body_size=limit, transport_security=security, host=host,
        auth=auth, token_verifier=verifier,
    )


def resolve_token(host: str, token_file: Path | None) -> tuple[str | None, bool]:
    """The bearer token to require (None on loopback without a file) and whether it was generated."""
    if token_file is not None:
        return read_token(token_file), False
    if host in LOOPBACK:
        return None, False
    return secrets.token_urlsafe(32), True


async def serve_http(mcp: MCPServer, host: str, port: int, *, token: str | None,
                     limit: int = MAX_MESSAGE_BYTES) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until SIGINT/SIGTERM."""
    import uvicorn

    app = http_app(mcp, host, port, token=token, limit=limit)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                            h11_max_incomplete_event_size=64 * 1024)
    await uvicorn.Server(config).serve()

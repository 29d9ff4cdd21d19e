"""Serving over stdio: the protocol only on stdout, bad input answered (a JSON-RPC error with the request's id
when it can be read, never dropped, never left in flight: invalid UTF-8 and text the SDK could not read included), lines
size- and depth-limited and never buffered whole, requests in flight bounded, and what was read before the input
ended answered before the server stops. The limits themselves are in ``limits``."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any, BinaryIO

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, JSONRPCResponse, jsonrpc_message_adapter
from pydantic import ValidationError

from .limits import MAX_JSON_DEPTH, InFlight, depth, valid_id
from .sdk import lowlevel_server
from .transports import MAX_MESSAGE_BYTES, vaultsync_error

logger = logging.getLogger("vaultsync.server.transports")  # its lines, under the name they always had

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
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:  # refused, never replaced: the request is answered with its id
                await self._error(
                    _readable_id(line),
                    PARSE_ERROR,
                    f"Parse error: not valid UTF-8 (byte 0x{line[exc.start]:02x} at offset {exc.start})",
                )
                continue
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
            refusal = self._refusal(data, text)
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
    def _refusal(data: Any, text: str) -> str | None:
        """Why a parsed message is not one the server takes (None when it is). ``text`` is validated exactly as
        the SDK will parse it: a message the SDK could not read would be dropped unanswered, and left in flight."""
        if depth(data) > MAX_JSON_DEPTH:
            return f"message nested too deeply: at most {MAX_JSON_DEPTH} levels"
        if isinstance(data, dict) and "id" in data and not valid_id(data["id"]):
            return "Invalid Request: the id must be a string or an integer"
        try:
            jsonrpc_message_adapter.validate_json(text, by_name=False)
        except (ValidationError, RecursionError, ValueError):
            if _lone_surrogate(data):
                return "Invalid Request: a string holds a lone surrogate escape (such as \\ud800), which is not text"
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


def _readable_id(line: bytes) -> str | int | None:
    """The id of a message that is not valid UTF-8, when it can still be read (None otherwise)."""
    try:
        data = json.loads(line.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    ident = data.get("id") if isinstance(data, dict) else None
    return ident if valid_id(ident) else None


def _lone_surrogate(data: Any) -> bool:
    """Whether a string (or key) in parsed JSON holds a UTF-16 surrogate that is not part of a pair."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except (ValueError, RecursionError):
        return False
    return False


async def serve_stdio(mcp: MCPServer, *, limit: int = MAX_MESSAGE_BYTES) -> None:
    """Serve one client on stdin/stdout until stdin closes or SIGINT/SIGTERM arrives."""
    stdin = GuardedLines(sys.stdin.buffer, limit)
    lowlevel = lowlevel_server(mcp)  # MCPServer.run_stdio_async takes no streams: run ours on the low-level server
    with _one_error():
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_on_signals, tg.cancel_scope)
            async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]  # GuardedLines stands in for the SDK's async stdin
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
        found = vaultsync_error(group)
        if found is None:
            raise
        raise found from None


async def _cancel_on_signals(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            logger.info("received signal %d, stopping", signum)
            scope.cancel()
            return

"""Malformed messages on a real stdio server, sent as raw bytes: each gets a JSON-RPC error (with its id when
it can be read), none is dropped, and none stays counted in flight."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from support.mcp_helpers import history_under

from vaultsync.server import limits

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


def call(ident: Any, path: str) -> bytes:
    """A read_note call whose path is spliced in as raw JSON text (escapes and bytes kept as given)."""
    head = json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call"})[:-1]
    return (
        head.encode() + b', "params": {"name": "read_note", "arguments": {"path": "' + path.encode("latin-1") + b'"}}}'
    )


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return history_under(tmp_path_factory.mktemp("stdio-malformed"))


@pytest.mark.slow
def test_every_malformed_message_is_answered_and_none_stays_in_flight(history: dict) -> None:
    lone = [call(i, "\\ud800.md") for i in range(1, limits.MAX_IN_FLIGHT + 11)]  # more than may be in flight
    bad_utf8 = [
        call("u", "\xff.md"),  # invalid UTF-8 inside a string: refused, not replaced
        b'{"jsonrpc": "2.0", "id": \xfe 9, "method": "tools/list"}',  # nor can its id be read
        call("pair", "\\udc00\\ud800.md"),  # a low surrogate before a high one: not a pair
    ]
    after = call("after", "Inbox.md")
    lines = [json.dumps(INIT).encode(), b'{"jsonrpc": "2.0", "method": "notifications/initialized"}']
    lines += [*lone, *bad_utf8, after]
    done = subprocess.run(
        [sys.executable, "-m", "vaultsync", "--db", str(history["db"]), "serve", str(history["root"])],
        input=b"".join(line + b"\n" for line in lines),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    replies = {}
    for line in done.stdout.splitlines():
        reply = json.loads(line)
        replies.setdefault(json.dumps(reply.get("id")), []).append(reply)
    for i in range(1, limits.MAX_IN_FLIGHT + 11):
        (reply,) = replies[str(i)]
        assert reply["error"]["code"] == -32600 and "lone surrogate" in reply["error"]["message"], reply
    (utf8,) = replies['"u"']
    assert utf8["error"]["code"] == -32700 and "not valid UTF-8 (byte 0xff" in utf8["error"]["message"]
    (unreadable,) = replies["null"]
    assert unreadable["error"]["code"] == -32700 and "not valid UTF-8 (byte 0xfe" in unreadable["error"]["message"]
    assert "lone surrogate" in replies['"pair"'][0]["error"]["message"]
    (answer,) = replies['"after"']  # a good request after them all: served, not refused as too many in flight
    assert "error" not in answer and "# Inbox" in answer["result"]["structuredContent"]["content"], answer
    assert b"Traceback" not in done.stderr

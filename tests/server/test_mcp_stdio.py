"""``vaultsync serve`` over a real stdio subprocess: the official client in both eras, the watcher
beside the server, and protocol abuse answered on the wire while the server keeps serving."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from support.mcp_helpers import (
    Updates,
    check_big_note,
    check_errors,
    check_read_tools,
    check_resources,
    check_tool_listing,
    history_under,
    make_history_vault,
    next_update,
    sc,
    watching,
)

MODES = ["auto", "legacy"]  # auto: the client default, which negotiates 2026-07-28


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("mcp-stdio")
    return history_under(base)


@pytest.fixture
def copy(tmp_path: Path) -> dict:
    """A private history vault and database, for tests that write."""
    facts = make_history_vault(tmp_path / "vault", tmp_path / "db" / "vaultsync.db")
    return {**facts, "root": tmp_path / "vault", "db": tmp_path / "db" / "vaultsync.db"}


def stdio(facts: dict, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "vaultsync", "--db", str(facts["db"]), "serve", str(facts["root"]), *flags]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
async def test_stdio_every_tool(history: dict, mode: str) -> None:
    async with Client(stdio(history), mode=mode) as c:
        assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        await check_tool_listing(c, writes=False)
        await check_read_tools(c, history["root"], history["notes"])
        await check_errors(c)
        await check_big_note(c, history["root"])
        await check_resources(c, history["notes"], 100)
        status = sc(await c.call_tool("vault_status", {}))
        assert status["writes_enabled"] is False and status["watcher"]["running"] is False


@pytest.mark.anyio
@pytest.mark.slow
async def test_stdio_watch_notifies_listeners_of_file_edits_and_writes(copy: dict) -> None:
    async with Client(stdio(copy, "--watch", "--allow-writes")) as c:
        status = await watching(c)
        assert status["observer"] and status["lag_seconds"] is not None
        await check_tool_listing(c, writes=True)
        async with c.listen(resource_subscriptions=["note://Inbox.md", "note://Notes/Filler%2003.md"]) as sub:
            (copy["root"] / "Inbox.md").write_text("# Inbox\n\n- edited in the editor\n", encoding="utf-8")
            await next_update(sub, "note://Inbox.md")
            note = sc(await c.call_tool("read_note", {"path": "Inbox.md"}))
            assert "edited in the editor" in note["content"]
            told = sc(await c.call_tool("vault_status", {}))["watcher"]["last_latency_ms"]
            assert told is not None and told > 0, "the save's delay until its batch, told to the assistant"
            sc(await c.call_tool("append_to_note", {"path": "Notes/Filler 03.md", "text": "appended"}))
            await next_update(sub, "note://Notes/Filler%2003.md")
        made = sc(await c.call_tool("create_note", {"path": "New/Idea.md", "content": "# Idea\n"}))
        assert made["ingested"] is True
        assert sc(await c.call_tool("read_note", {"path": "New/Idea.md"}))["content"] == "# Idea\n"


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
@pytest.mark.slow
async def test_stdio_watch_notifies_legacy_subscribers(copy: dict) -> None:
    updates = Updates()
    async with Client(stdio(copy, "--watch", "--allow-writes"), mode="legacy", message_handler=updates) as c:
        assert c.server_capabilities.resources.subscribe is True
        await watching(c)
        await c.session.subscribe_resource("note://People/Ana.md")
        await c.session.subscribe_resource("note://Inbox.md")
        (copy["root"] / "People" / "Ana.md").write_text("# Ana\n\nNow leads Atlas.\n", encoding="utf-8")
        await updates.wait_for("note://People/Ana.md")
        sc(await c.call_tool("append_to_note", {"path": "Inbox.md", "text": "- from the assistant"}))
        await updates.wait_for("note://Inbox.md")
        assert "Now leads Atlas" in sc(await c.call_tool("read_note", {"path": "People/Ana.md"}))["content"]


@pytest.mark.slow
@pytest.mark.anyio
async def test_stdio_a_second_watch_serves_as_a_reader(copy: dict) -> None:
    """A second server with --watch on the same vault serves at once as a reader and says who watches."""
    async with Client(stdio(copy, "--watch")) as c:
        assert (await watching(c))["role"] == "watcher"
        second = subprocess.Popen(
            [sys.executable, "-m", "vaultsync", "--db", str(copy["db"]), "serve", str(copy["root"]), "--watch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert second.stderr is not None
            line = second.stderr.readline()
        finally:
            second.kill()
            second.communicate(timeout=30)
        assert line.startswith("vaultsync: vault 'vault' is being watched by pid "), line
        assert "serving it as a reader" in line
        async with Client(stdio(copy, "--watch")) as reader:
            status = sc(await reader.call_tool("vault_status", {}))["watcher"]
            assert (status["role"], status["standby"], status["in_process"]) == ("reader", True, False)
            assert status["running"] is True
            assert status["other_process"].startswith("another process watching the vault, since ")


# ---------------------------------------------------------------- raw protocol abuse


class RawServer:
    """The stdio server driven line by line, to send what no well-behaved client would."""

    def __init__(self, facts: dict, *flags: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vaultsync", "--db", str(facts["db"]), "serve", str(facts["root"]), *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: list[bytes] = []

    def send(self, data: bytes | dict[str, Any]) -> None:
        raw = data if isinstance(data, bytes) else json.dumps(data).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 30) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "no reply from the server"
        line = self.proc.stdout.readline()
        self.lines.append(line)
        return json.loads(line)

    def request(self, ident: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, **({"params": params} if params else {})})
        return self.receive()

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        return self.proc.stderr.read().decode()


@pytest.mark.slow
def test_stdio_protocol_abuse(history: dict) -> None:
    server = RawServer(history)
    try:
        init = server.request(
            1,
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        )
        assert init["result"]["protocolVersion"] == "2025-11-25"
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        server.send(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"')  # cut short
        reply = server.receive()
        assert reply["id"] is None and reply["error"]["code"] == -32700

        server.send({"hello": "world", "id": 3})
        reply = server.receive()
        assert reply["id"] == 3 and reply["error"]["code"] == -32600

        server.send(
            b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "read_note", '
            b'"arguments": {"path": "' + b"x" * (5 * 1024 * 1024) + b'"}}}'
        )
        reply = server.receive()
        assert reply["id"] is None and reply["error"]["code"] == -32600 and "too large" in reply["error"]["message"]

        reply = server.request(5, "vault/explode")
        assert reply["id"] == 5 and reply["error"]["code"] == -32601

        reply = server.request(6, "tools/call", {"name": "no_such_tool", "arguments": {}})
        assert reply == {
            "jsonrpc": "2.0",
            "id": 6,
            "result": {"content": [{"type": "text", "text": "Unknown tool: no_such_tool"}], "isError": True},
        }

        reply = server.request(7, "tools/call", {"name": "list_notes", "arguments": {"limit": [1, 2]}})
        assert reply["result"]["isError"] is True and "limit" in reply["result"]["content"][0]["text"]

        reply = server.request(8, "tools/call", {"name": "read_note", "arguments": "not an object"})
        assert reply["id"] == 8 and reply["error"]["code"] == -32602

        reply = server.request(9, "tools/call", {"name": "read_note", "arguments": {"path": "Inbox.md"}})
        assert reply["result"]["structuredContent"]["content"].startswith("# Inbox")
    finally:
        stderr = server.close()
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in server.lines), "stdout carries only protocol"
    assert "Traceback" not in stderr


@pytest.mark.slow
def test_stdio_sigterm_flushes_the_watcher_and_exits_cleanly(copy: dict) -> None:
    import signal

    from vaultsync import Vault

    server = RawServer(copy, "--watch")
    init = server.request(
        1,
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    )
    assert "result" in init
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    for _ in range(300):  # until the watcher is watching
        reply = server.request(2, "tools/call", {"name": "vault_status", "arguments": {}})
        watcher = reply["result"]["structuredContent"]["watcher"]
        if watcher["running"] and not watcher.get("starting"):
            break
        time.sleep(0.1)
    (copy["root"] / "Inbox.md").write_text("# Inbox\n\nwritten just before shutdown\n", encoding="utf-8")
    time.sleep(0.05)
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=30) == 0
    with Vault.open(copy["db"], name="vault", readonly=True) as vault:
        assert vault.read("Inbox.md").content == "# Inbox\n\nwritten just before shutdown\n"

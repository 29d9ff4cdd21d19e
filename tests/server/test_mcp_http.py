"""``vaultsync serve --http`` as a real subprocess: the official client in both eras over
streamable HTTP, the watcher beside it, Origin/Host checks, bearer tokens and request limits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support.mcp_helpers import (
    AUTH,
    Updates,
    check_errors,
    check_read_tools,
    check_resources,
    check_tool_listing,
    free_port,
    history_under,
    http_client,
    make_history_vault,
    next_update,
    sc,
    start_http,
    stop,
    watching,
)

MODES = ["auto", "legacy"]  # auto: the client default, which negotiates 2026-07-28
TOKEN = "test-token-0123456789abcdef"
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("mcp-http")
    return history_under(base)


@pytest.fixture(scope="module")
def server(history: dict):
    """A read-only server on loopback (with the helpers' token), shared by the module."""
    port = free_port()
    proc = start_http(history["db"], history["root"], port)
    yield f"http://127.0.0.1:{port}/mcp"
    stderr = stop(proc)
    assert "Traceback" not in stderr, stderr


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):
    """A server with --watch --allow-writes that requires a bearer token from a file."""
    base = tmp_path_factory.mktemp("mcp-http-live")
    facts = make_history_vault(base / "vault", base / "db" / "vaultsync.db")
    token_file = base / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    port = free_port()
    proc = start_http(
        base / "db" / "vaultsync.db", base / "vault", port, "--watch", "--allow-writes", "--token-file", str(token_file)
    )
    yield {**facts, "root": base / "vault", "url": f"http://127.0.0.1:{port}/mcp"}
    stop(proc)


def authed(url: str, token: str = TOKEN, *, get_stream: anyio.Event | None = None) -> Any:
    """A client transport with the bearer token; ``get_stream`` is set once the server has answered the
    client's standalone GET (the stream legacy notifications arrive on) with 200."""

    async def opened(response: httpx2.Response) -> None:
        if get_stream is not None and response.request.method == "GET" and response.status_code == 200:
            get_stream.set()

    client = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=30, event_hooks={"response": [opened]}
    )
    return streamable_http_client(url, http_client=client)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_http_every_tool(server: str, history: dict, mode: str) -> None:
    async with Client(http_client(server), mode=mode) as c:
        assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        await check_tool_listing(c, writes=False)
        await check_read_tools(c, history["root"], history["notes"])
        await check_errors(c)
        await check_resources(c, history["notes"], 100)


@pytest.mark.anyio
@pytest.mark.slow
async def test_http_watch_and_writes_notify_listeners(live: dict) -> None:
    async with Client(authed(live["url"])) as c:
        await check_tool_listing(c, writes=True)
        await watching(c)
        async with c.listen(resource_subscriptions=["note://Inbox.md", "note://Made%20Here.md"]) as sub:
            (live["root"] / "Inbox.md").write_text("# Inbox\n\n- typed in the editor\n", encoding="utf-8")
            await next_update(sub, "note://Inbox.md")
            assert "typed in the editor" in sc(await c.call_tool("read_note", {"path": "Inbox.md"}))["content"]
            sc(await c.call_tool("create_note", {"path": "Made Here.md", "content": "# Made here\n"}))
            await next_update(sub, "note://Made%20Here.md")


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
async def test_http_watch_notifies_legacy_subscribers(live: dict) -> None:
    updates = Updates()
    get_stream = anyio.Event()
    async with Client(authed(live["url"], get_stream=get_stream), mode="legacy", message_handler=updates) as c:
        await watching(c)
        await c.session.subscribe_resource("note://People/Ana.md")
        with anyio.fail_after(20):
            await get_stream.wait()  # the client's standalone GET stream is open: notifications reach it
        (live["root"] / "People" / "Ana.md").write_text("# Ana\n\nEdited over HTTP.\n", encoding="utf-8")
        await updates.wait_for("note://People/Ana.md")
        sc(await c.call_tool("append_to_note", {"path": "People/Ana.md", "text": "And appended."}))
        await updates.wait_for("note://People/Ana.md", times=2)


def test_http_bearer_token(live: dict) -> None:
    url = live["url"]
    missing = httpx2.post(url, json=INIT, headers=HEADERS)
    assert missing.status_code == 401 and "Bearer" in missing.headers["www-authenticate"]
    wrong = httpx2.post(url, json=INIT, headers={**HEADERS, "Authorization": "Bearer not-the-token-at-all"})
    assert wrong.status_code == 401
    right = httpx2.post(url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {TOKEN}"})
    assert right.status_code == 200 and "2025-11-25" in right.text


def test_http_protocol_abuse(server: str) -> None:
    port = server.split(":")[2].split("/")[0]
    evil = httpx2.post(server, json=INIT, headers={**HEADERS, **AUTH, "Origin": "http://evil.example"})
    assert evil.status_code == 403
    rebound = httpx2.post(server, json=INIT, headers={**HEADERS, **AUTH, "Host": "evil.example"})
    assert rebound.status_code == 421
    same_origin = httpx2.post(server, json=INIT, headers={**HEADERS, **AUTH, "Origin": f"http://localhost:{port}"})
    assert same_origin.status_code == 200

    garbled = httpx2.post(server, content=b'{"jsonrpc": "2.0", "id": 1, "method":', headers={**HEADERS, **AUTH})
    assert garbled.status_code == 400 and _error(garbled)["code"] == -32700
    huge = httpx2.post(server, content=b'{"x": "' + b"y" * (5 * 1024 * 1024) + b'"}', headers={**HEADERS, **AUTH})
    assert huge.status_code == 413

    modern = {**HEADERS, **AUTH, "MCP-Protocol-Version": "2026-07-28"}
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    unknown = httpx2.post(
        server,
        json={"jsonrpc": "2.0", "id": 2, "method": "vault/explode", "params": {"_meta": meta}},
        headers={**modern, "Mcp-Method": "vault/explode"},
    )
    assert _error(unknown)["code"] == -32601
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "read_note", "arguments": {"path": "Inbox.md"}, "_meta": meta},
    }
    ok = httpx2.post(server, json=call, headers={**modern, "Mcp-Method": "tools/call", "Mcp-Name": "read_note"})
    assert ok.status_code == 200 and "# Inbox" in ok.text


def test_http_beyond_loopback_generates_a_token(history: dict) -> None:
    port = free_port()
    proc = start_http(history["db"], history["root"], port, host="0.0.0.0")
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline() for _ in range(3)]
        assert "WARNING: serving plain HTTP on 0.0.0.0" in lines[1] and "clear text" in lines[1]
        assert "bearer token written to " in lines[2], lines[2]  # its file's path, never the token
        token = Path(lines[2].split(" written to ", 1)[1].split(" ", 1)[0]).read_text(encoding="utf-8").strip()
        assert len(token) >= 32 and token not in lines[2]
        url = f"http://127.0.0.1:{port}/mcp"
        assert httpx2.post(url, json=INIT, headers=HEADERS).status_code == 401
        assert httpx2.post(url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {token}"}).status_code == 200
        assert (
            httpx2.post(
                url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {token}", "Origin": "http://evil.example"}
            ).status_code
            == 403
        )
    finally:
        rest = stop(proc)
    assert token not in rest, "the token is never printed"


def _error(response: Any) -> dict[str, Any]:
    text = response.text
    if text.startswith("event:") or "data:" in text:
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text)["error"]

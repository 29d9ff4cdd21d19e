"""The hardened mode's ``allowed_tools`` and ``[role_filter]`` on real server subprocesses, with the official
client in both protocol eras: tools/list filtered per caller, a refused tools/call is JSON-RPC -32601, deny
wins, ``default = "deny_all"``, per-token roles over HTTP, stdio ``caller_roles``; without the block the
server is the plain one and nothing is audited."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters
from support.hardened_helpers import (
    audit_records,
    authed,
    clean_env,
    hardened_stdio,
    scrubbed_overrides,
    start_hardened_http,
    token_entry,
    write_manifest,
)
from support.mcp_helpers import READ_TOOLS, free_port, history_under, sc, stop

MODES = ["auto", "legacy"]  # auto: the client default, which negotiates 2026-07-28

READER, AUDITOR = "reader-token-0123456789", "auditor-token-9876543210"

STDIO_RULES = """
[role_filter]
caller_roles = ["reader"]
default = "deny_all"
[role_filter.allow]
search_notes = ["reader"]
read_note = ["reader", "admin"]
vault_status = ["reader"]
[role_filter.deny]
vault_status = ["reader"]
get_links = ["admin"]
"""
"""stdio: the reader sees search_notes and read_note; vault_status is allowed *and* denied (deny wins);
every other tool has no allow (deny_all)."""


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return history_under(tmp_path_factory.mktemp("hardened-roles"))


async def refused(c: Client, tool: str, arguments: dict[str, Any]) -> MCPError:
    with pytest.raises(MCPError) as caught:
        await c.call_tool(tool, arguments)
    assert caught.value.error.code == -32601, caught.value.error
    assert tool in caught.value.error.message
    return caught.value


async def tool_names(c: Client) -> list[str]:
    return [t.name for t in (await c.list_tools()).tools]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
async def test_stdio_caller_roles_deny_wins_and_default_deny_all(
    history: dict[str, Any], tmp_path: Path, mode: str
) -> None:
    log = tmp_path / "audit" / "log.jsonl"
    log.parent.mkdir(mode=0o700)
    manifest = write_manifest(tmp_path / "m.toml", history["db"], STDIO_RULES, audit_log_path=str(log))
    async with Client(hardened_stdio(history["root"], manifest), mode=mode) as c:
        assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        assert await tool_names(c) == ["search_notes", "read_note"]  # in the plain server's order
        assert sc(await c.call_tool("read_note", {"path": "Inbox.md"}))["path"] == "Inbox.md"
        await refused(c, "vault_status", {})  # allowed for "reader" and denied for "reader": deny wins
        await refused(c, "list_notes", {})  # no allow names "reader": default deny_all
        await refused(c, "get_links", {"path": "Inbox.md"})
        assert sc(await c.call_tool("search_notes", {"query": "plumber"}))["notes"]  # still serving
    records = [r for r in audit_records(log) if r["event"] != "result"]  # calls and denials
    assert [(r["event"], r.get("tool") or r.get("tool_name")) for r in records] == [
        ("call", "read_note"),
        ("denial", "vault_status"),
        ("denial", "list_notes"),
        ("denial", "get_links"),
        ("call", "search_notes"),
    ]
    assert {r["caller_id"] for r in records} == {"stdio"}
    assert "deny.vault_status" in records[1]["reason"] and "deny_all" in records[2]["reason"]


@pytest.fixture(scope="module")
def two_tokens(history: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One HTTP server, two bearer tokens with different roles, default deny_all."""
    base = tmp_path_factory.mktemp("two-tokens")
    port = free_port()
    body = (
        f'[http]\nbind = "127.0.0.1:{port}"\n'
        + token_entry(READER, "alice", ["reader"])
        + token_entry(AUDITOR, "bob", ["auditor"])
        + """
[role_filter]
default = "deny_all"
[role_filter.allow]
search_notes = ["reader", "auditor"]
read_note = ["reader"]
vault_status = ["auditor"]
list_changes = ["auditor", "reader"]
[role_filter.deny]
list_changes = ["reader"]
"""
    )
    (base / "audit").mkdir(mode=0o700)
    log = base / "audit" / "log.jsonl"
    manifest = write_manifest(base / "m.toml", history["db"], body, audit_log_path=str(log))
    proc = start_hardened_http(history["root"], manifest, port)
    try:
        yield {"url": f"http://127.0.0.1:{port}/mcp", "log": log}
    finally:
        stop(proc)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_http_each_token_sees_its_own_tools(two_tokens: dict[str, Any], mode: str) -> None:
    async with (
        Client(authed(two_tokens["url"], READER), mode=mode) as alice,
        Client(authed(two_tokens["url"], AUDITOR), mode=mode) as bob,
    ):
        assert await tool_names(alice) == ["search_notes", "read_note"]
        assert await tool_names(bob) == ["search_notes", "list_changes", "vault_status"]
        assert sc(await alice.call_tool("read_note", {"path": "Inbox.md"}))["path"] == "Inbox.md"
        assert (
            sc(await bob.call_tool("vault_status", {}))["notes"] == sc(await bob.call_tool("vault_status", {}))["notes"]
        )
        await refused(alice, "vault_status", {})  # bob's tool, alice's token
        await refused(bob, "read_note", {"path": "Inbox.md"})  # alice's tool, bob's token
        await refused(alice, "list_changes", {"since": "2024-01-01"})  # allowed to "reader", denied to it too
        assert sc(await bob.call_tool("list_changes", {"since": "2024-01-01"}))["changes"]
        # the note:// resources are read_note's: alice may read them, bob may not (not even list them)
        assert "plumber" in (await alice.read_resource("note://Inbox.md")).contents[0].text
        for attempt in (bob.read_resource("note://Inbox.md"), bob.list_resources()):
            with pytest.raises(MCPError) as caught:
                await attempt
            assert caught.value.error.code == -32601
    records = audit_records(two_tokens["log"])
    assert ("alice", "resources/read") in [(r["caller_id"], r.get("tool")) for r in records if r["event"] == "call"]
    denials = [r for r in audit_records(two_tokens["log"]) if r["event"] == "denial"]
    assert [(r["caller_id"], r["tool_name"]) for r in denials][-5:] == [
        ("alice", "vault_status"),
        ("bob", "read_note"),
        ("alice", "list_changes"),
        ("bob", "resources/read"),
        ("bob", "resources/list"),
    ]


@pytest.mark.anyio
async def test_allowed_tools_are_the_only_tools(history: dict[str, Any], tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path / "m.toml", history["db"], allowed_tools=["read_note", "search_notes", "create_note"]
    )
    async with Client(hardened_stdio(history["root"], manifest)) as c:
        assert await tool_names(c) == ["search_notes", "read_note"]  # create_note: writes are off
        gone = await c.call_tool("list_notes", {})  # not registered at all: the SDK's unknown tool
        assert gone.is_error and "Unknown tool" in gone.content[0].text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.toml"]


@pytest.mark.anyio
async def test_without_read_note_the_resources_are_gone_too(history: dict[str, Any], tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.toml", history["db"], allowed_tools=["search_notes"])
    async with Client(hardened_stdio(history["root"], manifest)) as c:
        assert await tool_names(c) == ["search_notes"]
        with pytest.raises(MCPError) as caught:
            await c.read_resource("note://Inbox.md")  # the same text read_note would give
        assert caught.value.error.code == -32601 and "resources/read" in caught.value.error.message


@pytest.mark.parametrize(
    "key, body, top",
    [
        ("allowed_tools", "", {"allowed_tools": ["search_notes", "serch_notes"]}),
        ("role_filter.deny.serch_notes", '[role_filter.deny]\nserch_notes = ["guest"]\n', {}),
        (
            "role_filter.allow.serch_notes",
            '[role_filter]\ndefault = "deny_all"\n[role_filter.allow]\nserch_notes = ["guest"]\n',
            {},
        ),
    ],
)
def test_an_unknown_tool_name_is_refused_naming_it(
    history: dict[str, Any], tmp_path: Path, cli: Any, key: str, body: str, top: dict[str, Any]
) -> None:
    manifest = write_manifest(tmp_path / "m.toml", history["db"], body, **top)
    # the names are checked once the server is built, after the start scrubbed the environment of its process, here
    # the test's own: given back at once (else every later test of this worker runs without VAULTSYNC_EMBEDDER)
    saved = dict(os.environ)
    try:
        ran = cli("serve", str(history["root"]), "--manifest", str(manifest), env=scrubbed_overrides())
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert ran.returncode == 1
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{key}: unknown tool 'serch_notes'" in lines[0] and "search_notes" in lines[0]


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_without_the_block_the_server_is_unchanged_and_audits_nothing(
    history: dict[str, Any], tmp_path: Path, mode: str
) -> None:
    manifest = write_manifest(tmp_path / "m.toml", history["db"])
    plain = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vaultsync", "--db", str(history["db"]), "serve", str(history["root"])],
        env=clean_env(),
    )
    listings = []
    for server in (plain, hardened_stdio(history["root"], manifest)):
        async with Client(server, mode=mode) as c:
            listing = (await c.list_tools()).model_dump(mode="json", by_alias=True, exclude={"meta"})
            listings.append(listing)
            assert sc(await c.call_tool("vault_status", {}))["notes"] == history["notes"]
    assert [t["name"] for t in listings[0]["tools"]] == READ_TOOLS
    assert listings[1] == listings[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.toml"]  # no audit log anywhere near


def test_the_refusal_reason_agrees_with_the_manifest_rule() -> None:
    from itertools import product

    from vaultsync.hardened.manifest import RoleFilter
    from vaultsync.hardened.roles import refusal

    for default in ("allow_all", "deny_all"):
        rules = RoleFilter(
            caller_roles=("a",), default=default, allow={"t": ("a", "b"), "u": ("c",)}, deny={"t": ("b",), "v": ("a",)}
        )
        for tool, roles in product("tuvw", [(), ("a",), ("b",), ("a", "b"), ("c",), ("a", "c")]):
            assert (refusal(rules, tool, roles) is None) == rules.allows(tool, roles), (default, tool, roles)
    assert "deny.t" in (refusal(rules, "t", ("a", "b")) or "")


@pytest.mark.anyio
@pytest.mark.slow
async def test_each_callers_writes_are_listed_by_changes_caller(tmp_path: Path, cli: Any) -> None:
    """Hardened HTTP with two tokens that may write: each batch records whom it was done for, so
    ``changes --caller ID`` lists one assistant's writes, ``--source mcp`` both, and undo takes one back."""
    work = history_under(tmp_path)
    port = free_port()
    body = (
        f'[http]\nbind = "127.0.0.1:{port}"\n'
        + token_entry(READER, "alice", ["writer"])
        + token_entry(AUDITOR, "bob", ["writer"])
        + '[role_filter]\ndefault = "allow_all"\n'
    )
    manifest = write_manifest(tmp_path / "m.toml", work["db"], body, allow_writes=True)
    proc = start_hardened_http(work["root"], manifest, port)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with Client(authed(url, READER)) as alice, Client(authed(url, AUDITOR)) as bob:
            sc(await alice.call_tool("create_note", {"path": "From/Alice.md", "content": "# A\n\nalice wrote\n"}))
            sc(await bob.call_tool("append_to_note", {"path": "Inbox.md", "text": "bob's line\n"}))
            sc(await alice.call_tool("append_to_note", {"path": "Inbox.md", "text": "alice's line\n"}))
    finally:
        stop(proc)
    env = scrubbed_overrides()
    by = {
        who: json.loads(cli("changes", "--caller", who, "--json", db=work["db"], env=env).stdout)
        for who in ("alice", "bob", "carol")
    }
    assert [(b["paths"], b["source"], b["caller"]) for b in by["alice"]] == [
        (["From/Alice.md"], "write", "alice"),
        (["Inbox.md"], "write", "alice"),
    ]
    assert [(b["paths"], b["caller"]) for b in by["bob"]] == [(["Inbox.md"], "bob")]
    assert by["carol"] == []
    both = json.loads(cli("changes", "--source", "mcp", "--json", db=work["db"], env=env).stdout)
    assert [b["caller"] for b in both] == ["alice", "bob", "alice"]
    text = cli("changes", "--caller", "bob", db=work["db"], env=env)
    assert text.returncode == 0 and f"batch {by['bob'][0]['batch_id']} " in text.stdout and "for bob" in text.stdout
    # the CLI's own batches name no caller, and are never listed as an assistant's
    assert cli("undo", str(by["alice"][0]["batch_id"]), db=work["db"], env=env).returncode == 0
    assert not (work["root"] / "From" / "Alice.md").exists()
    after = json.loads(cli("changes", "--source", "mcp", "--json", db=work["db"], env=env).stdout)
    assert [b["batch_id"] for b in after] == [b["batch_id"] for b in both]

"""The MCP server in-process through the official Python client, in both protocol eras."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated
from support.mcp_helpers import (
    Updates,
    check_big_note,
    check_errors,
    check_read_tools,
    check_resources,
    check_tool_listing,
    error_text,
    history_under,
    listed_paths,
    make_history_vault,
    next_update,
    sc,
)

from vaultsync import Vault
from vaultsync.server import ServeConfig, ServedVault, build_server, server_for

MODES = ["auto", "legacy"]  # auto: the client default, which negotiates 2026-07-28


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("mcp-inproc")
    return history_under(base)


@pytest.fixture(scope="module")
def reader(history: dict):
    with Vault.open(history["db"], name="vault", readonly=True) as vault:
        yield vault


@pytest.fixture
def writable(tmp_path: Path):
    """A fresh small vault opened for writing."""
    root = tmp_path / "wvault"
    make_history_vault(root, tmp_path / "db" / "w.db")
    with Vault.open(tmp_path / "db" / "w.db", root=root) as vault:
        yield vault


def connect(server, mode: str, **kw) -> Client:
    return Client(server, mode="legacy" if mode == "legacy" else mode, **kw)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_every_read_tool(reader: Vault, history: dict, mode: str) -> None:
    async with connect(build_server(ServeConfig.of(reader)), mode) as c:
        assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        await check_tool_listing(c, writes=False)
        await check_read_tools(c, history["root"], history["notes"])


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_errors_tell_the_model_what_to_fix(reader: Vault, mode: str) -> None:
    async with connect(build_server(ServeConfig.of(reader)), mode) as c:
        await check_errors(c)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_big_note_pages(reader: Vault, history: dict, mode: str) -> None:
    async with connect(build_server(ServeConfig.of(reader)), mode) as c:
        await check_big_note(c, history["root"])
        assert "past the end" in error_text(await c.call_tool("read_note", {"path": "Inbox.md", "offset": 10**6}))


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_resources_paginated(reader: Vault, history: dict, mode: str) -> None:
    async with connect(build_server(ServeConfig.of(reader, page_size=7)), mode) as c:
        await check_resources(c, history["notes"], 7)
        with pytest.raises(MCPError) as bad:
            await c.list_resources(cursor="not-a-cursor")
        assert "invalid cursor" in str(bad.value)
        with pytest.raises(MCPError) as missing:
            await c.read_resource("note://Nope.md")
        assert "did not exist" in str(missing.value)


@pytest.mark.anyio
async def test_server_from_config_opens_read_only(history: dict) -> None:
    served = ServedVault(ServeConfig(db=history["db"], root=history["root"]))
    server = server_for(served)
    assert served.reader is None  # opened in the lifespan, not when built
    async with Client(server) as c:
        assert served.reader.readonly and served.writer is None
        assert sc(await c.call_tool("vault_status", {}))["writes_enabled"] is False
        await check_tool_listing(c, writes=False)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_writes_off_by_default(writable: Vault, mode: str) -> None:
    async with connect(build_server(ServeConfig.of(writable)), mode) as c:
        result = await c.call_tool("create_note", {"path": "New.md", "content": "# New\n"})
        assert result.is_error and "Unknown tool" in result.content[0].text
    assert not (writable.root / "New.md").exists()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_writes_are_ingested_before_returning(writable: Vault, mode: str) -> None:
    async with connect(build_server(ServeConfig.of(writable, allow_writes=True)), mode) as c:
        await check_tool_listing(c, writes=True)
        made = sc(await c.call_tool("create_note", {"path": "Ideas/Kite.md", "content": "# Kite\n\nFly it."}))
        assert made["ingested"] is True and made["uri"] == "note://Ideas/Kite.md"
        assert (writable.root / "Ideas" / "Kite.md").read_text() == "# Kite\n\nFly it."
        assert sc(await c.call_tool("read_note", {"path": "Ideas/Kite.md"}))["known_at"] == made["known_at"]
        sc(await c.call_tool("append_to_note", {"path": "Ideas/Kite.md", "text": "On Sunday."}))
        # append_to_note leaves the note ending with a newline
        assert (
            sc(await c.call_tool("read_note", {"path": "Ideas/Kite.md"}))["content"]
            == "# Kite\n\nFly it.\nOn Sunday.\n"
        )
        history = sc(await c.call_tool("note_history", {"path": "Ideas/Kite.md"}))
        assert [r["kind"] for r in history["revisions"]] == ["created", "modified"]


@pytest.mark.anyio
async def test_writes_refuse_unsafe_paths(writable: Vault, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, writable.root / "escape")
    before = sorted(p.name for p in outside.iterdir())
    async with Client(build_server(ServeConfig.of(writable, allow_writes=True))) as c:
        cases = {
            "../evil.md": "'..'",
            "/tmp/evil.md": "absolute",
            "escape/evil.md": "escape is a symlink",
            "notes.txt": "must end in .md",
            ".obsidian/x.md": "hidden folder",
            "Inbox.md": "already exists",
        }
        for path, reason in cases.items():
            message = error_text(await c.call_tool("create_note", {"path": path, "content": "x"}))
            assert reason in message, (path, message)
        assert "create_note" in error_text(await c.call_tool("append_to_note", {"path": "Missing.md", "text": "x"}))
        assert "escape" not in str(sc(await c.call_tool("list_notes", {"prefix": "escape"}))["folders"])
    assert sorted(p.name for p in outside.iterdir()) == before
    assert (writable.root / "Inbox.md").read_text().startswith("# Inbox")


@pytest.mark.anyio
async def test_listen_notified_after_a_write(writable: Vault) -> None:
    async with Client(build_server(ServeConfig.of(writable, allow_writes=True))) as c:
        async with c.listen(resource_subscriptions=["note://Inbox.md"], resources_list_changed=True) as sub:
            sc(await c.call_tool("append_to_note", {"path": "Inbox.md", "text": "- buy milk"}))
            await next_update(sub, "note://Inbox.md")
            sc(await c.call_tool("create_note", {"path": "Fresh.md", "content": "# Fresh"}))
            with anyio.fail_after(10):
                async for event in sub:
                    if isinstance(event, ResourcesListChanged):
                        break
                    assert not isinstance(event, ResourceUpdated) or event.uri != "note://Fresh.md"


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
async def test_legacy_subscribe_notified_after_a_write(writable: Vault) -> None:
    updates = Updates()
    async with Client(
        build_server(ServeConfig.of(writable, allow_writes=True)), mode="legacy", message_handler=updates
    ) as c:
        assert c.server_capabilities.resources.subscribe is True
        await c.session.subscribe_resource("note://People/Ana.md")
        sc(await c.call_tool("append_to_note", {"path": "People/Ana.md", "text": "Moved teams."}))
        await updates.wait_for("note://People/Ana.md")
        sc(await c.call_tool("append_to_note", {"path": "Inbox.md", "text": "- unrelated"}))
        await c.session.unsubscribe_resource("note://People/Ana.md")
        await c.session.subscribe_resource("note://Inbox.md")
        sc(await c.call_tool("append_to_note", {"path": "People/Ana.md", "text": "Again."}))
        sc(await c.call_tool("append_to_note", {"path": "Inbox.md", "text": "- a later batch"}))
        await updates.wait_for("note://Inbox.md")  # batches are told in order: Ana's would have come first
        assert updates.uris == ["note://People/Ana.md", "note://Inbox.md"]
        with pytest.raises(MCPError):
            await c.session.subscribe_resource("file:///etc/passwd")


@pytest.mark.anyio
async def test_queries_never_see_a_half_applied_batch(tmp_path: Path) -> None:
    """The server reads on its own connection: a batch being written is seen whole or not at all."""
    root, db = tmp_path / "vault", tmp_path / "db" / "v.db"
    make_history_vault(root, db)
    served = ServedVault(ServeConfig(db=db, root=root, allow_writes=True))
    server = server_for(served)
    for i in range(300):
        (root / "Bulk").mkdir(exist_ok=True)
        (root / "Bulk" / f"n{i:03d}.md").write_text(f"# Bulk {i}\n\n" + "words " * 200, encoding="utf-8")
    seen: set[int] = set()
    async with Client(server) as c:
        writer = served.writer
        assert writer is not served.reader
        async with anyio.create_task_group() as tg:
            done = anyio.Event()

            async def write_batch() -> None:
                summary = await anyio.to_thread.run_sync(lambda: writer.sync(["Bulk"]))
                assert summary.added == 300
                done.set()

            tg.start_soon(write_batch)
            while not done.is_set():
                listing = sc(await c.call_tool("list_notes", {"prefix": "Bulk/", "limit": 500}))
                seen.add(len(listed_paths(listing)))
    assert seen <= {0, 300} and 0 in seen, seen


HOLD_LOCK = """
import sys
from vaultsync import Vault
vault = Vault.open(sys.argv[1], root=sys.argv[2])
vault.lock.acquire("vaultsync import (a test holding the lock)")
print("holding", flush=True)
sys.stdin.read()
"""


@pytest.mark.anyio
async def test_a_write_while_an_import_holds_the_lock_is_refused_untouched(
    writable: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the vault's writer lock without watching (an import): the write waits
    WAIT_FOR_LOCK_S, then is refused in one line before touching the file; the client sees what the
    holder does, not its pid or command line (there or in vault_status); the server keeps serving."""
    from vaultsync.live import handoff

    monkeypatch.setattr(handoff, "WAIT_FOR_LOCK_S", 0.5)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / "db" / "w.db"), str(writable.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    before = (writable.root / "Inbox.md").read_bytes()
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        async with Client(build_server(ServeConfig.of(writable, allow_writes=True))) as c:
            for tool, args in (
                ("append_to_note", {"path": "Inbox.md", "text": "- more"}),
                ("create_note", {"path": "New.md", "content": "# New"}),
            ):
                message = error_text(await c.call_tool(tool, args))
                assert "\n" not in message
                assert "another process (an import or a writer), since " in message, message
                assert "nothing was written" in message
                assert str(holder.pid) not in message and "a test holding the lock" not in message
            status = sc(await c.call_tool("vault_status", {}))
            assert status["watcher"]["other_process"].startswith("another process (an import or a writer), since ")
            assert str(holder.pid) not in json.dumps(status) and str(writable.root) not in json.dumps(status)
            assert (writable.root / "Inbox.md").read_bytes() == before
            assert not (writable.root / "New.md").exists()
            history = sc(await c.call_tool("note_history", {"path": "Inbox.md"}))
            assert len(history["revisions"]) == 1
    finally:
        holder.communicate("", timeout=30)


@pytest.mark.anyio
async def test_vault_status_says_how_far_the_semantic_vectors_are(tmp_path: Path, monkeypatch) -> None:
    """A store whose embedder fills its vectors after each batch: vault_status says how many current texts have
    theirs (and nothing for a store whose batches write them)."""
    from support.embedders import BackgroundHash

    from vaultsync.embed import embedders

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-background", BackgroundHash)
    root = tmp_path / "vault"
    make_history_vault(root, tmp_path / "db.sqlite")
    with Vault.open(tmp_path / "bg.db", root=root, embedder="hash-background") as vault:
        vault.sync()
        total = vault.vector_progress()["total"]
        vault.fill_vectors(limit=2)
        async with Client(build_server(ServeConfig.of(vault))) as c:
            assert sc(await c.call_tool("vault_status", {}))["semantic_vectors"] == {
                "embedder": "hash-background",
                "filled": 2,
                "total": total,
                "history_filled": 2,  # one batch: the history is the current texts
                "history_total": total,
            }
        while vault.fill_vectors():
            pass
        async with Client(build_server(ServeConfig.of(vault))) as c:
            assert sc(await c.call_tool("vault_status", {}))["semantic_vectors"] == {
                "embedder": "hash-background",
                "filled": total,
                "total": total,
                "history_filled": total,
                "history_total": total,
            }
    with Vault.open(tmp_path / "db.sqlite", root=root) as vault:
        async with Client(build_server(ServeConfig.of(vault))) as c:
            assert sc(await c.call_tool("vault_status", {})).get("semantic_vectors") is None

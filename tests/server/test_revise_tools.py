"""Writes that know what they overwrite, through the official MCP client against the real server with writes
allowed (in this process; tests/server/test_mcp_stdio.py runs ``serve --allow-writes`` as a subprocess):
expected_revision, edit_note, restore_note; then ``undo`` of the batch an
assistant wrote, and its refusal when the note changed since."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from mcp import Client
from mcp.server import MCPServer
from support.mcp_helpers import error_text, sc

from vaultsync import Vault
from vaultsync.server import ServeConfig, build_server

ORIGINAL = "# Plan\n\nIntro line.\n\n## Risks\n\nThe budget is tight.\n\n## Steps\n\n1. call Ana\n2. book the room\n"


def server(db: Path, root: Path) -> MCPServer:
    """What ``vaultsync --db DB serve ROOT --allow-writes`` serves."""
    return build_server(ServeConfig(db=db, root=root, allow_writes=True))


@pytest.fixture
def setup(tmp_path: Path, cli) -> tuple[Path, Path]:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    (root / "Plan.md").write_bytes(ORIGINAL.encode())
    (root / "Plan.md").chmod(0o640)
    assert cli("import", str(root), db=db).returncode == 0
    return root, db


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.anyio
async def test_an_editor_saving_between_read_and_write_refuses_the_write(setup: tuple[Path, Path]) -> None:
    root, db = setup
    note = root / "Plan.md"
    async with Client(server(db, root)) as c:
        tools = {t.name for t in (await c.list_tools()).tools}
        assert {"edit_note", "restore_note"} <= tools
        read = sc(await c.call_tool("read_note", {"path": "Plan.md"}))
        seen = read["content_hash"]
        saved = ORIGINAL.encode() + b"\nthe editor's line\n"
        note.write_bytes(saved)  # an editor saves between the assistant's read and its write
        for tool, args in (
            ("append_to_note", {"path": "Plan.md", "text": "assistant line"}),
            ("edit_note", {"path": "Plan.md", "old_text": "budget", "new_text": "cost"}),
            ("restore_note", {"path": "Plan.md", "revision": seen}),
        ):
            message = error_text(await c.call_tool(tool, {**args, "expected_revision": seen}))
            assert f"is at revision {sha(saved)}" in message and "read_note" in message, message
            assert note.read_bytes() == saved, f"{tool} left the file untouched"
        message = error_text(
            await c.call_tool("create_note", {"path": "Plan.md", "content": "x", "expected_revision": seen})
        )
        assert f"is at revision {sha(saved)}" in message
        # read again, write with the matching revision: written and recorded
        now = sc(await c.call_tool("read_note", {"path": "Plan.md"}))  # the store may lag; the file decides
        assert now["content_hash"] in (seen, sha(saved))
        wrote = sc(
            await c.call_tool(
                "append_to_note", {"path": "Plan.md", "text": "assistant line", "expected_revision": sha(saved)[:12]}
            )
        )
        assert note.read_bytes() == saved + b"assistant line\n"  # append_to_note leaves a final newline
        assert wrote["content_hash"] == sha(note.read_bytes())
        history = sc(await c.call_tool("note_history", {"path": "Plan.md"}))["revisions"]
        assert history[-1]["revision"] == wrote["content_hash"][:8]
    assert note.stat().st_mode & 0o777 == 0o640


@pytest.mark.anyio
async def test_edit_a_section_and_a_text_then_restore_the_revision_before(setup: tuple[Path, Path]) -> None:
    root, db = setup
    note = root / "Plan.md"
    async with Client(server(db, root)) as c:
        first = sc(await c.call_tool("read_note", {"path": "Plan.md"}))["content_hash"]
        assert error_text(await c.call_tool("edit_note", {"path": "Plan.md", "heading": "Risks", "new_text": "x"}))
        edited = sc(
            await c.call_tool(
                "edit_note",
                {
                    "path": "Plan.md",
                    "expected_revision": first,
                    "heading": "Plan > Risks",
                    "new_text": "\nNo risks left.\n\n",
                },
            )
        )
        want = ORIGINAL.replace("The budget is tight.\n\n", "No risks left.\n\n")
        assert note.read_bytes() == want.encode() and edited["content_hash"] == sha(want.encode())
        text_edit = sc(
            await c.call_tool(
                "edit_note",
                {
                    "path": "Plan.md",
                    "expected_revision": edited["content_hash"],
                    "old_text": "book the room",
                    "new_text": "book the hall",
                },
            )
        )
        assert note.read_text() == want.replace("book the room", "book the hall")
        message = error_text(
            await c.call_tool(
                "edit_note",
                {
                    "path": "Plan.md",
                    "old_text": "\n\n",
                    "new_text": "a",
                    "expected_revision": text_edit["content_hash"],
                },
            )
        )
        assert "occurs" in message and "times" in message
        restored = sc(
            await c.call_tool(
                "restore_note",
                {"path": "Plan.md", "revision": first[:10], "expected_revision": text_edit["content_hash"]},
            )
        )
        assert note.read_bytes() == ORIGINAL.encode() and restored["content_hash"] == first
        history = sc(await c.call_tool("note_history", {"path": "Plan.md"}))["revisions"]
        assert [r["revision"] for r in history] == [
            h[:8] for h in (first, edited["content_hash"], text_edit["content_hash"], first)
        ]
    with Vault.open(db, name="vault", readonly=True) as vault:
        last = vault.history("Plan.md")[-1]
        info = vault.batch_info(last.batch_id)
        assert info is not None and info["source"] == "restore" and info["detail"].startswith("restore of revision")
        assert info["caller"] == "mcp"  # restore_note's batch is an assistant's too (changes --source mcp lists it)
        assert vault.check() == []


@pytest.mark.anyio
async def test_undo_an_assistants_batch_and_refuse_where_the_note_changed_since(setup: tuple[Path, Path], cli) -> None:
    root, db = setup
    async with Client(server(db, root)) as c:
        sc(await c.call_tool("create_note", {"path": "Ideas/New.md", "content": "# New\n\nfrom the assistant\n"}))
        sc(await c.call_tool("append_to_note", {"path": "Plan.md", "text": "wrong line\n"}))
    listed = cli("changes", "--source", "mcp", "--json", db=db)
    assert listed.returncode == 0, listed.stderr
    import json

    batches = json.loads(listed.stdout)
    assert [b["paths"] for b in batches] == [["Ideas/New.md"], ["Plan.md"]]
    assert [b["caller"] for b in batches] == ["mcp", "mcp"]  # outside hardened mode the server knows no identity
    append_batch, create_batch = batches[1]["batch_id"], batches[0]["batch_id"]
    # the user edits Plan.md after the assistant: undo refuses that note, with the reason
    (root / "Plan.md").write_bytes((root / "Plan.md").read_bytes() + b"user line\n")
    assert cli("import", str(root), db=db).returncode == 0
    refused = cli("undo", str(append_batch), db=db)
    assert refused.returncode == 1 and f"changed since batch {append_batch}" in refused.stdout, refused.stdout
    assert (root / "Plan.md").read_bytes().endswith(b"wrong line\nuser line\n")
    undone = cli("undo", str(create_batch), "--json", db=db)
    assert undone.returncode == 0, undone.stderr
    result = json.loads(undone.stdout)
    assert result["notes"][0]["action"] == "delete" and not (root / "Ideas" / "New.md").exists()
    forced = cli("undo", str(append_batch), "--force", db=db)
    assert forced.returncode == 0, forced.stderr
    assert (root / "Plan.md").read_bytes() == ORIGINAL.encode()
    with Vault.open(db, name="vault", readonly=True) as vault:
        assert vault.batch_info(vault.history("Plan.md")[-1].batch_id)["source"] == "undo"
        assert vault.check() == []

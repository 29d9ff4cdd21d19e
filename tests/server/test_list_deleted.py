"""``list_deleted`` answers what ``vaultsync deleted --json`` prints: the notes deleted in a window and still absent,
each with its last revision and the restore command; a rename and a note created again are not listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from support.mcp_helpers import sc

from vaultsync.server import ServeConfig, build_server


@pytest.mark.anyio
async def test_list_deleted_is_the_command_over_mcp(tmp_path: Path, cli) -> None:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    for name in ("Gone", "Moved", "Back"):
        (root / f"{name}.md").write_text(f"# {name}\n", encoding="utf-8")
    assert cli("import", str(root), "--known-at", "2024-01-01", db=db).returncode == 0
    (root / "Gone.md").unlink()
    (root / "Back.md").unlink()
    (root / "Moved.md").rename(root / "Elsewhere.md")
    assert cli("import", str(root), "--known-at", "2024-02-01", db=db).returncode == 0
    (root / "Back.md").write_text("# Back again\n", encoding="utf-8")
    assert cli("import", str(root), "--known-at", "2024-03-01", db=db).returncode == 0
    async with Client(build_server(ServeConfig(db=db, root=root))) as c:
        answer = sc(await c.call_tool("list_deleted", {}))
        window = sc(await c.call_tool("list_deleted", {"until": "2024-02-15"}))
        none = sc(await c.call_tool("list_deleted", {"since": "2024-02-15"}))
        bad = await c.call_tool("list_deleted", {"since": "someday"})
    command = json.loads(cli("deleted", "--json", db=db).stdout)
    assert answer["deleted"] == command and [d["path"] for d in command] == ["Gone.md"]
    assert command[0]["restore"] == "vaultsync restore Gone.md --as-of 2024-01-31T23:59:59.999999Z"
    assert command[0]["size"] == len("# Gone\n") and command[0]["last_revision"] == "r1"
    assert [d["path"] for d in window["deleted"]] == ["Back.md", "Gone.md"], "Back.md was still gone then"
    assert none["deleted"] == []
    assert bad.is_error and "since" in bad.content[0].text

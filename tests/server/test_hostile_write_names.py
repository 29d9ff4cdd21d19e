"""Names a write tool would create that the vault cannot hold safely: one clear ToolError, nothing written.

Through the official MCP client against the real server with writes allowed: a name holding a control
character (a newline, a terminal escape) is refused by every write tool, and so is a name longer than a
file name can be; the safe-write code itself turns a file system's "name too long" into a PathError.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from support.mcp_helpers import error_text

from vaultsync.disk import appendfs, vaultfs
from vaultsync.errors import PathError
from vaultsync.server import ServeConfig, build_server

LONG = "n" * 300 + ".md"
"""A name past the 255 bytes a file name can have."""


@pytest.fixture
def setup(tmp_path: Path, cli) -> tuple[Path, Path]:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    (root / "Plan.md").write_text("# Plan\n\nThe budget is tight.\n", encoding="utf-8")
    assert cli("import", str(root), db=db).returncode == 0
    return root, db


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["new\nline.md", "evil\x1b]0;owned\x07.md", "Inbox/\x1b[31mred.md", "a\u202eb.md"])
async def test_a_name_with_a_control_character_is_refused(setup: tuple[Path, Path], name: str) -> None:
    root, db = setup
    before = sorted(p.name for p in root.rglob("*"))
    async with Client(build_server(ServeConfig(db=db, root=root, allow_writes=True))) as c:
        for tool, args in (
            ("create_note", {"path": name, "content": "x"}),
            ("append_to_note", {"path": name, "text": "x"}),
        ):
            message = error_text(await c.call_tool(tool, args))
            assert "control character" in message and "\n" not in message, message
    assert sorted(p.name for p in root.rglob("*")) == before


@pytest.mark.anyio
async def test_a_name_too_long_is_a_clear_error_in_every_write_tool(setup: tuple[Path, Path]) -> None:
    root, db = setup
    async with Client(build_server(ServeConfig(db=db, root=root, allow_writes=True))) as c:
        for tool, args in (
            ("create_note", {"path": LONG, "content": "x"}),
            ("append_to_note", {"path": LONG, "text": "x"}),
            ("edit_note", {"path": LONG, "old_text": "a", "new_text": "b", "expected_revision": "0" * 64}),
            ("edit_note", {"path": "Folder/" + LONG, "old_text": "a", "new_text": "b", "expected_revision": "0" * 64}),
        ):
            message = error_text(await c.call_tool(tool, args))
            assert "at most 255 bytes" in message, (tool, message)
    assert sorted(p.name for p in root.iterdir()) == ["Plan.md"]


@pytest.mark.parametrize("rel", [LONG, "Folder/" + LONG])
def test_the_safe_writes_turn_a_name_too_long_into_a_path_error(tmp_path: Path, rel: str) -> None:
    for write in (
        lambda: vaultfs.create(tmp_path, rel, b"x"),
        lambda: vaultfs.edit(tmp_path, rel, 100, lambda old: old + b"x"),
        lambda: appendfs.append(tmp_path, rel, 100, lambda old: b"x"),
    ):
        with pytest.raises(PathError, match="longer than the file system allows"):
            write()
    assert list(tmp_path.rglob("*.md")) == []

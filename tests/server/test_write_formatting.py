"""Writes that keep a note's shape, through the official MCP client: ``edit_note`` of a section keeps the blank
lines around its body, ``append_to_note`` leaves the note ending with a newline; and the pure edit itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from support.mcp_helpers import sc

from vaultsync import Vault
from vaultsync.revisions import replace_section
from vaultsync.server import ServeConfig, build_server

NOTE = "# Plan\n\nIntro line.\n\n## Risks\n\nThe budget is tight.\n\n## Steps\n\n1. call Ana\n"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("Costs are fine.", "## Risks\n\nCosts are fine.\n\n## Steps"),
        ("Costs are fine.\n", "## Risks\n\nCosts are fine.\n\n## Steps"),
        ("\n\nCosts are fine.\n\n\n", "## Risks\n\nCosts are fine.\n\n## Steps"),
        ("One.\n\nTwo.", "## Risks\n\nOne.\n\nTwo.\n\n## Steps"),
    ],
)
def test_a_section_edit_keeps_the_blank_lines_around_it(body: str, expected: str) -> None:
    assert expected in replace_section(NOTE, "Risks", body)


def test_the_last_section_keeps_its_final_newline_and_a_tight_section_stays_tight() -> None:
    assert replace_section(NOTE, "Steps", "1. call Bo").endswith("## Steps\n\n1. call Bo\n")
    tight = "# A\n## B\nold\n## C\nkept\n"
    assert replace_section(tight, "B", "new") == "# A\n## B\nnew\n## C\nkept\n"


@pytest.mark.anyio
async def test_edit_and_append_through_mcp_keep_the_note_shape(tmp_path: Path) -> None:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    (root / "Plan.md").write_text(NOTE, encoding="utf-8")
    with Vault.open(db, root=root) as vault:
        vault.sync()
    async with Client(build_server(ServeConfig(db=db, root=root, allow_writes=True))) as c:
        seen = sc(await c.call_tool("read_note", {"path": "Plan.md"}))["content_hash"]
        sc(
            await c.call_tool(
                "edit_note",
                {"path": "Plan.md", "heading": "Risks", "new_text": "Costs are fine.", "expected_revision": seen[:8]},
            )
        )
        assert (root / "Plan.md").read_text(encoding="utf-8") == NOTE.replace("The budget is tight.", "Costs are fine.")
        sc(await c.call_tool("append_to_note", {"path": "Plan.md", "text": "2. book the room"}))
        text = (root / "Plan.md").read_text(encoding="utf-8")
        assert text.endswith("1. call Ana\n2. book the room\n"), text

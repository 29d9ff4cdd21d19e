"""``list_changes`` without ``since`` lists the last week, as ``vaultsync changes`` does without --since (it was a
required argument: an assistant asking "what changed lately?" got a refusal), and says which window it took."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from support.cli import run_cli
from support.mcp_helpers import sc

from vaultsync.server import ServeConfig, build_server
from vaultsync.times import RECENT_DAYS, now_micros, parse_time


@pytest.mark.anyio
async def test_list_changes_without_since_is_the_last_week_like_the_command(tmp_path: Path, cli) -> None:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    (root / "Old.md").write_text("# Old\n", encoding="utf-8")
    assert cli("import", str(root), "--known-at", "2024-01-01", db=db).returncode == 0
    (root / "New.md").write_text("# New\n", encoding="utf-8")
    before = now_micros()
    assert cli("import", str(root), db=db).returncode == 0
    async with Client(build_server(ServeConfig(db=db, root=root))) as c:
        answer = sc(await c.call_tool("list_changes", {}))
    after = now_micros()
    assert [(x["kind"], x["path"]) for x in answer["changes"]] == [("created", "New.md")]
    week = RECENT_DAYS * 86_400_000_000
    assert before - week <= parse_time(answer["since"], "since") <= after - week, answer["since"]
    command = json.loads(run_cli("changes", "--json", db=db, check=True).stdout)
    assert [(x["kind"], x["path"]) for x in command] == [("created", "New.md")]

"""Every client configuration in examples/mcp starts a working server (run as its client would)."""

from __future__ import annotations

import json
import os
import sys
import tomllib
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from support.mcp_helpers import READ_TOOLS, make_history_vault, sc, watching

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "mcp"
CONFIGS = sorted(EXAMPLES.glob("*.json"))
DIST = tomllib.loads((EXAMPLES.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]
UVX = ["--from", f"{DIST}[semantic]", "vaultsync"]
"""How each config starts the published package: uvx installs it (cached) and runs its command."""


def test_every_client_has_a_config() -> None:
    assert [p.name for p in CONFIGS] == [
        "claude_code.mcp.json",
        "claude_desktop_config.json",
        "cursor.mcp.json",
        "vscode.mcp.json",
    ]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "An MCP server in one line" in readme
    for client in ("Claude Desktop", "Claude Code", "Cursor", "VS Code"):
        assert client in readme


def server_entry(config: Path) -> dict:
    data = json.loads(config.read_text(encoding="utf-8"))
    entry = (data.get("mcpServers") or data["servers"])["vaultsync"]
    assert entry["command"] == "uvx" and entry["args"][:3] == UVX, config.name
    assert entry["args"][3:5] == ["serve", "~/notes"], config.name
    return entry


DISTINCT = sorted(
    {
        json.dumps({k: v for k, v in server_entry(c).items() if k in ("command", "args", "env") and v}, sort_keys=True)
        for c in CONFIGS
    }
)
"""The configs' distinct command lines (with their environment): each is started once, whichever configs share it."""


def test_each_config_is_one_of_the_started_command_lines() -> None:
    assert 1 <= len(DISTINCT) <= len(CONFIGS)
    for config in CONFIGS:
        entry = server_entry(config)
        assert (
            json.dumps({k: v for k, v in entry.items() if k in ("command", "args", "env") and v}, sort_keys=True)
            in DISTINCT
        ), config.name


@pytest.mark.anyio
@pytest.mark.parametrize("line", DISTINCT, ids=lambda line: " ".join(json.loads(line)["args"][len(UVX) :]))
@pytest.mark.slow
async def test_example_config_starts_a_server(line: str, tmp_path: Path) -> None:
    """Run as its client would: the command line of one or more configs, with their ``env`` (the installed
    package's command stands for what uvx would install: the tests run offline)."""
    entry = json.loads(line)
    home = tmp_path / "home"
    make_history_vault(home / "notes", tmp_path / "db" / "v.db")
    env = {**os.environ, **entry.get("env", {}), "HOME": str(home), "VAULTSYNC_DB": str(tmp_path / "db" / "v.db")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "vaultsync", *entry["args"][len(UVX) :]], env=env
    )
    async with Client(params, mode="legacy") as c:
        assert [t.name for t in (await c.list_tools()).tools] == READ_TOOLS
        await watching(c)
        assert sc(await c.call_tool("read_note", {"path": "Inbox.md"}))["content"].startswith("# Inbox")

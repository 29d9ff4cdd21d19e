"""A second, independent client: the official TypeScript MCP SDK (npm) talks to ``vaultsync serve``
over stdio. Needs Node.js and ``make test`` (which runs ``npm ci`` in tests/js); skipped, saying so,
where Node.js or the package is missing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_helpers import READ_TOOLS, make_history_vault

JS = Path(__file__).resolve().parent / "js"


def test_typescript_sdk_lists_tools_searches_and_reads(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("SKIPPED: Node.js is not installed, so the TypeScript MCP client test did not run")
    if not (JS / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.skip("SKIPPED: @modelcontextprotocol/sdk is not installed; run `make test` (it runs npm ci in tests/js)")
    make_history_vault(tmp_path / "vault", tmp_path / "db" / "v.db")
    done = subprocess.run([node, str(JS / "client.mjs"), sys.executable, str(tmp_path / "db" / "v.db"),
                           str(tmp_path / "vault")], capture_output=True, text=True, timeout=120, cwd=JS)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["server"]["name"] == "vaultsync"
    assert [t["name"] for t in out["tools"]] == READ_TOOLS
    assert all(t["readOnly"] is True for t in out["tools"])
    assert out["search"]["isError"] is False
    assert out["search"]["structured"]["hits"][0]["path"] == "Inbox.md"
    assert "plumber" in out["search"]["structured"]["hits"][0]["text"]
    read = out["read"]["structured"]
    assert out["read"]["isError"] is False and read["known_at"] == "2024-01-01T00:00:00Z"
    assert read["content"] == "---\ntags: [project]\n---\n# Atlas\n\nKickoff on Monday with [[Ana]].\n"
    assert out["missing"]["isError"] is True and "list_notes" in out["missing"]["text"]

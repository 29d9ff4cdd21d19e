"""The official MCP Inspector (CLI mode) reports the note-history app on note_history, to a client that
advertises MCP Apps, against a real ``vaultsync serve`` subprocess; to one that does not, no app at all."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.history_app_helpers import make_four_revisions
from support.repo import REPO

from vaultsync.server.apps import APP_URI

INSPECTOR = REPO / "tests" / "js" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"

pytestmark = [
    pytest.mark.client,  # another MCP client (the official Inspector, on Node.js): left out by make check
    pytest.mark.skipif(not INSPECTOR.exists(), reason="the MCP Inspector is not installed (make deps, needs npm)"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    base = tmp_path_factory.mktemp("inspected")
    make_four_revisions(base / "vault", base / "db" / "v.db")
    return [sys.executable, "-m", "vaultsync", "--db", str(base / "db" / "v.db"), "serve", str(base / "vault")]


def inspect(served: list[str], *flags: str) -> tuple[int, list[dict]]:
    done = subprocess.run(
        [str(INSPECTOR), "--cli", "--app-info", *flags, *served], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, lines


def test_the_inspector_reports_the_app_on_note_history(served: list[str]) -> None:
    code, lines = inspect(served, "--advertise-apps", "--method", "tools/call", "--tool-name", "note_history")
    assert code == 0, lines
    assert lines == [
        {
            "hasApp": True,
            "toolName": "note_history",
            "resourceUri": APP_URI,
            "csp": {},
            "prefersBorder": True,
            "resourceMimeType": "text/html;profile=mcp-app",
        }
    ]


def test_without_apps_the_inspector_finds_no_app(served: list[str]) -> None:
    code, lines = inspect(served, "--method", "tools/call", "--tool-name", "note_history")
    assert code == 2 and lines[0] == {"hasApp": False, "toolName": "note_history"}


def test_the_inspector_sees_the_app_only_tools(served: list[str]) -> None:
    code, lines = inspect(served, "--advertise-apps", "--method", "tools/list")
    with_app = {line["toolName"]: line.get("visibility") for line in lines if line["hasApp"]}
    assert with_app == {"note_history": None, "history_view_note": ["app"], "history_view_diff": ["app"]}

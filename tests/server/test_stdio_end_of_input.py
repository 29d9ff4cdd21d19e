"""A stdio server reaching the end of its input answers every request it has already read, then exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.mcp_helpers import make_history_vault

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "printf", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


@pytest.mark.slow
def test_requests_read_before_stdin_closes_are_answered(tmp_path: Path) -> None:
    """As ``printf '<initialize>\\n<initialized>\\n<tools/list>\\n' | vaultsync serve VAULT``: stdin is
    closed right after the three lines; both requests get their answer before the process exits 0."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    make_history_vault(root, db)
    lines = "".join(json.dumps(m) + "\n" for m in (INITIALIZE, INITIALIZED, TOOLS_LIST))
    done = subprocess.run(
        [sys.executable, "-m", "vaultsync", "--db", str(db), "serve", str(root)],
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
    )
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
    assert sorted(answers) == [1, 2], (done.stdout, done.stderr)
    assert answers[1]["result"]["serverInfo"]["name"] == "vaultsync"
    tools = [t["name"] for t in answers[2]["result"]["tools"]]
    assert "search_notes" in tools and "read_note" in tools
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_a_vault_that_cannot_be_opened_is_one_line_on_either_transport(tmp_path: Path) -> None:
    """The vault is opened in the server's lifespan, not when the server is built: a vault the database
    does not hold is still one ``Error:`` line and exit status 1, over stdio and over HTTP, before
    anything is served."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    make_history_vault(root, db)
    for transport in ([], ["--http", "127.0.0.1:9"]):
        done = subprocess.run(
            [sys.executable, "-m", "vaultsync", "--db", str(db), "serve", "elsewhere", *transport],
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stdout) == (1, ""), (transport, done.stderr)
        assert done.stderr == f"Error: no vault 'elsewhere' in {db} (known: vault)\n", (transport, done.stderr)


def test_one_revision_shape_for_every_door() -> None:
    """The MCP rows of a revision (terse: null fields left out) name each fact as the one JSON shape does."""
    from vaultsync.server.models import RevisionRow
    from vaultsync.store.read import CHANGE_FIELDS, HISTORY_FIELDS

    assert set(RevisionRow.model_fields) == {"kind", "known_at", "id", "revision", "path", "renamed_from"}
    assert set(RevisionRow.model_fields) <= set(HISTORY_FIELDS) & set(CHANGE_FIELDS)

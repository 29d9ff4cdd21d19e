"""Store errors at the edge: a held lock or a busy database is one line naming the holder, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import run_cli

from vaultsync import Vault
from vaultsync.errors import BusyError, LockedError

HOLDER = r"""
import sys, time
import apsw
from vaultsync.store.lock import WriterLock
db, vault, mode = sys.argv[1:4]
lock = WriterLock(db, vault)
lock.acquire(command="vaultsync holder-for-test")
if mode == "write":
    con = apsw.Connection(db)
    con.execute("BEGIN IMMEDIATE")
    con.execute("INSERT INTO vaults (name, root, created_at) VALUES ('held', '/nowhere', 0)")
print("ready", flush=True)
time.sleep(60)
"""


@pytest.fixture
def holder(db_path: Path, vault_dir: Path):
    """Start a process that holds a vault's writer lock (and, with "write", SQLite's write lock)."""
    with Vault.open(db_path, root=vault_dir) as vault:
        vault.sync(known_at="2024-01-01")
    started: list[subprocess.Popen[str]] = []

    def start(vault: str, mode: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(db_path), vault, mode], stdout=subprocess.PIPE, text=True
        )
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.capabilities_off("no-fcntl")
def test_a_held_vault_lock_names_its_holder(holder, db_path: Path, vault_dir: Path) -> None:
    proc = holder("vault", "lock")
    done = run_cli("import", str(vault_dir), db=db_path)
    line = one_line(done.stderr)
    assert done.returncode == 1 and f"pid {proc.pid}" in line and "holder-for-test" in line
    with Vault.open(db_path, root=vault_dir) as vault, pytest.raises(LockedError, match=f"pid {proc.pid}"):
        vault.sync()


@pytest.mark.capabilities_off("no-fcntl")
def test_a_busy_database_names_the_process_writing(
    holder, db_path: Path, vault_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = holder("other-vault", "write")  # another vault of the same database, mid-transaction
    (vault_dir / "Inbox.md").write_text("# Inbox\n\nchanged\n", encoding="utf-8")
    done = run_cli("import", str(vault_dir), db=db_path, env={"VAULTSYNC_BUSY_TIMEOUT_MS": "300"})
    line = one_line(done.stderr)
    assert done.returncode == 1 and "is busy" in line and f"pid {proc.pid}" in line, line
    monkeypatch.setenv("VAULTSYNC_BUSY_TIMEOUT_MS", "300")
    with Vault.open(db_path, name="vault") as vault, pytest.raises(BusyError, match=f"pid {proc.pid}"):
        vault.sync()
    proc.kill()
    proc.wait()
    with Vault.open(db_path, root=vault_dir) as vault:  # once the writer is gone, nothing was lost or half-written
        vault.sync()
        assert "changed" in vault.read("Inbox.md").content and vault.check() == []


@pytest.mark.anyio
async def test_a_busy_database_is_one_line_tool_error_over_mcp(
    holder, db_path: Path, vault_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same busy database reaches an MCP client as a tool error of one line (the write tool), while
    reads keep answering from their snapshot."""
    from mcp import Client
    from support.mcp_helpers import error_text, sc

    from vaultsync.server import ServeConfig, build_server

    monkeypatch.setenv("VAULTSYNC_BUSY_TIMEOUT_MS", "300")
    server = build_server(ServeConfig(db=db_path, root=vault_dir, allow_writes=True))
    holder("other-vault", "write")
    async with Client(server) as c:
        message = error_text(await c.call_tool("append_to_note", {"path": "Inbox.md", "text": "- more"}))
        assert "\n" not in message and "is busy" in message and "Traceback" not in message, message
        assert "wrote Inbox.md in the vault folder, but could not record it" in message
        assert sc(await c.call_tool("read_note", {"path": "Inbox.md"}))["content"].startswith("# Inbox")

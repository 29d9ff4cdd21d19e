"""The MCP server over stdio on a PostgreSQL database (``VAULTSYNC_DB=postgresql://…``), with its watcher in
process: it answers the official client as the same server on a SQLite file does, and records a new note."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from support.mcp_helpers import READ_TOOLS, make_history_vault, sc, watching

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_note", {"path": "Projects/Atlas.md"}),
    ("read_note", {"path": "Doomed.md", "as_of": "2024-02-15"}),
    ("note_history", {"path": "Archive/New Name.md"}),
    ("list_notes", {"as_of": "2024-02-15"}),
    ("search_notes", {"query": "budget risks"}),
    ("search_notes", {"query": "filler text", "mode": "keyword", "as_of": "2024-02-15"}),
    ("get_links", {"path": "People/Ana.md"}),
]


def _comparable(value: Any) -> Any:
    """A tool result without what names the database or the moment it was asked."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if k not in ("database", "uri", "watcher", "receipt")}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


async def _answers(db: str, root: Path, home: Path, write: bool) -> list[Any]:
    env = {**os.environ, "VAULTSYNC_DB": db, "VAULTSYNC_HOME": str(home)}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "vaultsync", "serve", str(root), "--watch"], env=env
    )
    async with Client(params, mode="legacy") as c:
        assert [t.name for t in (await c.list_tools()).tools] == READ_TOOLS
        await watching(c)
        out = [_comparable(sc(await c.call_tool(name, args))) for name, args in CALLS]
        if write:  # the in-process watcher records a new note into PostgreSQL
            (root / "Fresh.md").write_text("# Fresh\n\nwritten while serving\n", encoding="utf-8")
            with anyio.fail_after(60):
                while True:
                    found = sc(await c.call_tool("search_notes", {"query": "written while serving"}))["notes"]
                    if found:
                        break
                    await anyio.sleep(0.1)
            assert found[0]["path"] == "Fresh.md"
        return out


@pytest.mark.anyio
async def test_a_server_on_postgres_answers_as_one_on_sqlite(tmp_path: Path) -> None:
    dsn = pgserver.fresh_or_skip("mcp")
    make_history_vault(tmp_path / "pg" / "notes", dsn)  # type: ignore[arg-type]
    make_history_vault(tmp_path / "lite" / "notes", tmp_path / "lite.db")
    on_pg = await _answers(dsn, tmp_path / "pg" / "notes", tmp_path / "home", write=True)
    on_lite = await _answers(str(tmp_path / "lite.db"), tmp_path / "lite" / "notes", tmp_path / "home", write=False)
    assert on_pg == on_lite
    assert on_pg[4]["notes"] and on_pg[2]["revisions"]


@pytest.mark.anyio
async def test_a_hardened_server_on_postgres_keeps_its_audit_head_there(tmp_path: Path, cli: Any) -> None:
    """A manifest whose ``db_path`` is a ``postgresql://`` URI: the hardened server reads the vault from
    PostgreSQL and moves its audit log's head there; ``audit verify --db URI`` checks the log against it."""
    from support.hardened_helpers import audit_records, hardened_stdio, write_keystore, write_manifest

    from vaultsync.hardened.audit import digest
    from vaultsync.hardened.manifest import load_manifest
    from vaultsync.store import open_store

    dsn = pgserver.fresh_or_skip("hardened")
    root = tmp_path / "notes"
    make_history_vault(root, dsn)  # type: ignore[arg-type]
    (tmp_path / "audit").mkdir(mode=0o700)
    log, keystore = tmp_path / "audit" / "audit.jsonl", write_keystore(tmp_path / "keys.toml")
    manifest = write_manifest(
        tmp_path / "m" / "manifest.toml",
        dsn,  # type: ignore[arg-type]
        audit_log_path=str(log),
        keystore_path=str(keystore),
    )
    assert load_manifest(manifest).db_path == dsn  # kept as it is, not read as a path beside the manifest
    async with Client(hardened_stdio(root, manifest), mode="legacy") as c:
        found = sc(await c.call_tool("search_notes", {"query": "budget risks"}))["hits"]
    assert found and found[0]["path"]
    records = audit_records(log)
    store = open_store(dsn, readonly=True)
    try:
        head = store.audit_head(log_id=records[0]["log"])
    finally:
        store.close()
    assert head is not None and head.records == len(records) >= 2 and head.head == digest(records[-1])
    ran = cli("audit", "verify", str(log), "--db", dsn, "--keystore", str(keystore))
    assert ran.returncode == 0, ran.stdout + ran.stderr


@pytest.mark.anyio
async def test_a_servers_change_feed_learns_of_another_writers_batch_through_notify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's follow loop (its change feed, and ``serve --watch``'s take-over) waits on the engine's
    wakeup: with an hour between its polls, only PostgreSQL's NOTIFY can tell it of a batch another process
    wrote, and it tells that batch once."""
    import time

    from vaultsync import Vault
    from vaultsync.server import served as served_module
    from vaultsync.server.feed import ChangeFeed

    dsn = pgserver.fresh_or_skip("feed")
    root = tmp_path / "notes"
    make_history_vault(root, dsn)  # type: ignore[arg-type]
    monkeypatch.setattr(served_module, "POLL_S", 3600.0)
    served = served_module.ServedVault(served_module.ServeConfig(db=dsn, root=root, vault="notes"))  # type: ignore[arg-type]
    told: list[Any] = []
    served.feed = ChangeFeed(served.reading, tell=told.extend)
    async with served.running():  # the server's lifespan: open, then follow the batch log
        await anyio.sleep(0.5)  # the loop is waiting
        (root / "Fresh.md").write_text("# Fresh\n\nwritten by another process\n", encoding="utf-8")
        with Vault.open(dsn, root=root, name="notes") as other:
            other.sync()
        deadline = time.monotonic() + 300
        while not told and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert [news.paths for news in told] == [("Fresh.md",)]

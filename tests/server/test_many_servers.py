"""Many assistants, one vault: several ``serve --watch`` processes (and a ``vaultsync watch``) on one
vault, each driven by the official MCP client over stdio. One process watches; the others serve as
readers, stay current and notify their subscribers; when the watcher is killed (SIGKILL), one of
them takes over and its catch-up scan records what changed meanwhile. The oracle is the folder
itself: at the end the store holds exactly the files on disk, each change recorded once."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from support.mcp_helpers import make_history_vault, next_update, sc
from support.watch_helpers import WatchProcess

from vaultsync import Vault

SERVERS = 3
DEADLINE_S = 60.0
"""Upper bound for any one wait (a loaded 2-core machine); the measured times are printed."""


def serve(facts: dict[str, Any]) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "vaultsync", "--db", str(facts["db"]), "serve", str(facts["root"]), "--watch"],
    )


@pytest.fixture
def facts(tmp_path: Path) -> dict[str, Any]:
    db = tmp_path / "db" / "vaultsync.db"
    return {**make_history_vault(tmp_path / "vault", db), "root": tmp_path / "vault", "db": db}


async def status(c: Client) -> dict[str, Any]:
    return sc(await c.call_tool("vault_status", {}))["watcher"]


async def until(what: str, check: Any, deadline: float = DEADLINE_S) -> float:
    """Await ``check()`` until it is true; the seconds it took (fails after ``deadline``)."""
    start = time.monotonic()
    with anyio.fail_after(deadline):
        while not await check():
            await anyio.sleep(0.05)
    took = time.monotonic() - start
    print(f"{what}: {took:.2f} s")
    return took


def watching_now(s: dict[str, Any]) -> bool:
    return s["role"] == "watcher" and s["in_process"] and s["running"] and not s.get("starting")


async def one_watcher(clients: list[Client]) -> int:
    """Wait until exactly one of ``clients`` watches (the others read); its index."""
    found: list[int] = []

    async def settled() -> bool:
        statuses = [await status(c) for c in clients]
        found[:] = [i for i, s in enumerate(statuses) if watching_now(s)]
        return len(found) == 1 and all(s["role"] == "reader" for i, s in enumerate(statuses) if i != found[0])

    await until("one server watches", settled)
    return found[0]


async def all_read(clients: list[Client], path: str, text: str) -> bool:
    for c in clients:
        got = await c.call_tool("read_note", {"path": path})
        if got.is_error or got.structured_content["content"] != text:
            return False
    return True


def holder_pid(s: dict[str, Any], facts: dict[str, Any]) -> int:
    """The pid of the process watching, read from the vault's lock file: vault_status tells a client
    only that another process watches and since when, never its pid or command line."""
    assert s["other_process"] and s["other_process"].startswith("another process watching the vault, since "), s
    with Vault.open(facts["db"], name=facts["name"], readonly=True) as vault:
        info = vault.lock.holder_info()
    assert info and info["watching"] is True, info
    return int(info["pid"])


def check_store_matches_folder(facts: dict[str, Any]) -> None:
    """The store's notes are exactly the folder's, and the batch log has no gap and no duplicate."""
    root = facts["root"]
    disk = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.md")}
    with Vault.open(facts["db"], name=facts["name"], readonly=True) as vault:
        assert sorted(r.path for r in vault.ls()) == sorted(disk)
        for rel, data in disk.items():
            assert vault.read(rel).content.encode() == data, rel
            revs = vault.history(rel)
            twice = [
                b.known_at for a, b in zip(revs, revs[1:]) if b.kind == "modified" and a.content_hash == b.content_hash
            ]
            assert not twice, f"{rel}: the same content recorded twice"
        batches = vault.batches_after(0, limit=100_000)
        assert [b.batch_id for b in batches] == list(range(1, len(batches) + 1)), "a gap in the batch log"
        assert all(b.paths for b in batches), "an empty batch"
        assert vault.check() == []
    done = subprocess.run(
        [sys.executable, "-m", "vaultsync", "--db", str(facts["db"]), "check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("watcher", ["serve", "watch"])
async def test_many_servers_one_watcher_and_a_takeover(facts: dict[str, Any], watcher: str) -> None:
    root = facts["root"]
    background = WatchProcess(facts["db"], root) if watcher == "watch" else None
    async with contextlib.AsyncExitStack() as stack:
        if background is not None:
            stack.callback(lambda: background.proc.poll() is None and background.proc.kill())
            await anyio.to_thread.run_sync(background.wait_for, "watching ")
        clients: list[Client] = []
        exits: list[contextlib.AsyncExitStack] = []
        for _ in range(SERVERS):
            own = contextlib.AsyncExitStack()
            clients.append(await own.enter_async_context(Client(serve(facts))))
            exits.append(own)
        stack.push_async_callback(_close_all, exits)

        # every server answers; one process watches, the others are readers naming it
        statuses = [await status(c) for c in clients]
        for c in clients:
            assert sc(await c.call_tool("vault_status", {}))["notes"] == facts["notes"]
        if background is None:
            first = await one_watcher(clients)
            readers = [c for i, c in enumerate(clients) if i != first]
            victim = holder_pid(await status(readers[0]), facts)
        else:
            assert [s["role"] for s in statuses] == ["reader"] * SERVERS
            readers, victim = clients, background.proc.pid
        for c in readers:
            s = await status(c)
            assert (s["role"], s["standby"], s["in_process"], holder_pid(s, facts)) == ("reader", True, False, victim)

        # an edit in the folder appears in every server, and a reader's subscriber is told
        inbox = "# Inbox\n\n- edited while three assistants watch\n"
        async with readers[0].listen(resource_subscriptions=["note://Inbox.md"]) as sub:
            (root / "Inbox.md").write_text(inbox, encoding="utf-8")
            await until("an edit readable in every server", lambda: all_read(clients, "Inbox.md", inbox))
            start = time.monotonic()
            await next_update(sub, "note://Inbox.md", timeout=DEADLINE_S)
            print(f"... and its notification reached a reader's subscriber {time.monotonic() - start:.2f} s later")

        # freeze the watcher, edit (nobody can record it now), kill it, edit again: the gap
        os.kill(victim, signal.SIGSTOP)
        with Vault.open(facts["db"], name=facts["name"], readonly=True) as vault:
            last_before = vault.last_batch_id
        ana = "# Ana\n\nEdited while the watcher was frozen.\n"
        (root / "People" / "Ana.md").write_text(ana, encoding="utf-8")
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        gap = "# Gap\n\nWritten while nobody watched.\n"
        (root / "Gap.md").write_text(gap, encoding="utf-8")
        survivors = [c for c in clients if c in readers]
        if background is not None:
            background.finish()
        async with contextlib.AsyncExitStack() as subs:
            listens = [
                await subs.enter_async_context(c.listen(resource_subscriptions=["note://People/Ana.md"]))
                for c in survivors
            ]
            new = await one_watcher(survivors)
            print(f"SIGKILL -> a survivor watches again, catch-up done: {time.monotonic() - killed:.2f} s")
            taken = await status(survivors[new])
            assert taken["took_over_at"] and taken["last_error"] is None
            await until(
                "the gap's edits readable in every survivor",
                lambda: _all(all_read(survivors, "Gap.md", gap), all_read(survivors, "People/Ana.md", ana)),
            )
            for listen in listens:  # the new watcher tells its own subscribers; the readers tell theirs
                await next_update(listen, "note://People/Ana.md", timeout=DEADLINE_S)
        for i, c in enumerate(survivors):
            s = await status(c)
            if i != new:
                assert s["role"] == "reader" and holder_pid(s, facts) != victim

        # a write through the watching server's folder after the takeover is still recorded once
        atlas = (root / "Projects" / "Atlas.md").read_text(encoding="utf-8") + "\nAfter the takeover.\n"
        (root / "Projects" / "Atlas.md").write_text(atlas, encoding="utf-8")
        await until(
            "an edit after the takeover readable everywhere", lambda: all_read(survivors, "Projects/Atlas.md", atlas)
        )
        exits_alive = [e for c, e in zip(clients, exits) if c in survivors]
        exits[:] = [e for c, e in zip(clients, exits) if c not in survivors]  # the killed server's, closed below
        await _close_all(exits_alive)
    check_store_matches_folder(facts)
    digest = hashlib.sha256((root / "Gap.md").read_bytes()).hexdigest()
    with Vault.open(facts["db"], name=facts["name"], readonly=True) as vault:
        assert [r.content_hash for r in vault.history("Gap.md")] == [digest]
        catch_up = vault.batches_after(last_before, limit=1)[0]
        assert "People/Ana.md" in catch_up.paths, "the new watcher's first batch (its catch-up) records the gap"


async def _all(*checks: Any) -> bool:
    return all([await check for check in checks])


async def _close_all(exits: list[contextlib.AsyncExitStack]) -> None:
    """Close each client (its server exits on end of input); a killed server's client may complain."""
    for own in exits:
        try:
            await own.aclose()
        except Exception:  # the server process was killed under it
            pass
    exits.clear()


@pytest.mark.slow
def test_watch_wait_stands_by_and_takes_over(facts: dict[str, Any]) -> None:
    """``vaultsync watch --wait`` (the service's command) waits while another process watches, then takes over."""
    first = WatchProcess(facts["db"], facts["root"])
    first.wait_for("watching ")
    second = WatchProcess(facts["db"], facts["root"], "--wait")
    try:
        line = second.wait_for("waiting to take over")
        assert f"is being watched by pid {first.proc.pid} (" in line and second.proc.poll() is None
        first.proc.kill()
        first.finish()
        (facts["root"] / "Inbox.md").write_text("# Inbox\n\nwhile nobody watched\n", encoding="utf-8")
        second.wait_for("taking over vault")
        second.wait_for(f"watching {facts['root']}")
        with Vault.open(facts["db"], name=facts["name"], readonly=True) as vault:
            assert vault.read("Inbox.md").content == "# Inbox\n\nwhile nobody watched\n"
        second.proc.send_signal(signal.SIGTERM)
        assert second.finish() == 0, second.stderr
    finally:
        for proc in (first, second):
            if proc.proc.poll() is None:
                proc.proc.kill()
                proc.finish()
    check_store_matches_folder(facts)

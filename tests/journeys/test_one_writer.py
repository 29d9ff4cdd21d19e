"""Journeys with the background watcher running, as the README tells people to run it: a real
``vaultsync watch`` process holds the vault's writer role for the whole module, and every other door —
``restore`` (a note, a folder, a deleted note, a re-created note), ``undo`` of an assistant's batch and of a
rename, a second ``import``, and
``edit_note`` / ``restore_note`` / ``append_to_note`` of a second ``serve --watch`` (official MCP client) —
hands its write to it: each lands as one batch the watcher records, with the source and caller it has when
the asking process writes it itself. Then the watcher is stopped (SIGSTOP: the asker fails in one line
naming it, nothing written) and killed (SIGKILL in the middle of a folder restore, restarted: the request
landed whole or failed with its line, never half).

The CLI runs in this process (click's runner) where the process boundary is not the point; the watcher is
always a real separate process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from support.cli import invoke, run_cli
from support.mcp_helpers import sc
from support.watch_helpers import WatchProcess, wait_until

from vaultsync import Vault
from vaultsync.disk.digest import content_hash
from vaultsync.live import handoff
from vaultsync.times import format_time, now_micros

QUIET = ("--step-ms", "20000", "--debounce-ms", "60000", "--reconcile-s", "0")
"""The watcher records a burst of edits only after 20 s: whatever a test sees recorded sooner was recorded by a
request the watcher carried out (or by its catch-up at start)."""
BULK = 300
"""Notes in the folder restored while the watcher is killed (a wide window to be killed in)."""
DAY_THEN, DAY_NOW = "# Day\n\nthe first note at this path\n", "# Day\n\nanother note, created here later\n"


class World:
    def __init__(self, base: Path) -> None:
        self.root, self.db = base / "vault", base / "db" / "vaultsync.db"
        self.watcher: WatchProcess | None = None

    def write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def text(self, rel: str) -> str:
        return (self.root / rel).read_text(encoding="utf-8")

    def start(self, *extra: str) -> WatchProcess:
        self.watcher = WatchProcess(self.db, self.root, *QUIET, *extra)
        self.watcher.wait_for("watching ")
        wait_until(lambda: self.watcher.proc.pid in _holder_pids(self.db), 30, "the watcher to hold the lock")
        return self.watcher

    def cli(self, *args: str) -> Any:
        return invoke(*args, db=self.db)

    def vault(self) -> Vault:
        return Vault.open(self.db, name="vault", readonly=True)

    def batch(self, batch_id: int) -> dict[str, Any]:
        """The batch, once the watcher's log says it carried it out (nothing else writes while it watches)."""
        if self.watcher is not None and self.watcher.proc.poll() is None:
            self.watcher.wait_for(f"carried out: batch {batch_id}")
        return self.recorded_batch(batch_id)

    def recorded_batch(self, batch_id: int) -> dict[str, Any]:
        with self.vault() as vault:
            info = vault.batch_info(batch_id)
            assert info is not None, batch_id
            return {**info, "paths": sorted({r.path for r in vault.written_by(batch_id)})}

    def last_batch(self) -> int:
        with self.vault() as vault:
            return vault.last_batch_id

    def recorded(self, rel: str) -> str | None:
        with self.vault() as vault:
            try:
                return vault.read(rel).content
            except Exception:
                return None

    def now(self) -> str:
        time.sleep(0.002)
        stamp = format_time(now_micros())
        time.sleep(0.002)
        return stamp


def _holder_pids(db: Path) -> list[int]:
    with Vault.open(db, name="vault", readonly=True) as vault:
        info = vault.lock.holder_info()
    return [int(info["pid"])] if info and "pid" in info else []


def _batch_of(line: str) -> int:
    """The batch id in a restore's or undo's last line: '… refused: batch 12 (restore of …)'."""
    return int(line.split("batch ", 1)[1].split(" ", 1)[0])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    w = World(tmp_path_factory.mktemp("journey"))
    w.write("Inbox.md", "# Inbox\n\n- call the plumber\n")
    w.write("Projects/Atlas.md", "# Atlas\n\n## Plan\n\nKickoff on Monday.\n\n## Risks\n\nThe budget is tight.\n")
    w.write("Travel/Rome.md", "# Rome\n\nPantheon at dawn.\n")
    w.write("Travel/Oslo.md", "# Oslo\n\nFjord ferry.\n")
    w.write("Journal/Day.md", DAY_THEN)
    w.write("Recipes/Soup.md", "# Soup\n\nleeks\n")
    w.write("Recipes/Cake.md", "# Cake\n\nflour\n")
    w.write("Lone.md", "# Lone\n\na note on its own\n")
    for i in range(BULK):
        w.write(f"Bulk/n{i:03d}.md", f"# Note {i}\n\nfirst text of note {i}\n")
    assert run_cli("import", str(w.root), db=w.db, check=True).returncode == 0
    w.t0 = w.now()
    w.start()
    yield w
    if w.watcher is not None and w.watcher.proc.poll() is None:
        w.watcher.proc.send_signal(signal.SIGTERM)
        w.watcher.finish()


@pytest.mark.slow
def test_restore_a_note_while_the_watcher_runs(world: World) -> None:
    world.write("Projects/Atlas.md", "# Atlas\n\nscrapped\n")
    done = world.cli("restore", "Projects/Atlas.md", "--as-of", world.t0)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("write      Projects/Atlas.md  (revision "), done.stdout
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("1 to change, 0 refused: batch ") and "(restore of revision " in line, done.stderr
    batch = world.batch(_batch_of(line))
    assert (batch["source"], batch["paths"], batch["caller"]) == ("restore", ["Projects/Atlas.md"], None)
    assert world.text("Projects/Atlas.md") == world.recorded("Projects/Atlas.md")
    assert "Kickoff on Monday" in world.text("Projects/Atlas.md")


def test_restore_a_folder(world: World) -> None:
    world.write("Travel/Rome.md", "# Rome\n\nrained all week\n")
    world.write("Travel/Oslo.md", "# Oslo\n\nmissed the ferry\n")
    done = world.cli("restore", "--prefix", "Travel/", "--as-of", world.t0, "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [(n["path"], n["action"]) for n in out["notes"]] == [
        ("Travel/Oslo.md", "write"),
        ("Travel/Rome.md", "write"),
    ]
    batch = world.batch(out["batch_id"])
    assert (batch["source"], batch["paths"]) == ("restore", ["Travel/Oslo.md", "Travel/Rome.md"])
    assert batch["detail"] == f"restore of Travel/ as of {world.t0}"
    assert world.text("Travel/Rome.md") == "# Rome\n\nPantheon at dawn.\n"


def test_restore_a_deleted_note(world: World) -> None:
    (world.root / "Inbox.md").unlink()
    scanned = world.cli("import", str(world.root))  # a second import: a scan the watcher carries out
    assert scanned.returncode == 0, scanned.stderr
    assert scanned.stdout.startswith("vault: batch ")
    assert ": 0 added, 0 modified, 0 renamed, 1 deleted" in scanned.stdout
    scan = world.batch(int(scanned.stdout.split("batch ", 1)[1].split(" ", 1)[0]))
    assert (scan["source"], scan["paths"]) == ("import", ["Inbox.md"])
    assert world.recorded("Inbox.md") is None
    done = world.cli("restore", "Inbox.md", "--as-of", world.t0)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("create     Inbox.md  (revision ")
    batch = world.batch(_batch_of(done.stderr.strip().splitlines()[-1]))
    assert (batch["source"], batch["paths"]) == ("restore", ["Inbox.md"])
    assert world.text("Inbox.md") == "# Inbox\n\n- call the plumber\n" == world.recorded("Inbox.md")


def test_a_second_import_is_a_scan_by_the_watcher(world: World) -> None:
    world.write("Ideas/Kite.md", "# Kite\n")
    before = world.last_batch()
    scanned = world.cli("import", str(world.root), "--json")
    assert scanned.returncode == 0, scanned.stderr
    out = json.loads(scanned.stdout)
    assert (out["added"], out["modified"], out["deleted"]) == (1, 0, 0) and out["batch_id"] > before
    assert world.batch(out["batch_id"])["source"] == "import"
    again = world.cli("import", str(world.root))
    assert again.returncode == 0 and again.stdout.startswith("vault: no change: 0 added"), again.stdout


def stdio_server(world: World) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "vaultsync", "--db", str(world.db), "serve", str(world.root), "--watch", "--allow-writes"],
        env=dict(os.environ),
    )


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_second_serve_watch_edits_restores_and_appends_through_the_watcher(world: World) -> None:
    async with Client(stdio_server(world)) as c:
        status = sc(await c.call_tool("vault_status", {}))
        assert status["watcher"]["role"] == "reader", status["watcher"]
        note = sc(await c.call_tool("read_note", {"path": "Projects/Atlas.md"}))
        edited = sc(
            await c.call_tool(
                "edit_note",
                {
                    "path": "Projects/Atlas.md",
                    "heading": "Risks",
                    "new_text": "\nNone left.\n",
                    "expected_revision": note["content_hash"][:12],
                },
            )
        )
        assert "None left." in world.text("Projects/Atlas.md")
        assert edited["content_hash"] == content_hash(world.text("Projects/Atlas.md").encode())
        with world.vault() as vault:
            edit_batch = vault.history("Projects/Atlas.md")[-1].batch_id
        assert (world.batch(edit_batch)["source"], world.batch(edit_batch)["caller"]) == ("write", "mcp")

        restored = sc(
            await c.call_tool(
                "restore_note",
                {"path": "Projects/Atlas.md", "as_of": world.t0, "expected_revision": edited["content_hash"]},
            )
        )
        atlas = world.text("Projects/Atlas.md")
        assert "None left." not in atlas and "budget is tight" in atlas
        with world.vault() as vault:
            restore_batch = vault.history("Projects/Atlas.md")[-1].batch_id
        assert restored["content_hash"] == content_hash(world.text("Projects/Atlas.md").encode())
        assert (world.batch(restore_batch)["source"], world.batch(restore_batch)["caller"]) == ("restore", "mcp")

        stale = await c.call_tool(
            "edit_note",
            {
                "path": "Projects/Atlas.md",
                "heading": "Risks",
                "new_text": "x\n",
                "expected_revision": edited["content_hash"],
            },
        )
        assert stale.is_error and "not the expected revision" in stale.content[0].text, "checked by the watcher"

        appended = sc(await c.call_tool("append_to_note", {"path": "Inbox.md", "text": "- from the assistant"}))
        assert world.text("Inbox.md").endswith("- from the assistant\n")
        with world.vault() as vault:
            world.mcp_batch = vault.history("Inbox.md")[-1].batch_id
        assert appended["content_hash"] == content_hash(world.text("Inbox.md").encode())
        assert (world.batch(world.mcp_batch)["source"], world.batch(world.mcp_batch)["caller"]) == ("write", "mcp")


@pytest.mark.slow
def test_undo_an_assistants_batch(world: World) -> None:
    batch = getattr(world, "mcp_batch", None)
    if batch is None:
        pytest.skip("needs the MCP journey above")
    listed = world.cli("changes", "--source", "mcp")
    assert f"batch {batch} " in listed.stdout
    done = world.cli("undo", str(batch))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("write      Inbox.md  (state before batch ")
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("1 to change, 0 refused: batch ") and line.endswith(f"(undo of batch {batch})")
    undo = world.batch(_batch_of(line))
    assert (undo["source"], undo["paths"], undo["caller"]) == ("undo", ["Inbox.md"], None)
    assert world.text("Inbox.md") == "# Inbox\n\n- call the plumber\n"


def _scan(world: World) -> dict[str, Any]:
    """A second ``import``: a scan the watcher carries out; its JSON answer, once the watcher recorded it."""
    scanned = world.cli("import", str(world.root), "--json")
    assert scanned.returncode == 0, scanned.stderr
    out = json.loads(scanned.stdout)
    assert world.batch(out["batch_id"])["source"] == "import"
    return out


def test_restore_a_recreated_note(world: World) -> None:
    """A note deleted, then another note created at its path: ``restore PATH --as-of`` a moment before the
    deletion puts exactly what ``read PATH --as-of`` that moment prints at PATH, and the newer note's text stays
    in the history."""
    rel = "Journal/Day.md"
    (world.root / rel).unlink()
    assert _scan(world)["deleted"] == 1 and world.recorded(rel) is None
    world.write(rel, DAY_NOW)
    assert _scan(world)["added"] == 1 and world.recorded(rel) == DAY_NOW
    shown = world.cli("read", rel, "--as-of", world.t0)
    assert shown.returncode == 0 and shown.stdout == DAY_THEN, shown.stderr
    done = world.cli("restore", rel, "--as-of", world.t0)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"write      {rel}  (revision "), done.stdout
    batch = world.batch(_batch_of(done.stderr.strip().splitlines()[-1]))
    assert (batch["source"], batch["paths"], batch["caller"]) == ("restore", [rel], None)
    assert world.text(rel) == shown.stdout == world.recorded(rel)
    with world.vault() as vault:
        revisions = vault.history(rel)
        assert [r.kind for r in revisions] == ["created", "deleted", "created", "modified"]
        assert revisions[-1].batch_id == batch["batch_id"]
        assert vault.revision_text(revisions[2]) == DAY_NOW, "the newer note's text stays in history"


def test_undo_a_rename(world: World) -> None:
    """A folder renamed and a note moved into another folder, recorded as renames; ``undo`` of that batch renames
    them back (recorded as renames by the watcher) and leaves no emptied folder behind."""
    (world.root / "Recipes").rename(world.root / "Food")
    (world.root / "Lone.md").rename(world.root / "Projects" / "Lone.md")
    moves = {"Recipes/Cake.md": "Food/Cake.md", "Recipes/Soup.md": "Food/Soup.md", "Lone.md": "Projects/Lone.md"}
    texts = {old: (world.root / new).read_text(encoding="utf-8") for old, new in moves.items()}
    out = _scan(world)
    assert (out["added"], out["modified"], out["renamed"], out["deleted"]) == (0, 0, 3, 0), out
    with world.vault() as vault:
        for old, new in moves.items():
            last = vault.history(new)[-1]
            assert (last.kind, last.renamed_from, last.batch_id) == ("renamed", old, out["batch_id"])
    done = world.cli("undo", str(out["batch_id"]))
    assert done.returncode == 0, done.stdout + done.stderr
    for old, new in moves.items():
        assert f"renamed back from {new}" in done.stdout and f"renamed back to {old}" in done.stdout, done.stdout
    line = done.stderr.strip().splitlines()[-1]
    assert line.endswith(f"(undo of batch {out['batch_id']})"), done.stderr
    undo = world.batch(_batch_of(line))
    assert (undo["source"], undo["caller"]) == ("undo", None)
    assert undo["paths"] == sorted([*moves, *moves.values()])
    for old, new in moves.items():
        assert world.text(old) == texts[old] == world.recorded(old) and not (world.root / new).exists()
    assert not (world.root / "Food").exists(), "the folder the undo emptied is removed"
    with world.vault() as vault:
        for old, new in moves.items():
            last = vault.history(old)[-1]
            assert (last.kind, last.renamed_from, last.batch_id) == ("renamed", new, undo["batch_id"])


def test_a_stopped_watcher_is_named_and_nothing_is_written(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    assert world.watcher is not None
    monkeypatch.setattr(handoff, "WAIT_FOR_WRITER_S", 1.0)
    world.write("Travel/Rome.md", "# Rome\n\nchanged again\n")
    before = world.last_batch()
    world.watcher.proc.send_signal(signal.SIGSTOP)
    try:
        refused = world.cli("restore", "Travel/Rome.md", "--as-of", world.t0)
    finally:
        world.watcher.proc.send_signal(signal.SIGCONT)
    assert refused.returncode == 1
    assert refused.stderr == (
        f"Error: vault 'vault' is being written by pid {world.watcher.proc.pid} (vaultsync "
        f"--db {world.db} watch {world.root} {' '.join(QUIET)}, since "
        f"{refused.stderr.split(', since ', 1)[1].split(')', 1)[0]}), which did not take the "
        "request within 1 s; nothing was written\n"
    ), refused.stderr
    done = world.cli("import", str(world.root))  # the watcher answers again; the dropped request never runs
    assert done.returncode == 0, done.stderr
    assert world.text("Travel/Rome.md") == "# Rome\n\nchanged again\n"
    assert [world.recorded_batch(b)["source"] for b in range(before + 1, world.last_batch() + 1)] == ["import"]


@pytest.mark.slow
def test_the_watcher_killed_in_the_middle_of_a_folder_restore(world: World) -> None:
    """SIGKILL while the watcher writes a 300-note folder restore; restarted, the request landed whole as one
    batch, or failed with its line and every file is as it was: never some notes restored."""
    for i in range(BULK):
        world.write(f"Bulk/n{i:03d}.md", f"# Note {i}\n\nsecond text of note {i}\n")
    assert world.cli("import", str(world.root)).returncode == 0
    before = world.last_batch()
    assert world.watcher is not None
    old = world.watcher
    first = world.root / "Bulk" / "n000.md"
    asker = subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "--db", str(world.db), "restore", "--prefix", "Bulk/", "--as-of", world.t0],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed = threading.Event()
    try:
        wait_until(
            lambda: "first text" in first.read_text(encoding="utf-8") or asker.poll() is not None,
            60,
            "the watcher to start writing the restore",
        )
        old.proc.send_signal(signal.SIGKILL)
        killed.set()
        old.finish()
        at_kill = sum(
            "first text" in (world.root / "Bulk" / f"n{i:03d}.md").read_text(encoding="utf-8") for i in range(BULK)
        )
        world.start("--wait")  # recovers the request before its catch-up
        out, err = asker.communicate(timeout=120)
    finally:
        if asker.poll() is None:
            asker.kill()
            asker.communicate()
    texts = {(world.root / "Bulk" / f"n{i:03d}.md").read_text(encoding="utf-8") for i in range(BULK)}
    firsts = sum("first text" in t for t in texts)
    after = [world.recorded_batch(b) for b in range(before + 1, world.last_batch() + 1)]
    print(f"files restored when killed: {at_kill} of {BULK}; asker exit {asker.returncode}: {err.strip()}")
    if asker.returncode == 0:  # it landed whole, as one batch
        assert firsts == BULK, err
        restores = [b for b in after if b["source"] == "restore"]
        assert len(restores) == 1 and len(restores[0]["paths"]) == BULK, after
        assert err.strip().splitlines()[-1].startswith(f"{BULK} to change, 0 refused: batch {restores[0]['batch_id']} ")
    else:  # it failed with its line, and nothing of it is left
        assert asker.returncode == 1 and err.count("\n") == 1, err
        assert err.startswith(
            f"Error: vault 'vault': the process that took it, pid {old.proc.pid} (vaultsync --db "
            f"{world.db} watch {world.root} "
        ) and err.endswith("), stopped while carrying it out; nothing was written\n"), err
        assert firsts == 0, f"{firsts} notes restored by a failed request"
        assert not any(b["source"] == "restore" for b in after), after
    with world.vault() as vault:
        for i in range(0, BULK, 37):
            rel = f"Bulk/n{i:03d}.md"
            assert vault.read(rel).content == world.text(rel), "the store and the folder agree"
    assert not any(b["source"] == "watch" and any(p.startswith("Bulk/") for p in b["paths"]) for b in after), after
    # the restarted `watch --wait` carries out the next request (the one the stopped watcher never took)
    again = world.cli("restore", "Travel/Rome.md", "--as-of", world.t0)
    assert again.returncode == 0, again.stderr
    assert world.batch(_batch_of(again.stderr.strip().splitlines()[-1]))["source"] == "restore"
    assert world.text("Travel/Rome.md") == "# Rome\n\nPantheon at dawn.\n"
    assert world.watcher is not None and world.watcher.proc.pid in _holder_pids(world.db)

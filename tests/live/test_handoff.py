"""The hand-off of writes to the process holding the writer role (``vaultsync.live.handoff``), on both engines:
two ``Vault`` objects on one database play two processes (each holds its own writer lock: a flock on SQLite, a
session advisory lock on PostgreSQL). A request is taken at most once, a request no writer took in time is
dropped and never carried out, and a writer that dies in the middle of one leaves it carried out whole or not
at all, put right by the next process that takes the writer lock."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vaultsync import Vault, write_caller
from vaultsync.errors import LockedError, RevisionMismatch
from vaultsync.live import handoff
from vaultsync.live.watcher import Watcher
from vaultsync.live.writer_role import WriterRole
from vaultsync.store.requests import RequestTable
from vaultsync.times import format_time, now_micros
from vaultsync.vault.pending import summary_answer

QUIET = {"step_ms": 20000, "debounce_ms": 60000, "reconcile_s": 0}
"""The watcher records a burst of edits only after 20 s: what a test sees recorded sooner, a request recorded."""


@pytest.fixture
def two(db: str, tmp_path: Path) -> Iterator[tuple[Vault, Vault, Path, str]]:
    """The watching process's vault, the asking process's vault, the folder, and T0 (after the first import)."""
    root = tmp_path / "vault"
    (root / "F").mkdir(parents=True)
    for name in ("a", "b", "c", "d"):
        (root / "F" / f"{name}.md").write_text(f"# {name}\n\nfirst\n", encoding="utf-8")
    (root / "Inbox.md").write_text("# Inbox\n", encoding="utf-8")
    with Vault.open(db, root=root, name="v") as first, Vault.open(db, root=root, name="v") as second:
        first.sync()
        time.sleep(0.002)
        t0 = format_time(now_micros())
        time.sleep(0.002)
        for name in ("a", "b", "c", "d"):
            (root / "F" / f"{name}.md").write_text(f"# {name}\n\nsecond\n", encoding="utf-8")
        first.sync()
        yield first, second, root, t0


def test_every_door_is_carried_out_by_the_watcher(two, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handoff, "DESK_POLL_S", 0.05)  # SQLite announces no request: the desk looks this often
    watching, asking, root, t0 = two
    told: list[int] = []
    with Watcher(watching, on_batch=lambda s: told.append(s.batch_id), **QUIET):
        folder = handoff.restored_of(handoff.perform(asking, "restore", handoff.restore_args(prefix="F/", as_of=t0)))
        assert folder.summary is not None and [s.action for s in folder.steps] == ["write"] * 4
        assert asking.batch_info(folder.summary.batch_id)["source"] == "restore"
        assert (root / "F" / "a.md").read_text(encoding="utf-8") == "# a\n\nfirst\n"
        undone = handoff.restored_of(handoff.perform(asking, "undo", {"batch": folder.summary.batch_id}))
        assert undone.summary is not None and undone.detail == f"undo of batch {folder.summary.batch_id}"
        assert (root / "F" / "a.md").read_text(encoding="utf-8") == "# a\n\nsecond\n"
        with write_caller.acting_for("alice"):
            wrote = handoff.perform(
                asking,
                "write",
                {"path": "Ideas/Kite.md", "text": "# Kite\n", "append": False, "expected": None},
                public=True,
            )
        kite = asking.read("Ideas/Kite.md")
        assert wrote.answer["path"] == "Ideas/Kite.md" and wrote.here is None, "carried out by the watcher"
        assert asking.batch_info(kite.revision.batch_id) | {"known_at": 0} == {
            "batch_id": kite.revision.batch_id,
            "known_at": 0,
            "source": "write",
            "detail": None,
            "caller": "alice",
        }
        with pytest.raises(RevisionMismatch, match="not the expected revision 00000000"):
            handoff.perform(
                asking,
                "edit",
                {"path": "Ideas/Kite.md", "expected": "00000000", "new_text": "x", "heading": None, "old_text": "Kite"},
            )
        (root / "New.md").write_text("# New\n", encoding="utf-8")
        scanned = handoff.summary_of(handoff.perform(asking, "scan", {}).answer)
        assert scanned.added == 1 and asking.batch_info(scanned.batch_id)["source"] == "import"
        assert told[-1] == scanned.batch_id, "the watcher's on_batch hears of the batches it carried out"
    assert asking.requests().waiting() == [] and asking.requests().interrupted() == []


def test_a_handed_off_summary_is_the_writers_whole(two) -> None:
    """The summary a request's answer carries back through the store is the writer's ``BatchSummary``, every
    field of it: what a watcher's flush held back and left unsettled, its delay, warnings and paths."""
    watching, asking, root, _ = two
    (root / "Broken.md").write_text("---\ntitle: [\n---\n# Broken\n", encoding="utf-8")
    (root / "F" / "a.md").unlink()
    summary = watching.sync()
    summary.held, summary.unsettled, summary.delay_ms = ["F/b.md"], ["Inbox.md"], 12.5
    assert summary.warnings and summary.paths and summary.batch_id is not None
    table = asking.requests()
    rid = table.ask("scan", {}, asker={"pid": 1}, caller=None, take_by=now_micros() + 10_000_000)
    assert watching.requests().take(rid, {"pid": 2}) is not None
    watching.requests().finish(rid, "done", {"summary": summary_answer(summary)})
    handed = handoff.summary_of(table.get(rid).answer)
    assert handed == summary
    assert handed.held == ["F/b.md"] and handed.unsettled == ["Inbox.md"] and handed.known_at == summary.known_at


def test_a_request_is_taken_once_and_a_dropped_one_never(two) -> None:
    watching, asking, _, _ = two
    table, other = asking.requests(), watching.requests()
    rid = table.ask("scan", {}, asker={"pid": 1}, caller=None, take_by=now_micros() + 10_000_000)
    assert other.take(rid, {"pid": 2}) is not None
    assert other.take(rid, {"pid": 3}) is None and not table.drop(rid), "taken: neither taken again nor dropped"
    late = table.ask("scan", {}, asker={"pid": 1}, caller=None, take_by=now_micros() + 10_000_000)
    assert table.drop(late) and other.take(late, {"pid": 2}) is None
    stale = table.ask("scan", {}, asker={"pid": 1}, caller=None, take_by=now_micros() - 1)
    assert other.take(stale, {"pid": 2}) is None, "past its asker's deadline"
    assert other.tidy() == 1 and table.get(stale).state == "dropped"


def test_a_request_id_is_never_given_twice(two) -> None:
    """The asker deletes its request once it read the outcome: the next request still gets a new id (on SQLite
    a plain rowid would give the same id again), so the watcher's log never names two requests alike."""
    _, asking, _, _ = two
    table = asking.requests()
    seen = []
    for _ in range(3):
        rid = table.ask("scan", {}, asker={"pid": 1}, caller=None, take_by=now_micros() + 10_000_000)
        assert table.drop(rid)
        table.forget(rid)
        assert table.get(rid) is None, "its row is gone"
        seen.append(rid)
    assert seen == sorted(set(seen)) and len(set(seen)) == 3, seen


def test_an_older_sqlite_database_keeps_its_requests_and_gives_new_ids(tmp_path: Path) -> None:
    """m011 rebuilds the request table of a database made before it (ids given again): the rows it holds kept,
    ids from then on never given twice; run twice, it changes nothing."""
    import apsw

    from vaultsync.store import schema

    db = tmp_path / "db" / "vaultsync.db"
    (tmp_path / "vault").mkdir()
    with Vault.open(db, root=tmp_path / "vault", name="v") as vault:
        kept = vault.requests().ask("scan", {}, asker={"pid": 7}, caller=None, take_by=now_micros() + 10_000_000)
    con = apsw.Connection(str(db))
    with con:  # back to the table as m010 made it, and the schema version before m011
        sql = con.execute("SELECT sql FROM sqlite_master WHERE name = 'write_requests'").fetchone()[0]
        assert "AUTOINCREMENT" in sql
        con.execute("ALTER TABLE write_requests RENAME TO old")
        con.execute(sql.replace(" AUTOINCREMENT", ""))
        con.execute("INSERT INTO write_requests SELECT * FROM old")
        con.execute("DROP TABLE old")
        con.execute(f"PRAGMA user_version = {len(schema.MIGRATIONS) - 1}")
    con.close()
    with Vault.open(db, name="v") as vault:
        table = vault.requests()
        assert table.get(kept) is not None and table.get(kept).asker == {"pid": 7}
        assert table.drop(kept)
        table.forget(kept)
        assert table.ask("scan", {}, asker={"pid": 8}, caller=None, take_by=now_micros() + 10_000_000) > kept
    con = apsw.Connection(str(db))
    before = con.execute("SELECT sql FROM sqlite_master WHERE name LIKE 'write_requests%' ORDER BY name").fetchall()
    with con:
        next(m for m in schema.MIGRATIONS if m.__name__ == "m011_request_ids")(con)
    assert con.execute("SELECT sql FROM sqlite_master WHERE name LIKE 'write_requests%' ORDER BY name").fetchall() == (
        before
    )
    assert len(before) == 2, "the table and its index"
    con.close()


def test_no_answer_within_the_bound_is_one_line_and_nothing_written(two, monkeypatch: pytest.MonkeyPatch) -> None:
    """A holder that watches but does not answer (here: holding the lock with no desk)."""
    watching, asking, root, t0 = two
    monkeypatch.setattr(handoff, "WAIT_FOR_WRITER_S", 0.3)
    assert WriterRole(watching).take()
    with pytest.raises(LockedError) as refused:
        handoff.perform(asking, "restore", handoff.restore_args(note="F/a.md", as_of=t0))
    assert str(refused.value) == (
        f"vault 'v' is being written by {asking.lock.holder()}, which did not take "
        "the request within 0.3 s; nothing was written"
    )
    assert (root / "F" / "a.md").read_text(encoding="utf-8") == "# a\n\nsecond\n"
    assert watching.requests().waiting() == []


def _die_after(monkeypatch: pytest.MonkeyPatch, files: int, holder: Vault) -> None:
    """The writer "dies" after writing ``files`` files: its lock goes (as the OS or the server frees a dead
    process's), and the request stays taken."""
    from vaultsync.vault import restore

    real, written = restore._write, []

    def write(root: str, rel: str, text: Any, expected: Any) -> bool:
        if len(written) == files:
            monkeypatch.setattr(restore, "_write", real)  # whoever puts it right writes for real
            holder.lock.release()
            raise SystemExit("killed")
        written.append(rel)
        return real(root, rel, text, expected)

    monkeypatch.setattr(restore, "_write", write)


def _serve_one(holder: Vault, monkeypatch: pytest.MonkeyPatch, files: int | None) -> threading.Thread:
    """A desk that takes the next request and dies in the middle of it (after writing ``files`` files; None: as
    it comes to write its answer, its batch committed)."""

    def run() -> None:
        table = holder.requests()
        deadline = time.monotonic() + 30
        while not table.waiting() and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            handoff.Desk(holder).serve(table, table.waiting()[0])
        except SystemExit:
            pass

    if files is not None:
        _die_after(monkeypatch, files, holder)
    else:
        real = RequestTable.finish

        def finish(self: RequestTable, rid: int, state: str, answer: Any) -> None:
            if state == "done":
                holder.lock.release()
                raise SystemExit("killed")
            real(self, rid, state, answer)

        monkeypatch.setattr(RequestTable, "finish", finish)
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_writer_dying_mid_restore_leaves_nothing_of_it(two, monkeypatch: pytest.MonkeyPatch) -> None:
    watching, asking, root, t0 = two
    assert WriterRole(watching).take()
    before = asking.last_batch_id
    desk = _serve_one(watching, monkeypatch, files=2)
    try:
        with pytest.raises(LockedError) as failed:
            handoff.perform(asking, "restore", handoff.restore_args(prefix="F/", as_of=t0))
    finally:
        desk.join()
    assert str(failed.value).startswith("vault 'v': the process that took it, pid ")
    assert str(failed.value).endswith(" stopped while carrying it out; nothing was written")
    for name in ("a", "b", "c", "d"):
        assert (root / "F" / f"{name}.md").read_text(encoding="utf-8") == f"# {name}\n\nsecond\n", name
    assert asking.last_batch_id == before, "no batch: nothing recorded of the request"
    assert asking.sync().changed == 0, "the folder is as the store has it"


def test_a_writer_dying_once_its_batch_committed_leaves_the_asker_its_batch(two, monkeypatch) -> None:
    """The batch marks the request done in its own transaction: killed before it wrote the answer, the writer
    has carried it out whole, and the asker prints that batch."""
    watching, asking, root, t0 = two
    assert WriterRole(watching).take()
    desk = _serve_one(watching, monkeypatch, files=None)
    try:
        done = handoff.restored_of(handoff.perform(asking, "restore", handoff.restore_args(prefix="F/", as_of=t0)))
    finally:
        desk.join()
    assert done.summary is not None and done.summary.batch_id == asking.last_batch_id
    assert asking.batch_info(done.summary.batch_id)["source"] == "restore"
    assert sorted(s.path for s in done.steps) == [f"F/{n}.md" for n in "abcd"]
    for name in "abcd":
        assert (root / "F" / f"{name}.md").read_text(encoding="utf-8") == f"# {name}\n\nfirst\n", name
    assert asking.sync().changed == 0


def test_a_writer_dying_after_its_write_landed_records_it_for_the_asker(two) -> None:
    """create/append/edit write one file at once: if it landed, the next writer records it as the request's batch."""
    watching, asking, root, _ = two
    assert WriterRole(watching).take()
    table = asking.requests()
    rid = table.ask(
        "write",
        {"path": "Inbox.md", "text": "more", "append": True, "expected": None},
        asker={"pid": 1},
        caller="bob",
        take_by=now_micros() + 10_000_000,
    )
    assert watching.requests().take(rid, {"pid": 2, "command": "vaultsync watch"}) is not None
    watching.write_file("Inbox.md", "more", append=True)  # the file is written; then the writer dies
    watching.lock.release()
    with asking.writing():  # whoever takes the lock next puts it right first
        pass
    done = table.get(rid)
    assert done.state == "done" and done.answer["path"] == "Inbox.md"
    assert asking.batch_info(done.batch_id)["source"] == "write" and asking.batch_info(done.batch_id)["caller"] == "bob"
    assert asking.read("Inbox.md").content == "# Inbox\nmore"


@pytest.mark.pg
def test_a_real_watcher_on_postgresql_carries_out_a_cli_restore(tmp_path: Path) -> None:
    """``vaultsync watch`` on PostgreSQL in a process of its own (woken by NOTIFY), ``restore`` from this one."""
    import sys

    from support.cli import invoke
    from support.watch_helpers import WatchProcess

    pgserver = pytest.importorskip("support.pgserver")
    try:
        dsn = pgserver.shared().fresh("handoffwatch")
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    root = tmp_path / "vault"
    root.mkdir()
    (root / "Note.md").write_text("# Note\n\nfirst\n", encoding="utf-8")
    assert invoke("--db", dsn, "import", str(root)).returncode == 0
    t0 = format_time(now_micros())
    (root / "Note.md").write_text("# Note\n\nsecond\n", encoding="utf-8")
    watcher = WatchProcess(
        tmp_path / "unused.db",
        root,
        "--step-ms",
        "20000",
        "--debounce-ms",
        "60000",
        command=[
            sys.executable,
            "-m",
            "vaultsync",
            "--db",
            dsn,
            "watch",
            str(root),
            "--step-ms",
            "20000",
            "--debounce-ms",
            "60000",
            "--reconcile-s",
            "0",
        ],
    )
    try:
        watcher.wait_for("watching ")
        done = invoke("--db", dsn, "restore", "Note.md", "--as-of", t0)
        assert done.returncode == 0, done.stderr
        batch = int(done.stderr.strip().splitlines()[-1].split("batch ", 1)[1].split(" ", 1)[0])
        watcher.wait_for(f"carried out: batch {batch}")
        assert (root / "Note.md").read_text(encoding="utf-8") == "# Note\n\nfirst\n"
        with Vault.open(dsn, name="vault", readonly=True) as vault:
            assert vault.batch_info(batch)["source"] == "restore" and vault.read("Note.md").content.endswith("first\n")
    finally:
        watcher.proc.terminate()
        watcher.finish()


def _world(base: Path) -> tuple[Path, Path, str]:
    """The same small history built again under ``base``: folder, database, T0."""
    from support.cli import invoke

    root, db = base / "vault", base / "db" / "vaultsync.db"
    (root / "F").mkdir(parents=True)
    for name in ("a", "b"):
        (root / "F" / f"{name}.md").write_text(f"# {name}\n\nfirst\n", encoding="utf-8")
    assert invoke("import", str(root), db=db).returncode == 0
    time.sleep(0.002)
    t0 = format_time(now_micros())
    time.sleep(0.002)
    (root / "F" / "a.md").write_text("# a\n\nsecond\n", encoding="utf-8")
    (root / "F" / "b.md").unlink()
    (root / "F" / "c.md").write_text("# c\n", encoding="utf-8")
    assert invoke("import", str(root), db=db).returncode == 0
    return root, db, t0


def _masked(text: str) -> str:
    import re

    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "T", text)
    return re.sub(r'"seconds": [\d.]+', '"seconds": S', text)


def test_the_asker_prints_what_it_prints_when_it_writes_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same commands on the same history, once with nothing watching and once handed to a watcher: the
    same output, the same exit codes (times masked)."""
    import logging

    from support.cli import invoke

    monkeypatch.setattr(handoff, "DESK_POLL_S", 0.05)  # SQLite announces no request: the desk looks this often
    caplog.set_level(logging.INFO, logger="vaultsync.live.handoff")
    said: dict[str, list[tuple[int, str, str]]] = {}
    for how in ("here", "handed"):
        root, db, t0 = _world(tmp_path / how)
        commands = [
            ("restore", "F/a.md", "--as-of", t0),
            ("restore", "--prefix", "F/", "--as-of", t0, "--json"),
            ("restore", "--prefix", "F/", "--as-of", t0, "--delete-newer"),
            ("undo", "3"),
            ("undo", "3"),
            ("import", str(root)),
            ("import", str(root), "--json"),
            ("restore", "Gone.md", "--as-of", t0),
        ]
        with Vault.open(db, root=root) as vault, contextlib.ExitStack() as stack:
            if how == "handed":
                stack.enter_context(Watcher(vault, **QUIET))
            (root / "New.md").write_text("# New\n", encoding="utf-8")  # found by the import: nothing records it before
            said[how] = [
                (r.returncode, _masked(r.stdout), _masked(r.stderr)) for r in (invoke(*c, db=db) for c in commands)
            ]
    assert said["handed"] == said["here"]
    desk = [r.getMessage() for r in caplog.records if r.name == "vaultsync.live.handoff"]
    assert sum(" carried out: " in m for m in desk) == 7 and sum(" refused: " in m for m in desk) == 1, desk
    assert [code for code, _, _ in said["here"]] == [0, 0, 0, 0, 1, 0, 0, 1], said["here"]


def test_a_batch_for_a_request_put_right_elsewhere_never_lands(two) -> None:
    """A writer that lost its lock (a PostgreSQL session dropped) while carrying a request out, which another
    process meanwhile put right: its batch refuses to land, so the request's outcome and the history agree."""
    from vaultsync.vault import pending as unfinished

    watching, asking, root, _ = two
    table = asking.requests()
    rid = table.ask(
        "write",
        {"path": "Inbox.md", "text": "late", "append": True, "expected": None},
        asker={"pid": 1},
        caller=None,
        take_by=now_micros() + 10_000_000,
    )
    request = watching.requests().take(rid, {"pid": 2})
    assert request is not None
    table.finish(rid, "failed", {"error": "LockedError", "message": "put right elsewhere"})
    before = asking.last_batch_id
    with unfinished.carrying(watching.requests(), request), pytest.raises(LockedError, match="no longer this"):
        watching.write_note("Inbox.md", "late", append=True)
    assert asking.last_batch_id == before and table.get(rid).state == "failed"


@pytest.mark.pg
def test_a_watcher_on_postgresql_killed_mid_restore_leaves_it_whole_or_not_at_all(tmp_path: Path) -> None:
    """The journey's SIGKILL on PostgreSQL: the killed writer's session (and advisory lock) ends with it; the
    restarted ``watch --wait`` (or the asker) puts the half-written folder restore back before anything else."""
    import signal
    import subprocess
    import sys

    from support.cli import invoke
    from support.watch_helpers import WatchProcess, wait_until

    pgserver = pytest.importorskip("support.pgserver")
    try:
        dsn = pgserver.shared().fresh("handoffkill")
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    root, count = tmp_path / "vault", 200
    (root / "B").mkdir(parents=True)
    for i in range(count):
        (root / "B" / f"n{i:03d}.md").write_text(f"# {i}\n\nfirst {i}\n", encoding="utf-8")
    assert invoke("--db", dsn, "import", str(root)).returncode == 0
    t0 = format_time(now_micros())
    for i in range(count):
        (root / "B" / f"n{i:03d}.md").write_text(f"# {i}\n\nsecond {i}\n", encoding="utf-8")
    assert invoke("--db", dsn, "import", str(root)).returncode == 0
    watch = [
        sys.executable,
        "-m",
        "vaultsync",
        "--db",
        dsn,
        "watch",
        str(root),
        "--step-ms",
        "20000",
        "--debounce-ms",
        "60000",
        "--reconcile-s",
        "0",
    ]
    old = WatchProcess(tmp_path / "unused.db", root, command=watch)
    new = None
    asker = None
    try:
        old.wait_for("watching ")
        asker = subprocess.Popen(
            [sys.executable, "-m", "vaultsync", "--db", dsn, "restore", "--prefix", "B/", "--as-of", t0],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        first = root / "B" / "n000.md"
        wait_until(
            lambda: "first" in first.read_text(encoding="utf-8") or asker.poll() is not None,
            60,
            "the watcher to start writing the restore",
        )
        old.proc.send_signal(signal.SIGKILL)
        old.finish()
        new = WatchProcess(tmp_path / "unused.db", root, command=[*watch, "--wait"])
        _, err = asker.communicate(timeout=120)
        new.wait_for("watching ")
    finally:
        for proc in (asker, old.proc):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        if new is not None:
            new.proc.terminate()
            new.finish()
    firsts = sum("first" in (root / "B" / f"n{i:03d}.md").read_text(encoding="utf-8") for i in range(count))
    print(f"asker exit {asker.returncode}: {err.strip()}")
    assert firsts == (count if asker.returncode == 0 else 0), (firsts, asker.returncode, err)
    if asker.returncode != 0:
        assert err.startswith("Error: vault 'vault': the process that took it, pid ") and err.count("\n") == 1, err
    with Vault.open(dsn, name="vault", readonly=True) as vault:
        for i in range(0, count, 23):
            rel = f"B/n{i:03d}.md"
            assert vault.read(rel).content == (root / rel).read_text(encoding="utf-8")


@pytest.mark.anyio
@pytest.mark.slow
async def test_serve_watch_holding_the_vault_carries_out_a_cli_undo(tmp_path: Path) -> None:
    """The writer role held by ``serve --watch`` (the MCP server watches): ``undo`` from the command line is
    carried out by it, and its own client reads the result at once."""
    import os
    import sys

    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from support.cli import invoke
    from support.mcp_helpers import sc, watching

    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    (root / "Inbox.md").write_text("# Inbox\n", encoding="utf-8")
    assert invoke("import", str(root), db=db).returncode == 0
    (root / "Inbox.md").write_text("# Inbox\n\n- buy milk\n", encoding="utf-8")
    changed = invoke("import", str(root), "--json", db=db)
    batch = json.loads(changed.stdout)["batch_id"]
    server = StdioServerParameters(
        command=sys.executable,
        env=dict(os.environ),
        args=["-m", "vaultsync", "--db", str(db), "serve", str(root), "--watch"],
    )
    async with Client(server) as c:
        assert (await watching(c))["role"] == "watcher"
        undone = invoke("undo", str(batch), db=db)
        assert undone.returncode == 0, undone.stderr
        assert undone.stderr.strip().endswith(f"(undo of batch {batch})")
        note = sc(await c.call_tool("read_note", {"path": "Inbox.md"}))
        assert note["content"] == "# Inbox\n"
    with Vault.open(db, name="vault", readonly=True) as vault:
        assert vault.batch_info(vault.last_batch_id)["source"] == "undo"


def test_a_restore_whose_batch_is_refused_puts_its_files_back(two, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a crash: the watcher wrote the files, then the database refused the batch (away, or the lock lost
    with its session): the files go back as they were, and the asker gets the error, nothing half done."""
    from vaultsync.errors import StoreError
    from vaultsync.vault import recorder as recording

    watching, asking, root, t0 = two
    before = asking.last_batch_id

    def refused(batch: Any, rid: int) -> None:
        raise StoreError("the database refused the batch (a test)")

    monkeypatch.setattr(recording, "mark_done", refused)
    with Watcher(watching, **QUIET), pytest.raises(StoreError, match="a test"):
        handoff.perform(asking, "restore", handoff.restore_args(prefix="F/", as_of=t0))
    for name in "abcd":
        assert (root / "F" / f"{name}.md").read_text(encoding="utf-8") == f"# {name}\n\nsecond\n", name
    assert asking.last_batch_id == before and asking.sync().changed == 0


def test_the_asker_gets_the_writers_own_answer_after_its_followers_were_told(two) -> None:
    """The batch of a request commits before its writer tells its followers (``on_batch``) and then writes the
    answer: an asker that sees the request done in between waits for that answer, never answering from the batch
    alone (which knows no notes) nor before the followers heard of it."""
    watching, asking, root, _ = two
    told: list[int] = []

    def slow_follower(summary: Any) -> None:
        time.sleep(0.6)  # a follower that takes its time: the request is done, its answer not written yet
        told.append(summary.batch_id)

    with Watcher(watching, on_batch=slow_follower, **QUIET):
        (root / "F").rename(root / "G")
        scanned = handoff.summary_of(handoff.perform(asking, "scan", {}).answer)
        assert scanned.renamed == 4 and told == [scanned.batch_id]
        undone = handoff.restored_of(handoff.perform(asking, "undo", {"batch": scanned.batch_id}))
        assert undone.summary is not None and told == [scanned.batch_id, undone.summary.batch_id]
        notes = sorted(s.note or "" for s in undone.steps)
        assert notes == sorted(
            [f"renamed back from G/{n}.md" for n in "abcd"] + [f"renamed back to F/{n}.md" for n in "abcd"]
        ), notes
    assert (root / "F" / "a.md").read_text(encoding="utf-8") == "# a\n\nsecond\n" and not (root / "G").exists()

"""``/ready`` of a reader server (a plain ``serve``, another process watching) knows whether the vault is current:
from the heartbeat the watcher publishes in the store (``live/heartbeat.py``), on SQLite and on PostgreSQL.

Real processes, since the process boundary is the point: a ``vaultsync watch`` publishing every 0.3 s (so a dead
one is found stale within about 3 s), a reader ``serve --http``, a real ``vaultsync import``. The watcher's batches
are refused by a trigger the test puts on the batch table (a database refusing writes), and the watcher is
SIGKILLed. Nothing of the heartbeat reaches the vault's history."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from support.mcp_helpers import free_port, start_http, stop
from support.watch_helpers import WatchProcess

from vaultsync import Vault
from vaultsync.dsn import is_dsn

BEAT = {"VAULTSYNC_HEARTBEAT_S": "0.3"}
DEADLINE_S = 60.0


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.pg)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "db" / "vaultsync.db")
    pgserver = pytest.importorskip("support.pgserver")
    try:
        return str(pgserver.shared().fresh("ready"))
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))


def refuse_batches(db: str, refuse: bool) -> None:
    """Make the database refuse (or accept again) every new batch: a trigger on the batch table."""
    if is_dsn(db):
        import psycopg

        with psycopg.connect(db, autocommit=True) as con:
            if refuse:
                con.execute(
                    "CREATE FUNCTION refuse_batches() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'batches refused by the test'; END $$"
                )
                con.execute(
                    "CREATE TRIGGER refuse BEFORE INSERT ON batches FOR EACH ROW EXECUTE FUNCTION refuse_batches()"
                )
            else:
                con.execute("DROP TRIGGER refuse ON batches")
                con.execute("DROP FUNCTION refuse_batches()")
        return
    import apsw

    con = apsw.Connection(db)
    try:
        con.set_busy_timeout(10_000)
        if refuse:
            con.execute("CREATE TRIGGER refuse BEFORE INSERT ON batches BEGIN SELECT RAISE(ABORT, 'refused'); END")
        else:
            con.execute("DROP TRIGGER refuse")
    finally:
        con.close()


def ready(url: str) -> tuple[int, dict[str, Any]]:
    answer = httpx2.get(url + "/ready", timeout=10)
    return answer.status_code, answer.json()


def until(url: str, what: str, check: Callable[[int, dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        code, body = ready(url)
        if check(code, body):
            return body
        assert time.monotonic() < deadline, f"/ready never {what}: {code} {body}"
        time.sleep(0.05)


def last_batch(db: str) -> int:
    with Vault.open(db, name="notes", readonly=True) as vault:
        return vault.last_batch_id


def published(db: str) -> dict[str, Any] | None:
    with Vault.open(db, name="notes", readonly=True) as vault:
        found = vault.lock.beat()
    return None if found is None else found[0]


@pytest.mark.slow
def test_a_reader_servers_ready_follows_the_watchers_heartbeat(database: str, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(3):
        (root / f"Note {i}.md").write_text(f"# Note {i}\n\nfirst words\n", encoding="utf-8")
    with Vault.open(database, root=root) as vault:
        vault.sync()
    port = free_port()
    server = start_http(database, root, port)  # type: ignore[arg-type]
    url = f"http://127.0.0.1:{port}"
    watcher: WatchProcess | None = None
    try:
        code, body = ready(url)  # no watcher ever ran: nothing to tell
        assert (code, body["vault_current"], body["watcher"], body["heartbeat_age_seconds"]) == (200, None, None, None)

        watcher = WatchProcess(database, root, env=BEAT)  # type: ignore[arg-type]
        watcher.wait_for("watching ")
        body = until(url, "current", lambda code, body: code == 200 and body["vault_current"] is True)
        assert body["watcher"] == "watching" and body["heartbeat_age_seconds"] < 5, body
        before = last_batch(database)
        time.sleep(1.0)  # three heartbeats or more, and no batch
        assert last_batch(database) == before

        # the database refuses the watcher's batches: not current while they fail, current again after
        refuse_batches(database, True)
        (root / "Note 0.md").write_text("# Note 0\n\nwritten while batches fail\n", encoding="utf-8")
        body = until(url, "503 while batches fail", lambda code, body: code == 503)
        assert (body["vault_current"], body["watcher"], body["database"]) == (False, "failing", "ok"), body
        refuse_batches(database, False)
        until(url, "current again", lambda code, body: code == 200 and body["vault_current"] is True)

        # the watcher killed: its heartbeat goes stale
        os.kill(watcher.proc.pid, signal.SIGKILL)
        watcher.finish()
        body = until(url, "503 once the watcher is dead", lambda code, body: code == 503)
        assert (body["vault_current"], body["watcher"]) == (False, "stale") and body["heartbeat_age_seconds"] > 2.9

        # a one-shot import while nobody watches: not current while it runs (frozen here, mid-import)
        for i in range(600):
            (root / "Many" / f"n{i:03d}.md").parent.mkdir(exist_ok=True)
            (root / "Many" / f"n{i:03d}.md").write_text(f"# N {i}\n\nwords {i}\n", encoding="utf-8")
        importing = subprocess.Popen(
            [sys.executable, "-m", "vaultsync", "--db", database, "import", str(root), "--vectors-wait", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "VAULTSYNC_HEARTBEAT_S": "60"},
        )
        try:
            deadline = time.monotonic() + DEADLINE_S
            while (published(database) or {}).get("state") != "importing":
                assert importing.poll() is None, "the import ended before it was seen importing"
                assert time.monotonic() < deadline
                time.sleep(0.01)
            importing.send_signal(signal.SIGSTOP)
            code, body = ready(url)
            assert (code, body["vault_current"], body["watcher"]) == (503, False, "importing"), body
        finally:
            importing.send_signal(signal.SIGCONT)
            out, err = importing.communicate(timeout=DEADLINE_S)
        assert importing.returncode == 0, err
        code, body = ready(url)  # imported, and watched no more
        assert (code, body["vault_current"], body["watcher"]) == (503, False, "stopped"), body

        # a watcher again: current
        watcher = WatchProcess(database, root, env=BEAT)  # type: ignore[arg-type]
        watcher.wait_for("watching ")
        until(url, "current after recovery", lambda code, body: code == 200 and body["vault_current"] is True)
        watcher.proc.send_signal(signal.SIGTERM)
        assert watcher.finish() == 0, watcher.stderr
        assert "Traceback" not in watcher.stderr
        body = until(url, "503 once the watcher stopped", lambda code, body: code == 503)
        assert body["watcher"] == "stopped", body
    finally:
        if watcher is not None and watcher.proc.poll() is None:
            watcher.proc.kill()
            watcher.finish()
        log = stop(server)
    assert "Traceback" not in log, log
    with Vault.open(database, name="notes", readonly=True) as vault:
        assert vault.read("Note 0.md").content == "# Note 0\n\nwritten while batches fail\n"
        assert len(vault.ls()) == 603


@pytest.mark.anyio
async def test_vault_status_and_stats_say_what_the_heartbeat_says(tmp_path: Path, cli: Any) -> None:
    """A reader's ``vault_status`` and ``vaultsync stats`` tell the same facts as ``/ready``: nothing before any
    watcher ran, current while one watches (in another vault object: another process's as far as they know), and
    stopped, not current, once it stopped."""
    from mcp import Client
    from support.mcp_helpers import sc

    from vaultsync.live.watcher import Watcher
    from vaultsync.server import ServeConfig, build_server

    db = tmp_path / "vaultsync.db"
    root = tmp_path / "notes"
    root.mkdir()
    (root / "Inbox.md").write_text("# Inbox\n", encoding="utf-8")
    with Vault.open(db, root=root) as writer:
        writer.sync()
        with Vault.open(db, name="notes", readonly=True) as reader:
            async with Client(build_server(ServeConfig.of(reader))) as c:

                async def told() -> dict[str, Any]:
                    return {k: sc(await c.call_tool("vault_status", {}))["watcher"][k] for k in ("current", "state")}

                def stats() -> dict[str, Any]:
                    ran = cli("stats", "--json", db=db)
                    assert ran.returncode == 0, ran.stderr
                    return json.loads(ran.stdout)["watcher"]

                assert await told() == {"current": None, "state": None}
                assert stats()["current"] is None
                with Watcher(writer, step_ms=50, debounce_ms=200, heartbeat_s=0.2):
                    assert await told() == {"current": True, "state": "watching"}
                    facts = stats()
                    assert (facts["current"], facts["state"], facts["pending"]) == (True, "watching", 0)
                    assert 0 <= facts["heartbeat_age_s"] < 5
                assert await told() == {"current": False, "state": "stopped"}
                assert (stats()["current"], stats()["state"]) == (False, "stopped")


def test_the_heartbeat_is_published_at_a_bounded_rate_whatever_pokes_it(tmp_path: Path) -> None:
    """One write every ``every_s``, and at most one a second more however often something changes (``poke``):
    never a write per event. Published where readers read it, and withdrawn by ``stop(None)``."""
    from vaultsync.live.heartbeat import MIN_GAP_S, Heartbeat

    root = tmp_path / "notes"
    root.mkdir()
    with Vault.open(tmp_path / "vaultsync.db", root=root) as vault, vault.writing():
        beat = Heartbeat(vault.lock, lambda: {"mode": "watch", "state": "watching", "every_s": 0.5}, 0.5).start()
        started = time.monotonic()
        while time.monotonic() - started < 2.0:  # thousands of pokes
            beat.poke()
            time.sleep(0.001)
        took = time.monotonic() - started
        assert vault.lock.beat() is not None
        beat.stop(None)
        assert vault.lock.beat() is None
    assert 2 <= beat.published <= 2 + took / MIN_GAP_S + 1, beat.published  # the first, the last, and the paced


WATCHING = {"mode": "watch", "state": "watching", "every_s": 5.0, "pending": 0, "lag_s": 0.0}


@pytest.mark.parametrize(
    ("facts", "age", "current", "state", "lag"),
    [
        (WATCHING, 1.0, True, "watching", 0.0),
        (WATCHING, 17.5, False, "stale", 0.0),  # three beats and two seconds missed
        ({**WATCHING, "pending": 2, "lag_s": 50.0}, 5.0, True, "watching", 55.0),  # still waiting as it ages
        ({**WATCHING, "pending": 2, "lag_s": 50.0}, 11.0, False, "watching", 61.0),  # past READY_LAG_S
        ({**WATCHING, "state": "failing"}, 0.5, False, "failing", 0.0),
        ({**WATCHING, "state": "stopped"}, 3600.0, False, "stopped", 0.0),  # stopped is never stale
        ({**WATCHING, "state": "resting"}, 0.5, False, "resting", 0.0),  # a state this version does not know
        (
            {"mode": "import", "state": "importing", "every_s": 5.0, "pending": None, "lag_s": 2.0},
            1.0,
            False,
            "importing",
            3.0,
        ),
    ],
)
def test_the_rule_that_reads_a_heartbeat(
    facts: dict[str, Any], age: float, current: bool, state: str, lag: float
) -> None:
    from vaultsync.live.heartbeat import currency

    told = currency((facts, age))
    assert (told.current, told.state, told.lag_s, told.heartbeat_age_s) == (current, state, lag, age)


def test_a_heartbeat_file_is_read_whole_or_not_at_all(tmp_path: Path) -> None:
    """Another process may leave anything beside the database: a heartbeat file that is too large, not JSON or
    not an object is no heartbeat (readers say null), and a large one is never read into memory whole."""
    from vaultsync.store import beat_file

    path = tmp_path / "db.vault.beat"
    beat_file.publish(path, tmp_path / "db", {"state": "watching"})
    answer = beat_file.read(path)
    assert answer is not None and answer[0] == {"state": "watching"}
    path.write_text(json.dumps({"state": "watching", "pad": "x" * beat_file.LIMIT}))
    assert beat_file.read(path) is None
    for text in ("[1, 2]", "{not json"):
        path.write_text(text)
        assert beat_file.read(path) is None

"""A vault survives its database: a real PostgreSQL, started by the test, is restarted (``-m fast``: SIGINT,
``-m immediate``: SIGQUIT, then crash recovery) or has its ``vaultsync`` sessions terminated
(``pg_terminate_backend``) in the middle of a burst of edits under ``vaultsync watch``.

The oracle is the folder: every file written in the burst is recorded once (one revision each: no batch
twice), and at no moment do two processes write (a second ``watch`` started meanwhile is refused). The fence
itself (``store/pg/fence.py``) is shown apart: a writer whose lock session was lost cannot commit once another
process took the lock, and a takeover waits for a batch already in flight."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.watch_helpers import WatchProcess, no_thread_leaks, wait_until  # noqa: F401 - a fixture

from vaultsync import Vault
from vaultsync.errors import LockLost

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")

SIGNALS = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT}
"""What ``pg_ctl stop -m fast`` and ``-m immediate`` send the postmaster."""


class Cluster:
    """This module's own server (the shared one must not be restarted under other tests), restartable in place."""

    def __init__(self) -> None:
        self.server = pgserver.PgServer.start()

    def dsn(self, hint: str) -> str:
        return self.server.fresh_database(hint)

    def stop(self, mode: str) -> None:
        """Stop the server as ``pg_ctl stop -m MODE`` does; the socket goes with it (connections are refused)."""
        self.server.process.send_signal(SIGNALS[mode])
        self.server.process.wait(timeout=60)

    def start(self) -> None:
        """Start it again on the same data folder and socket (crash recovery after ``immediate``)."""
        self.server = pgserver.PgServer.start(self.server.folder, data=self.server.data)

    def terminate(self, dsn: str, like: str = "vaultsync%") -> int:
        """``pg_terminate_backend`` every session of ``dsn``'s database whose application_name is ``like``."""
        import psycopg

        with psycopg.connect(dsn, autocommit=True, application_name="test admin") as con:
            return len(
                con.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                    "current_database() AND application_name LIKE %s AND pid <> pg_backend_pid()",
                    (like,),
                ).fetchall()
            )

    def writers(self, dsn: str) -> list[str]:
        """The sessions holding a writer lock now (one per writing process)."""
        import psycopg

        with psycopg.connect(dsn, autocommit=True, application_name="test admin") as con:
            return [
                r[0]
                for r in con.execute(
                    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a "
                    "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                    "AND l.objsubid = 1 AND a.datname = current_database()"
                ).fetchall()
            ]

    def close(self) -> None:
        self.server.stop()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    try:
        made = Cluster()
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    yield made
    made.close()


def _write(root: Path, i: int) -> None:
    (root / f"burst {i:02}.md").write_text(f"# Burst {i}\n\nedit number {i} of the burst\n", encoding="utf-8")


def _recorded(dsn: str, root: Path) -> dict[str, int]:
    """Each note of the vault now, with how many revisions it has."""
    with Vault.open(dsn, name=root.name, readonly=True) as vault:
        return {r.path: len(vault.history(r.path)) for r in vault.ls()}


def _on_disk(root: Path) -> set[str]:
    return {p.name for p in root.glob("*.md")}


@pytest.mark.parametrize("event", ["fast", "immediate", "terminate"])
def test_watch_records_every_edit_of_a_burst_across_a_restart_or_a_terminated_session(
    cluster: Cluster, tmp_path: Path, event: str
) -> None:
    dsn = cluster.dsn(f"outage_{event}")
    root = tmp_path / "vault"
    root.mkdir()
    (root / "start.md").write_text("# Start\n", encoding="utf-8")
    with Vault.open(dsn, root=root) as vault:
        vault.sync()
    watcher = WatchProcess(dsn, root, "--step-ms", "50", "--debounce-ms", "200", "--max-outage-s", "120")  # type: ignore[arg-type]
    second: WatchProcess | None = None
    try:
        watcher.wait_for("watching")
        for i in range(10):
            _write(root, i)
            time.sleep(0.05)
        if event == "terminate":
            assert cluster.terminate(dsn) >= 1
        else:
            cluster.stop(event)
        for i in range(10, 20):  # while the database is away (or the sessions are being made again)
            _write(root, i)
            time.sleep(0.05)
        if event != "terminate":
            second = WatchProcess(dsn, root)  # type: ignore[arg-type]
            assert second.finish(timeout=60) != 0  # refused: it cannot even reach the database
            assert "cannot use the database" in second.stderr and "Traceback" not in second.stderr
            cluster.start()
        for i in range(20, 30):
            _write(root, i)
            time.sleep(0.05)
        wanted = _on_disk(root)
        recorded = wait_until(
            lambda: (r := _recorded(dsn, root)) and set(r) == wanted and r, 90, "every file of the burst recorded"
        )
        assert recorded == {path: 1 for path in wanted}  # each edit once: no batch written twice
        watcher.wait_for("took the writer lock back")
        assert cluster.writers(dsn) == [w for w in cluster.writers(dsn) if w.startswith("vaultsync writer")]
        assert len(cluster.writers(dsn)) == 1
        second = WatchProcess(dsn, root)  # type: ignore[arg-type]
        assert second.finish(timeout=60) != 0  # the watcher holds the vault again: a second one is refused
        assert "already being written" in second.stderr
        _write(root, 30)  # and the first one still records
        wait_until(lambda: "burst 30.md" in _recorded(dsn, root), 60, "an edit after the outage recorded")
    finally:
        watcher.proc.send_signal(signal.SIGINT)
        code = watcher.finish(timeout=60)
    log = watcher.stderr
    assert code == 0, log
    assert "Traceback" not in log, log
    said = [line for line in log.splitlines() if "lost the connection to the database" in line]
    assert len(said) == 1, log  # said once, however many attempts the outage took
    assert log.count("reconnected to the database") == 1, log
    assert log.count("could not look for write requests") <= 1, log  # said once, not at every poll of the outage


def test_a_writer_whose_lock_session_was_lost_cannot_commit_after_another_took_the_lock(
    cluster: Cluster, tmp_path: Path
) -> None:
    dsn = cluster.dsn("fence")
    root = tmp_path / "vault"
    root.mkdir()
    (root / "a.md").write_text("# A\n", encoding="utf-8")
    first = Vault.open(dsn, root=root, name="v", lock_command="first writer")
    second = Vault.open(dsn, root=root, name="v", lock_command="second writer")
    try:
        assert first.lock.hold() and first.sync().batch_id is not None
        assert cluster.terminate(dsn, "vaultsync writer: first writer%") == 1  # only its lock's session
        assert second.lock.hold()  # the lock went with that session: the other process takes it
        assert first.lock.held  # and the first one does not know yet
        (root / "b.md").write_text("# B\n", encoding="utf-8")
        batches = first.last_batch_id
        with pytest.raises(LockLost, match="another process took vault"):
            first.sync()
        assert first.last_batch_id == batches and not first.lock.held  # nothing written; it knows now
        with pytest.raises(Exception, match="already being written by"):
            first.sync()  # it cannot take the lock back while the other holds it
        assert second.sync().added == 1
        second.lock.release()
        assert first.lock.hold()  # once the other lets go, the first takes the lock again and writes
        (root / "c.md").write_text("# C\n", encoding="utf-8")
        assert first.sync().added == 1
    finally:
        second.close()
        first.close()


def test_a_takeover_waits_for_the_batch_in_flight_of_the_writer_that_lost_its_session(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The epoch is raised by an UPDATE of the head row the batch holds: the new holder returns from taking the
    lock only after the old holder's batch committed, so it plans its writes on what that batch wrote."""
    from support.changes import change

    dsn = cluster.dsn("inflight")
    root = tmp_path / "vault"
    root.mkdir()
    first = Vault.open(dsn, root=root, name="v", lock_command="first writer")
    second = Vault.open(dsn, root=root, name="v", lock_command="second writer")
    took: list[float] = []
    try:
        assert first.lock.hold()
        store: Any = first._store
        with store.batch(first.id, source="test") as batch:
            batch.add_revision(*change("inflight.md", "# In flight\n"))
            assert cluster.terminate(dsn, "vaultsync writer: first writer%") == 1
            taker = threading.Thread(target=lambda: took.append(time.monotonic()) if second.lock.hold() else None)
            taker.start()
            taker.join(1.0)
            assert taker.is_alive() and not took  # waiting for this batch's head row
            committed = time.monotonic()
        taker.join(60)
        assert took and took[0] >= committed
        assert [r.path for r in second.ls()] == ["inflight.md"]
        with pytest.raises(LockLost):
            first.sync()
    finally:
        second.close()
        first.close()


def test_watch_exits_after_the_outage_bound_and_the_next_start_records_what_was_pending(
    cluster: Cluster, tmp_path: Path
) -> None:
    dsn = cluster.dsn("bound")
    root = tmp_path / "vault"
    root.mkdir()
    (root / "start.md").write_text("# Start\n", encoding="utf-8")
    watcher = WatchProcess(dsn, root, "--step-ms", "50", "--debounce-ms", "200", "--max-outage-s", "3")  # type: ignore[arg-type]
    try:
        watcher.wait_for("watching")
        cluster.stop("fast")
        for i in range(3):
            _write(root, i)
        code = watcher.finish(timeout=90)
    finally:
        if cluster.server.process.poll() is not None:
            cluster.start()
    assert code != 0
    last = watcher.lines[-1]
    assert "the database has been unreachable for" in last and "3 changed paths pending" in last, watcher.stderr
    assert "Traceback" not in watcher.stderr
    again = WatchProcess(dsn, root)  # type: ignore[arg-type]
    try:
        again.wait_for("watching")
        assert _recorded(dsn, root) == {"start.md": 1, **{f"burst {i:02}.md": 1 for i in range(3)}}
    finally:
        again.proc.send_signal(signal.SIGINT)
        assert again.finish() == 0


CALLS = {
    "search_notes": {"query": "plumber"},
    "read_note": {"path": "Inbox.md"},
    "note_history": {"path": "Inbox.md"},
    "diff_note": {"path": "Projects/Atlas.md", "from": "2024-01-15"},
    "list_changes": {"since": "2024-01-15"},
    "list_notes": {"limit": 5},
    "get_links": {"path": "Inbox.md"},
    "vault_status": {},
    "list_deleted": {},
    "list_attachments": {},
    "read_attachment": {"path": "Missing.png"},  # the vault has none: its not-found answer, read from the store
}
"""One call of every read tool."""
RETURN_S = 10.0
"""Within this long of the database's return, both servers answer every tool and deliver subscriptions."""


async def _every_tool(c: Any) -> None:
    from support.mcp_helpers import READ_TOOLS, error_text, sc

    assert sorted(t.name for t in (await c.list_tools()).tools) == sorted(READ_TOOLS) == sorted(CALLS)
    for name, args in CALLS.items():
        result = await c.call_tool(name, args)
        if name == "read_attachment":  # no attachment in this vault: the store's own answer that it has none
            assert result.is_error and "Missing.png" in error_text(result), error_text(result)
            continue
        sc(result)  # fails on a tool error


async def _answers_every_tool(c: Any, within: float) -> float:
    """Call every tool until all answer (each failure one clear line, never a traceback); the seconds it took."""
    import anyio
    from support.mcp_helpers import error_text

    started = time.monotonic()
    with anyio.fail_after(within):
        while True:
            try:
                await _every_tool(c)
                return time.monotonic() - started
            except AssertionError:
                said = error_text(await c.call_tool("read_note", {"path": "Inbox.md"}))
                assert said == "" or ("\n" not in said.strip() and "Traceback" not in said), said
                await anyio.sleep(0.2)


@pytest.mark.anyio
@pytest.mark.parametrize("event", ["fast", "immediate", "terminate"])
async def test_two_http_servers_answer_every_tool_and_deliver_subscriptions_after_the_database_returns(
    cluster: Cluster, tmp_path: Path, event: str
) -> None:
    import anyio
    import httpx2
    from mcp import Client
    from support.mcp_helpers import (
        error_text,
        free_port,
        http_client,
        make_history_vault,
        next_update,
        start_http,
        stop,
        watching,
    )

    dsn = cluster.dsn(f"servers_{event}")
    root = tmp_path / "notes"
    make_history_vault(root, dsn)  # type: ignore[arg-type]
    ports = [free_port(), free_port()]
    procs = [start_http(dsn, root, ports[0], "--watch"), start_http(dsn, root, ports[1])]  # type: ignore[arg-type]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        async with (
            Client(http_client(urls[0] + "/mcp")) as watching_server,
            Client(http_client(urls[1] + "/mcp")) as reader,
        ):
            clients = [watching_server, reader]
            await watching(watching_server)
            for c in clients:
                await _every_tool(c)
            for url in urls:  # the reader knows from the watcher's heartbeat in the store
                body = httpx2.get(url + "/ready").json()
                age = body.pop("heartbeat_age_seconds")
                assert body == {
                    "status": "ready",
                    "database": "ok",
                    "vault_current": True,
                    "watcher": "watching",
                    "watcher_lag_seconds": 0.0,
                    "audit_log": None,
                }
                assert age == 0.0 if url == urls[0] else 0.0 <= age < 30, age
            async with (
                watching_server.listen(resource_subscriptions=["note://Inbox.md"]) as sub_a,
                reader.listen(resource_subscriptions=["note://Inbox.md"]) as sub_b,
            ):
                if event == "terminate":
                    assert cluster.terminate(dsn) >= 4  # each server's store, readers, listener; the lock
                else:
                    cluster.stop(event)
                    for c in clients:  # meanwhile: one clear line
                        said = error_text(await c.call_tool("read_note", {"path": "Inbox.md"}))
                        assert "cannot use the database" in said and "\n" not in said.strip(), said
                    for url in urls:
                        assert httpx2.get(url + "/health").json() == {"status": "alive"}
                        down = httpx2.get(url + "/ready")
                        assert down.status_code == 503 and down.json()["database"] == "unreachable"
                # an edit while the database is away: the watcher's catch-up records it once it is back
                (root / "Inbox.md").write_text("# Inbox\n\n- edited while the database was away\n", encoding="utf-8")
                if event != "terminate":
                    await anyio.sleep(1.0)
                    cluster.start()
                back = time.monotonic()
                for sub in (sub_a, sub_b):  # the subscriptions opened before the outage deliver it
                    await next_update(sub, "note://Inbox.md", timeout=max(0.1, back + RETURN_S - time.monotonic()))
                delivered = time.monotonic() - back
                took = [await _answers_every_tool(c, max(0.1, back + RETURN_S - time.monotonic())) for c in clients]
                print(
                    f"{event}: subscriptions delivered {delivered:.2f} s after the return; every tool answered "
                    f"{max(took) + delivered:.2f} s after it"
                )
            from support.mcp_helpers import sc

            for c in clients:
                assert (
                    "edited while the database was away"
                    in sc(await c.call_tool("read_note", {"path": "Inbox.md"}))["content"]
                )
            for url in urls:
                assert httpx2.get(url + "/ready").status_code == 200
    finally:
        logs = [stop(p) for p in procs]
    for log in logs:
        assert "Traceback" not in log, log
        assert "/ready" in log and '"GET /health" 200' in log or event == "terminate", log
        # said once per process, though ``serve --watch`` has two stores (the writer's, the readers') and a pool
        assert log.count("lost the connection to the database") == 1, log
        assert log.count("reconnected to the database") == 1, log
        assert log.count("could not look for write requests") <= 1, log  # not at every poll of the outage


def test_a_watcher_and_a_server_follow_a_standby_promoted_to_primary(tmp_path: Path) -> None:
    """The connection string names both servers with ``target_session_attrs=read-write``: when the primary dies
    (``-m immediate``) and the standby is promoted, every new session goes to the new primary; the watcher takes
    its lock back there and its catch-up scan records what the standby had not received, and a reader server
    answers from it."""
    from urllib.parse import quote

    import anyio
    import psycopg
    from mcp import Client
    from support.mcp_helpers import free_port, http_client, sc, start_http, stop

    try:
        primary = pgserver.PgServer.start(options=("-c", "wal_level=replica"))
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    standby = None
    watcher = server = None
    try:
        dsn = primary.fresh_database("promote")
        standby = pgserver.start_standby(primary, "standby")
        hosts = ",".join(quote(str(s.socket_dir), safe="") for s in (primary, standby))
        both = dsn.replace(quote(str(primary.socket_dir), safe=""), hosts) + "&target_session_attrs=read-write"
        root = tmp_path / "vault"
        root.mkdir()
        (root / "start.md").write_text("# Start\n", encoding="utf-8")
        watcher = WatchProcess(both, root, "--step-ms", "50", "--debounce-ms", "200")  # type: ignore[arg-type]
        watcher.wait_for("watching")
        port = free_port()
        server = start_http(both, root.name, port)  # type: ignore[arg-type]  # a reader, by the vault's name
        for i in range(5):
            _write(root, i)
        wait_until(lambda: len(_recorded(both, root)) == 6, 60, "the first edits recorded on the primary")
        primary.process.send_signal(signal.SIGQUIT)  # the primary dies (-m immediate)
        primary.process.wait(timeout=60)
        for i in range(5, 10):
            _write(root, i)
        with psycopg.connect(standby.dsn(dsn.rsplit("/", 1)[1].split("?")[0]), autocommit=True) as con:
            assert con.execute("SELECT pg_promote(wait => true)").fetchone()[0]
        wanted = _on_disk(root)
        recorded = wait_until(
            lambda: (r := _recorded(both, root)) and set(r) == wanted and r,
            90,
            "every edit recorded on the promoted standby",
        )
        assert recorded == {path: 1 for path in wanted}
        watcher.wait_for("took the writer lock back")

        async def read_last() -> str:
            async with Client(http_client(f"http://127.0.0.1:{port}/mcp")) as c:
                with anyio.fail_after(30):
                    while True:
                        got = await c.call_tool("read_note", {"path": "burst 09.md"})
                        if not got.is_error:
                            return sc(got)["content"]
                        await anyio.sleep(0.2)

        assert "edit number 9" in anyio.run(read_last)
    finally:
        if watcher is not None:
            watcher.proc.send_signal(signal.SIGINT)
            assert watcher.finish(timeout=60) == 0, watcher.stderr
            assert "Traceback" not in watcher.stderr, watcher.stderr
        if server is not None:
            assert "Traceback" not in stop(server)
        if standby is not None:
            standby.stop()
        primary.stop()


def test_the_ui_answers_again_after_a_restart(cluster: Cluster, tmp_path: Path) -> None:
    """``vaultsync ui`` is a long-lived process too: while the database is away its API answers one line, and
    once it is back the same process answers again."""
    import httpx2
    from support.ui_page import ui_process

    dsn = cluster.dsn("ui")
    root = tmp_path / "vault"
    root.mkdir()
    (root / "a.md").write_text("# A\n", encoding="utf-8")
    with Vault.open(dsn, root=root) as vault:
        vault.sync()
    with ui_process(dsn) as ui:
        url, token = ui.base + "/api/tree", ui.token
        try:
            assert httpx2.get(url, params={"token": token}).status_code == 200
            cluster.stop("fast")
            away = httpx2.get(url, params={"token": token})
            assert away.status_code == 400 and "cannot use the database" in away.json()["error"]
            cluster.start()
            back = time.monotonic()
            wait_until(
                lambda: httpx2.get(url, params={"token": token}).status_code == 200, RETURN_S, "the ui answering again"
            )
            print(f"ui: answering {time.monotonic() - back:.2f} s after the return")
        finally:
            if cluster.server.process.poll() is not None:
                cluster.start()

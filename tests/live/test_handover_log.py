"""What a watcher's log says about failed batches: "recording again after N failed attempts" ends a real run of
failures, and never a normal hand-over: a watcher whose batches failed, then lost the vault to another process
(which recorded it meanwhile), takes it over again when that process stops without claiming to recover from
failures that were over long before.

The database refuses batches through a trigger the test puts on the batch table; the watcher loses its lock on
PostgreSQL when its lock session is terminated (``pg_terminate_backend``), as in an outage."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.watch_helpers import no_thread_leaks, wait_until  # noqa: F401  (fixtures)

from vaultsync import Vault
from vaultsync.dsn import is_dsn
from vaultsync.live.watcher import Watcher
from vaultsync.live.writer_role import WriterRole

FAST = {"step_ms": 50, "debounce_ms": 300, "reconcile_s": 0}
RECOVERED = "recording again after"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.pg)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "vaultsync.db")
    pgserver = pytest.importorskip("support.pgserver")
    try:
        return str(pgserver.shared().fresh("handover"))
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def pg_database() -> str:
    """A PostgreSQL database: only there can a watcher lose its lock to another process while it runs (a SQLite
    watcher's lock lasts as long as its process)."""
    pgserver = pytest.importorskip("support.pgserver")
    try:
        return str(pgserver.shared().fresh("handover"))
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "Inbox.md").write_text("# Inbox\n", encoding="utf-8")
    return folder


@pytest.fixture
def log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.INFO, logger="vaultsync.live.watcher"):
        yield caplog


def execute(db: str, *statements: str) -> None:
    """Run SQL on the database as its owner (an independent connection)."""
    if is_dsn(db):
        import psycopg

        with psycopg.connect(db, autocommit=True) as con:
            for statement in statements:
                con.execute(statement)
        return
    import apsw

    con = apsw.Connection(db)
    try:
        con.set_busy_timeout(10_000)
        for statement in statements:
            con.execute(statement)
    finally:
        con.close()


def refuse_batches(db: str, refuse: bool) -> None:
    if is_dsn(db):
        if refuse:
            execute(
                db,
                "CREATE FUNCTION refuse_batches() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'batches refused by the test'; END $$",
                "CREATE TRIGGER refuse BEFORE INSERT ON batches FOR EACH ROW EXECUTE FUNCTION refuse_batches()",
            )
        else:
            execute(db, "DROP TRIGGER refuse ON batches", "DROP FUNCTION refuse_batches()")
    elif refuse:
        execute(db, "CREATE TRIGGER refuse BEFORE INSERT ON batches BEGIN SELECT RAISE(ABORT, 'refused'); END")
    else:
        execute(db, "DROP TRIGGER refuse")


def fail_twice(watcher: Watcher, root: Path, log: pytest.LogCaptureFixture) -> None:
    """Two batches of ``watcher`` refused by the database."""
    failures = watcher.failures
    (root / "Inbox.md").write_text("# Inbox\n\n- while batches are refused\n", encoding="utf-8")
    wait_until(lambda: watcher.failures >= failures + 2, what="two refused batches")
    assert "batch failed, will retry" in log.text


def test_a_real_run_of_failures_ends_with_one_line(database: str, root: Path, log: pytest.LogCaptureFixture) -> None:
    with Vault.open(database, root=root) as vault, Watcher(vault, **FAST) as watcher:
        refuse_batches(database, True)
        fail_twice(watcher, root, log)
        refuse_batches(database, False)
        wait_until(lambda: "while batches are refused" in vault.read("Inbox.md").content, what="the edit recorded")
        wait_until(lambda: RECOVERED in log.text, what="the line that ends the failures")
    assert log.text.count(RECOVERED) == 1


@pytest.mark.pg
def test_a_normal_hand_over_says_no_failures(pg_database: str, root: Path, log: pytest.LogCaptureFixture) -> None:
    """The watcher's batches fail, its lock goes with its session, another process takes the vault and records it;
    when that one stops, the watcher takes over again: it says so, and nothing about failed attempts."""
    database = pg_database
    with Vault.open(database, root=root) as vault, Watcher(vault, **FAST) as watcher:
        refuse_batches(database, True)
        fail_twice(watcher, root, log)
        other = Vault.open(database, root=root)
        try:
            execute(
                database,
                "SELECT pg_terminate_backend(backend_pid) FROM writers WHERE vault = 'notes'",
            )
            role = WriterRole(other)
            wait_until(role.take, what="the other process taking the lock")
            refuse_batches(database, False)
            other.sync()  # the other process records the vault
            wait_until(lambda: "standing by" in log.text, what="the watcher standing by")
            assert "while batches are refused" in vault.read("Inbox.md").content
            role.release()  # a normal stop: the watcher takes over
            wait_until(lambda: "took the writer lock back" in log.text, what="the take-over")
        finally:
            other.close()
        (root / "Inbox.md").write_text("# Inbox\n\n- after the hand-over\n", encoding="utf-8")
        wait_until(lambda: "after the hand-over" in vault.read("Inbox.md").content, what="recorded after the hand-over")
    assert RECOVERED not in log.text, log.text

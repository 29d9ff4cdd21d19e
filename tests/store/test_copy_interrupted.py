"""``vaultsync copy`` into PostgreSQL is all-or-nothing per vault: interrupted by an immediate restart of the server
(``pg_ctl restart -m immediate``: SIGQUIT, crash recovery) it leaves no part of the vault, and run again it copies
the whole vault; a copy into SQLite closes its file cleanly (no ``-wal`` or ``-shm`` left beside it)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vaultsync import Vault

pgserver = pytest.importorskip("support.pgserver")

BATCHES = 400
T0 = 1_700_000_000_000_000


@pytest.fixture(scope="module")
def server() -> Iterator[object]:
    """This module's own server (the shared one must not be restarted under other tests)."""
    try:
        own = pgserver.PgServer.start()
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    yield own
    own.stop()


def restart_immediate(server: object) -> object:
    """``pg_ctl restart -m immediate``: SIGQUIT to the postmaster, then start on the same data folder and socket."""
    server.process.send_signal(signal.SIGQUIT)  # type: ignore[attr-defined]
    server.process.wait(timeout=60)  # type: ignore[attr-defined]
    return pgserver.PgServer.start(server.folder, data=server.data)  # type: ignore[attr-defined]


def history(db: Path, root: Path) -> None:
    root.mkdir()
    with Vault.open(db, root=root) as vault:
        for i in range(BATCHES):
            (root / f"n{i % 20:02d}.md").write_text(f"# Note {i % 20}\n\nrevision {i} of the tide tables\n", "utf-8")
            vault.sync(known_at=T0 + i * 1_000_000)


def answers(db: object) -> list[object]:
    with Vault.open(db, name="notes", readonly=True) as vault:  # type: ignore[arg-type]
        said: list[object] = [len(vault.changes(0, limit=10_000))]
        for i in (0, BATCHES // 2, BATCHES - 1):
            said.append([(r.path, r.content_hash) for r in vault.ls(as_of=T0 + i * 1_000_000)])
        said.append([h["path"] for h in vault.search("revision 149", mode="keyword").hits])
        return said


def copy(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "copy", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow
@pytest.mark.pg
def test_an_interrupted_copy_leaves_nothing_and_a_rerun_copies_the_whole_vault(server, tmp_path: Path) -> None:
    import psycopg

    src = tmp_path / "src.db"
    history(src, tmp_path / "notes")
    dsn = server.fresh_database("copyint")
    running = copy(str(src), dsn)
    with psycopg.connect(dsn, autocommit=True) as con:
        for _ in range(600):  # bounded: 60 s; until the copy is writing the vault (batches committed, or its
            # transaction open with writes for a moment)
            if con.execute("SELECT to_regclass('batches')").fetchone()[0] is not None:  # (the schema is made first)
                committed = con.execute("SELECT count(*) FROM batches").fetchone()[0]
                writing = con.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL "
                    "AND now() - xact_start > interval '200 milliseconds'"
                ).fetchone()[0]
                if committed >= 5 or writing:
                    break
            assert running.poll() is None, running.communicate()
            time.sleep(0.1)
        con.execute("CHECKPOINT")  # what was committed is on disk, as a server that waits for its log keeps it
    server = restart_immediate(server)
    try:
        _, err = running.communicate(timeout=120)
        assert running.returncode != 0 and "Traceback" not in err, err
        assert err.strip().splitlines()[-1].startswith("Error: cannot use the database"), err
        with psycopg.connect(dsn, autocommit=True) as con:  # nothing of the vault: no vault row, no batch
            assert con.execute("SELECT count(*) FROM vaults").fetchone()[0] == 0
            assert con.execute("SELECT count(*) FROM batches").fetchone()[0] == 0
        again = copy(str(src), dsn)
        out, err = again.communicate(timeout=300)
        assert again.returncode == 0 and f"{BATCHES} batches" in out, err
        assert answers(dsn) == answers(src)

        back = tmp_path / "back.db"
        done = copy(dsn, str(back))
        assert done.wait(timeout=300) == 0
        assert sorted(p.name for p in tmp_path.glob("back.db*")) == ["back.db"]
        assert answers(back) == answers(src)
        assert sorted(p.name for p in tmp_path.glob("back.db*")) == ["back.db"]  # read, it stays one file
    finally:
        server.stop()

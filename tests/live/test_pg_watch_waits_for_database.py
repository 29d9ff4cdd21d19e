"""A watcher started while its PostgreSQL is not up yet (a reboot of both): with ``--wait`` it says so once, waits,
and records the vault once the server answers; it gives up after ``--max-outage-s`` in one line; without
``--wait`` it exits at once, as before."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from support.watch_helpers import wait_until

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")


@pytest.fixture
def place() -> Path:
    """A socket folder where no server runs yet (the test's server user's own, as PgServer.start wants it)."""
    try:
        pgserver.binaries()
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    folder = Path(tempfile.mkdtemp(prefix="vaultsync-pg-later-"))
    pgserver._give(folder)
    return folder


def dsn(folder: Path) -> str:
    return f"postgresql://{pgserver.SUPERUSER}@/postgres?host={quote(str(folder), safe='')}&connect_timeout=2"


def watcher(db: str, vault: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "VAULTSYNC_DB": db}
    return subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "watch", str(vault), "--step-ms", "50", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_watcher_with_wait_waits_for_a_database_not_up_yet(place: Path, tmp_path: Path) -> None:
    from vaultsync import Vault

    vault = tmp_path / "notes"
    vault.mkdir()
    (vault / "Atlas.md").write_text("# Atlas\n\nKickoff on Monday.\n", encoding="utf-8")
    proc = watcher(dsn(place), vault, "--wait", "--max-outage-s", "120")
    server = None
    try:
        time.sleep(3)  # the database is away: the watcher stays, waiting
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        server = pgserver.PgServer.start(place)

        def recorded() -> bool:
            try:
                with Vault.open(dsn(place), name="notes", readonly=True) as v:
                    return [r.path for r in v.ls()] == ["Atlas.md"]
            except Exception:
                return False

        wait_until(recorded, 60, "the watcher's catch-up once the database is up")
        assert proc.poll() is None
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
        if server is not None:
            server.stop()
    assert proc.returncode == 0, err
    assert "waiting for it (up to 120 s)" in err and "the database answers after" in err, err
    assert err.count("waiting for it") == 1 and "Traceback" not in err, err


def test_a_watcher_gives_up_after_the_outage_limit_and_without_wait_at_once(place: Path, tmp_path: Path) -> None:
    vault = tmp_path / "notes"
    vault.mkdir()
    proc = watcher(dsn(place), vault, "--wait", "--max-outage-s", "1")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "the limit is 1 s" in err and len(err.strip().splitlines()) == 2, err
    proc = watcher(dsn(place), vault)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "waiting" not in err and len(err.strip().splitlines()) == 1, err


def test_a_watcher_whose_database_goes_away_says_why_it_stopped(place: Path, tmp_path: Path) -> None:
    """Nothing was written during the outage (no batch failed): the line names the limit and no empty reason."""
    from vaultsync import Vault

    vault = tmp_path / "notes"
    vault.mkdir()
    (vault / "Atlas.md").write_text("# Atlas\n", encoding="utf-8")
    server = pgserver.PgServer.start(place)
    proc = watcher(dsn(place), vault, "--max-outage-s", "2")
    try:

        def recorded() -> bool:
            try:
                with Vault.open(dsn(place), name="notes", readonly=True) as v:
                    return bool(v.ls())
            except Exception:
                return False

        wait_until(recorded, 60, "the watcher's first catch-up")
        server.stop(keep=True)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        server.stop()
    assert proc.returncode == 1 and "(the limit is 2 s" in err, err
    assert "; None)" not in err, err

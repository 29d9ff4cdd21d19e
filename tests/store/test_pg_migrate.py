"""``vaultsync migrate`` is the one way a PostgreSQL schema changes, shown on a database written by the previous
release (its code taken from git and run as a real subprocess): today's readers read it as it is, today's writers
refuse it naming ``vaultsync migrate``, ``--dry-run`` changes nothing, and once migrated the previous release
refuses it (so the documented order is: readers first, then stop the writers, migrate, start the new writers)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")

PREVIOUS = "7a1c903"
"""main before the writer epoch (PostgreSQL schema 8): the previous release of the PostgreSQL schema."""
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's package, from git (skipped outside a git checkout holding that commit)."""
    done = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", PREVIOUS, "vaultsync"], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"the previous release ({PREVIOUS}) is not in this checkout's git history")
    folder = tmp_path_factory.mktemp("previous")
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def run(code: Path | None, dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``vaultsync --db DSN ARGS`` of today's code, or of the package in ``code``."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "vaultsync", "--db", dsn, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=code or None,
    )


def version(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn) as con:
        return int(con.execute("SELECT max(version) FROM vaultsync_schema").fetchone()[0])


def test_a_database_of_the_previous_release_is_read_then_migrated_only_by_migrate(
    previous: Path, tmp_path: Path
) -> None:
    from vaultsync.store.pg.schema import MIGRATIONS

    dsn = pgserver.fresh_or_skip("previous")
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nwritten under the previous release\n", encoding="utf-8")
    old = run(previous, dsn, "import", str(root))
    assert old.returncode == 0, old.stderr
    assert version(dsn) == 8 < len(MIGRATIONS)

    read = run(None, dsn, "read", "a.md")  # today's reader reads it as it is
    assert read.returncode == 0 and "previous release" in read.stdout, read.stderr
    (root / "b.md").write_text("# B\n", encoding="utf-8")
    refused = run(None, dsn, "import", str(root))  # today's writer does not upgrade it on its own
    assert refused.returncode != 0 and "run `vaultsync migrate`" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and version(dsn) == 8

    dry = run(None, dsn, "migrate", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith(f"would apply {len(MIGRATIONS) - 8} migrations: writer_epoch,"), dry.stdout
    assert version(dsn) == 8
    done = run(None, dsn, "migrate")
    assert done.returncode == 0 and "applied" in done.stdout, done.stderr
    assert version(dsn) == len(MIGRATIONS)
    assert "up to date" in run(None, dsn, "migrate").stdout

    stale = run(previous, dsn, "read", "a.md")  # the previous release refuses the newer schema, in one line
    assert stale.returncode != 0 and "newer vaultsync" in stale.stderr, stale.stderr
    written = run(None, dsn, "import", str(root))
    assert written.returncode == 0, written.stderr
    assert run(None, dsn, "read", "b.md").returncode == 0


def test_migrate_on_a_missing_sqlite_file_creates_nothing(tmp_path: Path) -> None:
    done = run(None, str(tmp_path / "v.db"), "migrate", "--dry-run")
    assert done.returncode != 0 and "no vaultsync database" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "v.db").exists()

"""The backup procedures of docs/running-postgres.md, run: ``vaultsync copy`` to a dated SQLite file and back into
an empty database, and ``pg_dump`` / ``pg_restore`` of the database; each restored copy answers as the original,
at every cutoff, and takes new batches."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from vaultsync import Vault

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")

T = [1_000_000_000_000 * k for k in (1_700, 1_710, 1_720)]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "vaultsync", *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done


def _history(dsn: str, root: Path) -> None:
    root.mkdir()
    with Vault.open(dsn, root=root, name="team") as vault:
        (root / "a.md").write_text("# A\n\nharbour tide tables\n", encoding="utf-8")
        (root / "b.md").write_text("# B\n\nthe lighthouse keeper\n", encoding="utf-8")
        vault.sync(known_at=T[0])
        (root / "a.md").write_text("# A\n\nharbour tide tables, revised\n", encoding="utf-8")
        (root / "b.md").rename(root / "c.md")
        vault.sync(known_at=T[1])
        (root / "a.md").unlink()
        vault.sync(known_at=T[2])


def _answers(db: object) -> list[object]:
    with Vault.open(db, name="team", readonly=True) as v:  # type: ignore[arg-type]
        said: list[object] = []
        for at in (T[0], T[1], T[2], None):
            said.append([(r.path, r.kind, r.content_hash) for r in v.ls(as_of=at)])
            said.append([(h["path"], h["chunk_id"]) for h in v.search("harbour tide", mode="keyword", as_of=at).hits])
        said.append([(r.path, r.kind) for r in v.history("c.md")])
        return said


def test_copy_to_a_dated_file_and_back_answers_as_the_original(tmp_path: Path) -> None:
    dsn = pgserver.fresh_or_skip("backupcopy")
    _history(dsn, tmp_path / "vault")
    backup = tmp_path / f"team-{time.strftime('%Y-%m-%d')}.db"
    _cli("copy", dsn, str(backup))
    restored = pgserver.fresh_or_skip("backuprestored")
    _cli("copy", str(backup), restored)
    assert _answers(backup) == _answers(dsn) == _answers(restored)
    with Vault.open(restored, root=tmp_path / "vault", name="team") as vault:  # and it records on
        (tmp_path / "vault" / "d.md").write_text("# D\n", encoding="utf-8")
        assert vault.sync().added == 1


def test_pg_dump_and_pg_restore_give_a_database_that_answers_as_the_original(tmp_path: Path) -> None:
    try:
        server = pgserver.shared()
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    dsn = server.fresh_database("backupdump")
    _history(dsn, tmp_path / "vault")
    name = dsn.rsplit("/", 1)[1].split("?")[0]
    dump = server.folder / f"{name}.dump"
    sock = ["-h", str(server.socket_dir), "-U", pgserver.SUPERUSER]
    done = server.run("pg_dump", *sock, "--format=custom", f"--file={dump}", name)
    assert done.returncode == 0, done.stderr
    target = f"{name}_restored"
    assert server.run("createdb", *sock, "--template=template0", target).returncode == 0
    done = server.run("pg_restore", *sock, f"--dbname={target}", str(dump))
    assert done.returncode == 0, done.stderr
    restored = server.dsn(target)
    assert _answers(restored) == _answers(dsn)
    assert "team: ok" in _cli("--db", restored, "check").stdout
    assert "vector_search: pgvector" in _cli("--db", restored, "stats").stdout  # the wheel's PostgreSQL has it
    with Vault.open(restored, root=tmp_path / "vault", name="team") as vault:
        (tmp_path / "vault" / "d.md").write_text("# D\n", encoding="utf-8")
        assert vault.sync().added == 1

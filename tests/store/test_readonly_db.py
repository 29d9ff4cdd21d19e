"""Reading never needs write access: every read command, and ``serve`` without writes, on a database nobody
may write (tests run as root, for whom modes do not stop writes: the database files and folder are made
immutable with ``chattr +i``), with and without a write-ahead log; a database folder that cannot be made
is one line, never a traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from support.cli import run_cli

from vaultsync import Vault

READS = [
    ["ls"],
    ["ls", "--json"],
    ["read", "A.md"],
    ["history", "A.md"],
    ["search", "apples"],
    ["changes", "--since", "2000-01-01"],
    ["stats"],
    ["check"],
    ["export"],
    ["diff", "A.md", "--from", "2000-01-01"],
]


def immutable(*paths: Path) -> None:
    done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"chattr +i refused here ({done.stderr.strip()}): cannot make a database nobody may write")


def mutable(place: Path) -> None:
    subprocess.run(["chattr", "-R", "-i", str(place)], capture_output=True)


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Path]:
    if shutil.which("chattr") is None:
        pytest.skip("no chattr: cannot make a database nobody may write")
    try:
        yield tmp_path
    finally:
        mutable(tmp_path)


def vault_db(place: Path, cli) -> tuple[Path, Path]:
    root, db = place / "vault", place / "db" / "vaultsync.db"
    root.mkdir()
    (root / "A.md").write_text("# A\n\napples\n", encoding="utf-8")
    assert cli("import", str(root), db=db).returncode == 0
    (root / "A.md").write_text("# A\n\napples and pears\n", encoding="utf-8")
    assert cli("import", str(root), db=db).returncode == 0
    return root, db


def no_write_access(db: Path) -> None:
    """The database folder and every file in it immutable; the writer's own check that it took."""
    files = sorted(db.parent.iterdir())
    immutable(*files, db.parent)
    with pytest.raises(PermissionError):
        (db.parent / "probe").write_text("x")


def check_reads(db: Path, expect_text: str, cli) -> None:
    """Every read command in this process (immutable files stop root too), one in a real subprocess."""
    for args in READS:
        done = cli(*args, db=db)
        assert done.returncode == 0, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert run_cli("read", "A.md", db=db).stdout == expect_text
    listed = json.loads(cli("ls", "--json", db=db).stdout)
    assert [n["path"] for n in listed] == ["A.md"]


def test_reads_on_a_database_nobody_may_write(place: Path, cli) -> None:
    root, db = vault_db(place, cli)
    assert not db.with_name(db.name + "-wal").exists(), "the last writer folded its log in"
    no_write_access(db)
    check_reads(db, "# A\n\napples and pears\n", cli)


def test_reads_of_a_killed_writers_log_on_a_database_nobody_may_write(place: Path, cli) -> None:
    """A writer killed with its batches still in the write-ahead log (the -wal and -shm files left behind)."""
    root, db = vault_db(place, cli)
    frozen = place / "frozen"
    frozen.mkdir()
    with Vault.open(db, root=root) as vault:
        (root / "A.md").write_text("# A\n\napples, pears and plums\n", encoding="utf-8")
        vault.sync()
        for suffix in ("", "-wal", "-shm"):  # the files as a SIGKILL leaves them: the log not folded in
            shutil.copy(f"{db}{suffix}", frozen / f"vaultsync.db{suffix}")
    copy = frozen / "vaultsync.db"
    assert copy.with_name("vaultsync.db-wal").stat().st_size > 0
    no_write_access(copy)
    check_reads(copy, "# A\n\napples, pears and plums\n", cli)


def test_a_log_without_its_index_is_one_line(place: Path, cli) -> None:
    root, db = vault_db(place, cli)
    frozen = place / "frozen"
    frozen.mkdir()
    with Vault.open(db, root=root) as vault:
        (root / "A.md").write_text("# A\n\nplums\n", encoding="utf-8")
        vault.sync()
        for suffix in ("", "-wal"):
            shutil.copy(f"{db}{suffix}", frozen / f"vaultsync.db{suffix}")
    copy = frozen / "vaultsync.db"
    no_write_access(copy)
    done = run_cli("ls", db=copy)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("Error: cannot read the database") and "vaultsync.db-wal" in done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.anyio
@pytest.mark.slow
async def test_serve_without_writes_on_a_database_nobody_may_write(place: Path, cli) -> None:
    root, db = vault_db(place, cli)
    no_write_access(db)
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "vaultsync", "--db", str(db), "serve", str(root)]
    )
    async with Client(server) as c:
        read = await c.call_tool("read_note", {"path": "A.md"})
        found = await c.call_tool("search_notes", {"query": "pears"})
    assert not read.is_error and "apples and pears" in str(read.content)
    assert not found.is_error and "A.md" in str(found.content)


@pytest.mark.slow
def test_a_database_folder_that_cannot_be_made_is_one_line(place: Path, cli) -> None:
    root, db = vault_db(place, cli)
    no_write_access(db)
    missing = db.parent / "missing" / "x.db"
    for args in (["import", str(root)], ["ls"], ["serve", str(root)]):
        done = run_cli(*args, db=missing, input="")
        assert done.returncode != 0, args
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, (args, done.stderr)
        assert str(missing.parent) in done.stderr, (args, done.stderr)
    assert not missing.parent.exists()

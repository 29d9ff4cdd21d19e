"""A small vault folder swapped for another folder records no deletion (the guard's counts only stop large
ones): with a real ``vaultsync watch`` and with ``import``; a replacement holding the same notes is taken as
the vault folder, a real deletion afterwards is still recorded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.vanished_helpers import deletions, live, make_vault, resumes, said, watching
from support.watch_helpers import no_thread_leaks, wait_until  # noqa: F401  (autouse fixture)

from vaultsync import Vault
from vaultsync.errors import VaultUnavailable


@pytest.fixture
def small_vault(tmp_path: Path, cli) -> tuple[Path, Path]:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    make_vault(root, 10, folders=2)
    assert cli("import", str(root), db=db).returncode == 0
    return root, db


def test_import_of_a_swapped_small_vault_records_nothing(small_vault, tmp_path: Path, cli) -> None:
    root, db = small_vault
    root.rename(tmp_path / "away")
    root.mkdir()
    refused = cli("import", str(root), db=db)
    assert refused.returncode == 1 and "another folder than the one registered" in refused.stderr
    assert "Traceback" not in refused.stderr and refused.stderr.count("\n") == 1
    assert len(live(db)) == 10 and deletions(db) == 0
    root.rmdir()
    shutil.copytree(tmp_path / "away", root)  # a copy of the vault folder: the same notes, another inode
    assert cli("import", str(root), db=db).returncode == 0
    (root / "F0" / "Note 0000.md").unlink()
    assert cli("import", str(root), db=db).returncode == 0, "the copy is the vault folder from now on"
    assert len(live(db)) == 9 and deletions(db) == 1


def test_confirmed_import_of_a_swapped_vault_records_the_deletions(small_vault, tmp_path: Path, cli) -> None:
    root, db = small_vault
    root.rename(tmp_path / "away")
    root.mkdir()
    assert cli("import", str(root), "--allow-mass-delete", db=db).returncode == 0
    assert live(db) == [] and deletions(db) == 10


def test_library_sync_of_a_swapped_vault_raises(small_vault, tmp_path: Path) -> None:
    root, db = small_vault
    root.rename(tmp_path / "away")
    root.mkdir()
    with Vault.open(db, root=root, name="vault") as vault, pytest.raises(VaultUnavailable, match="replaced"):
        vault.sync()


@pytest.mark.slow
def test_watch_of_a_swapped_small_vault_records_nothing(small_vault, tmp_path: Path) -> None:
    root, db = small_vault
    with watching(db, root, "--step-ms", "50") as proc:
        root.rename(tmp_path / "away")
        root.mkdir()
        proc.wait_for("another folder than the one registered")
        root.rmdir()
        (tmp_path / "away").rename(root)
        resumes(proc, root, db)
    assert said(proc, "another folder than the one registered") == 1, proc.stderr
    assert len(live(db)) == 11 and deletions(db) == 0

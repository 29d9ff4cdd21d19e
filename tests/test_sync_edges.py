"""Regressions in the batch path found while verifying issue 2 (library level, real SQLite files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vaultsync import Vault
from vaultsync import sync as sync_module

T1, T2 = "2024-01-01", "2024-02-01"


def make_unlistable(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing ``folder`` fails with EACCES: really (chmod) when we are not root, else at os.scandir."""
    if os.geteuid() != 0:
        folder.chmod(0)
        return
    real = os.scandir

    def scandir(path):  # type: ignore[no-untyped-def]
        if os.path.realpath(path) == os.path.realpath(folder):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(sync_module.os, "scandir", scandir)


def test_an_unlistable_folder_does_not_delete_its_notes(db_path: Path, vault_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    with Vault.open(db_path, root=vault_dir) as vault:
        vault.sync(known_at=T1)
        (vault_dir / "Inbox.md").write_text("# Inbox\n\nchanged\n", encoding="utf-8")
        make_unlistable(vault_dir / "Projects", monkeypatch)
        try:
            summary = vault.sync(known_at=T2)
        finally:
            (vault_dir / "Projects").chmod(0o755)
        assert [(e.path, "cannot list folder" in e.reason) for e in summary.errors] == [("Projects", True)]
        assert (summary.modified, summary.deleted) == (1, 0)  # the rest of the batch landed
        assert [r.path for r in vault.ls()] == ["Inbox.md", "Projects/Atlas.md"]
        assert vault.read("Projects/Atlas.md").content.startswith("---\ntags: [project]")


def test_an_unlistable_vault_deletes_nothing(db_path: Path, vault_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Vault.open(db_path, root=vault_dir) as vault:
        vault.sync(known_at=T1)
        make_unlistable(vault_dir, monkeypatch)
        try:
            summary = vault.sync(known_at=T2)
        finally:
            vault_dir.chmod(0o755)
        assert summary.batch_id is None and summary.deleted == 0 and summary.errors
        assert [r.path for r in vault.ls()] == ["Inbox.md", "Projects/Atlas.md"]

"""Regressions in the batch path found while verifying issue 2 (library level, real SQLite files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vaultsync import Vault
from vaultsync.disk import folder as folder_module
from vaultsync.errors import VaultUnavailable
from vaultsync.times import as_micros

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

    monkeypatch.setattr(folder_module.os, "scandir", scandir)


@pytest.mark.capabilities_off("no-dir-fd")
def test_an_unlistable_folder_does_not_delete_its_notes(
    db_path: Path, vault_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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


@pytest.mark.capabilities_off("no-dir-fd")
def test_an_unlistable_vault_deletes_nothing(db_path: Path, vault_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Vault.open(db_path, root=vault_dir) as vault:
        vault.sync(known_at=T1)
        make_unlistable(vault_dir, monkeypatch)
        try:  # issue 19: a vault folder that cannot be read is refused outright (it used to be a batch of errors)
            with pytest.raises(VaultUnavailable, match="cannot be read"):
                vault.sync(known_at=T2)
        finally:
            vault_dir.chmod(0o755)
        assert vault.last_known_at == as_micros(T1, "T1"), "no batch"
        assert [r.path for r in vault.ls()] == ["Inbox.md", "Projects/Atlas.md"]


@pytest.mark.capabilities_off("no-dir-fd")
def test_nfd_file_names_are_not_lost_by_targeted_syncs(db_path: Path, tmp_path: Path) -> None:
    """Names written in NFD (macOS) are stored as NFC; the watcher's path syncs must still find the files."""
    root = tmp_path / "nfd-vault"
    (root / "E\u0301te\u0301").mkdir(parents=True)
    cafe, nu = root / "Cafe\u0301.md", root / "E\u0301te\u0301" / "Nu\u0308.md"
    cafe.write_text("# Café\n", encoding="utf-8")
    nu.write_text("# Nü\n", encoding="utf-8")
    with Vault.open(db_path, root=root) as vault:
        vault.sync(known_at=T1)
        assert [r.path for r in vault.ls()] == ["Café.md", "Été/Nü.md"]
        cafe.write_text("# Café\n\nmore\n", encoding="utf-8")
        nu.write_text("# Nü\n\nmore\n", encoding="utf-8")
        summary = vault.sync(["Café.md", "Été/Nü.md"], known_at=T2)  # NFC, as the watcher passes them
        assert (summary.modified, summary.deleted) == (2, 0)
        assert vault.sync(["Été"], known_at=T2).changed == 0  # a folder event re-scans the NFD folder
        assert vault.sync(["Cafe\u0301.md"]).changed == 0  # the raw NFD name works too
        assert [r.path for r in vault.ls()] == ["Café.md", "Été/Nü.md"]
        assert vault.read("Été/Nü.md").content == "# Nü\n\nmore\n"
        nu.unlink()
        assert vault.sync(["Été/Nü.md"]).deleted == 1  # a real deletion is still one


def test_names_differing_only_in_normalisation_are_never_merged(db_path: Path, tmp_path: Path) -> None:
    """``café.md`` in NFC and in NFD are two files on Linux and one note name: the NFC-named file is the note, the
    other is refused with one line, by a full scan and by a path sync alike; neither's text is stored as the other's."""
    root = tmp_path / "twins"
    root.mkdir()
    composed, decomposed = root / "Caf\u00e9.md", root / "Cafe\u0301.md"
    decomposed.write_text("# the NFD one\n", encoding="utf-8")
    with Vault.open(db_path, root=root) as vault:
        vault.sync(known_at=T1)
        assert vault.read("Café.md").content == "# the NFD one\n"  # alone, it is the note
        composed.write_text("# the NFC one\n", encoding="utf-8")
        for sync in (lambda: vault.sync(["Café.md"]), lambda: vault.sync(["Cafe\u0301.md"]), lambda: vault.sync()):
            summary = sync()
            assert [(e.path, "Unicode normalisation" in e.reason) for e in summary.errors] == [("Cafe\u0301.md", True)]
            assert [r.path for r in vault.ls()] == ["Café.md"]
            assert vault.read("Café.md").content == "# the NFC one\n"
        decomposed.write_text("# the NFD one, edited\n", encoding="utf-8")
        assert vault.sync(["Cafe\u0301.md"]).changed == 0
        assert vault.read("Café.md").content == "# the NFC one\n"
        assert [r.kind for r in vault.history("Café.md")] == ["created", "modified"]

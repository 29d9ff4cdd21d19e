"""What macOS and Windows file systems do that Linux's do not: names that fold case, sharing violations,
network vault paths. Case folding is simulated here (``VAULTSYNC_CASE_INSENSITIVE=1`` makes vaultsync's own
lookups fold case, as APFS and NTFS do): this kernel has no casefold support (CONFIG_UNICODE is off, so
neither ext4 nor tmpfs can be mounted case-insensitive) and no unprivileged case-insensitive file system."""

from __future__ import annotations

import ntpath
import os
from pathlib import Path

import pytest

from vaultsync import Vault
from vaultsync.disk import capabilities, vaultfs
from vaultsync.disk.edit import append_file, create_file
from vaultsync.errors import ConfigError, PathError


@pytest.fixture
def folding(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(capabilities.CASE_ENV, "1")
    capabilities.reset()
    yield
    monkeypatch.delenv(capabilities.CASE_ENV)
    capabilities.reset()


def vault_with(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "vault"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize("how", ["watched paths", "full scan"])
def test_a_case_only_rename_is_one_rename(tmp_path: Path, folding, how: str) -> None:
    root = vault_with(tmp_path, {"note.md": "# Note\n\nbody\n", "Docs/a.md": "# A\n"})
    with Vault.open(tmp_path / "db", root=root) as vault:
        vault.sync()
        os.rename(root / "note.md", root / "Note.md")
        os.rename(root / "Docs", root / "docs")
        # the events a watcher gets: both names of each rename (on APFS/NTFS the old names still open the files)
        done = vault.sync(["note.md", "Note.md", "Docs", "docs"] if how == "watched paths" else None)
        assert (done.renamed, done.added, done.deleted) == (2, 0, 0)
        assert [r.path for r in vault.ls()] == ["Note.md", "docs/a.md"]
        assert vault.sync().batch_id is None, "a full scan agrees: nothing more to record"
        assert [r.path for r in vault.history("Note.md")] == ["note.md", "Note.md"], "history follows the rename"


def test_without_the_exact_case_check_the_old_name_would_still_be_found(tmp_path: Path, folding) -> None:
    """What the check guards against: where names fold case the old name still opens the file."""
    root = vault_with(tmp_path, {"Note.md": "# Note\n"})
    assert vaultfs.read_note(str(root), "note.md", 100)[0] == b"# Note\n"  # found, as APFS/NTFS would
    assert vaultfs.kind(str(root), "note.md") is None and vaultfs.kind(str(root), "Note.md") == "file"
    with pytest.raises(FileNotFoundError):
        vaultfs.stat_note(str(root), "note.md")


def test_writes_never_make_a_second_note_of_another_case(tmp_path: Path, folding) -> None:
    root = vault_with(tmp_path, {"Note.md": "# Note\n"})
    with pytest.raises(PathError, match="already exists"):
        create_file(str(root), "note.md", "a twin")
    append_file(str(root), "NOTE.md", "more")
    assert sorted(os.listdir(root)) == ["Note.md"]
    assert (root / "Note.md").read_text(encoding="utf-8") == "# Note\nmore"


class Sharing(PermissionError):
    """A PermissionError as Windows raises it when another program holds the file (winerror 32)."""

    def __init__(self, winerror: int) -> None:
        super().__init__(13, "The process cannot access the file because it is being used by another process")
        self.winerror = winerror


def test_a_replace_is_retried_while_another_program_holds_the_file(tmp_path: Path) -> None:
    src, dst = tmp_path / "new", tmp_path / "note.md"
    src.write_text("new", encoding="utf-8")
    dst.write_text("old", encoding="utf-8")
    refusals = [Sharing(32), Sharing(5)]
    slept: list[float] = []

    def rename(a: str, b: str, **kwargs: object) -> None:
        if refusals:
            raise refusals.pop(0)
        os.replace(a, b, **kwargs)

    vaultfs.replace(str(src), str(dst), sleep=slept.append, rename=rename)
    assert dst.read_text(encoding="utf-8") == "new" and not src.exists()
    assert len(slept) == 2 and slept[0] < slept[1]


def test_a_replace_gives_up_after_a_bounded_wait_and_never_retries_other_errors(tmp_path: Path) -> None:
    calls: list[int] = []
    slept: list[float] = []

    def always_held(a: str, b: str, **kwargs: object) -> None:
        calls.append(1)
        raise Sharing(32)

    with pytest.raises(PermissionError):
        vaultfs.replace("a", "b", sleep=slept.append, rename=always_held)
    assert len(calls) == vaultfs.REPLACE_TRIES and sum(slept) < 5.0

    def denied(a: str, b: str, **kwargs: object) -> None:
        calls.append(1)
        raise PermissionError(13, "Permission denied")  # a POSIX EACCES: not a sharing violation

    calls.clear()
    with pytest.raises(PermissionError):
        vaultfs.replace("a", "b", sleep=slept.append, rename=denied)
    assert len(calls) == 1


def test_a_unc_vault_folder_is_refused_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """On Windows ``os.path`` is ntpath; here the check is given ntpath to read the path as Windows does."""
    monkeypatch.setattr(
        capabilities,
        "network_root",
        lambda path, flavor=ntpath, real=capabilities.network_root: real(path, flavor=ntpath),
    )
    with pytest.raises(ConfigError, match="network \\(UNC\\) path"):
        vaultfs.check_root(r"\\nas\share\Vault")
    vaultfs.check_root(r"C:\Users\me\Obsidian Vault")
    monkeypatch.setenv(vaultfs.ALLOW_NETWORK_ENV, "1")
    vaultfs.check_root(r"\\nas\share\Vault")


def test_the_watcher_records_a_case_only_rename_as_one_rename(tmp_path: Path, folding) -> None:
    from support.watch_helpers import wait_until

    from vaultsync.live.watcher import Watcher

    root = vault_with(tmp_path, {"note.md": "# Note\n\nbody\n"})
    summaries = []
    with (
        Vault.open(tmp_path / "db", root=root) as vault,
        Watcher(vault, step_ms=50, debounce_ms=500, reconcile_s=0, on_batch=summaries.append),
    ):
        os.rename(root / "note.md", root / "Note.md")
        wait_until(lambda: [r.path for r in vault.ls()] == ["Note.md"], what="the rename recorded")
    assert [(s.renamed, s.added, s.deleted) for s in summaries if s.renamed or s.added or s.deleted][-1] == (1, 0, 0)
    with Vault.open(tmp_path / "db", name="vault", readonly=True) as vault:
        assert [r.path for r in vault.history("Note.md")] == ["note.md", "Note.md"]

"""A vanished vault is not an empty vault: a real ``vaultsync watch`` and ``import`` record no deletion
when the vault folder is renamed away, unreadable, replaced, unmounted, or a subfolder is unreadable;
a real deletion of a few notes is still recorded at once."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.engines import own_store
from support.vanished_helpers import deletions, live, make_vault, resumes, said, watching
from support.watch_helpers import WatchProcess, no_thread_leaks, wait_until  # noqa: F401  (autouse fixture)

from vaultsync import Vault
from vaultsync.errors import MassDeletion, VaultUnavailable

NOBODY = 65534


@pytest.fixture
def big_vault(tmp_path: Path, cli) -> tuple[Path, Path]:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    make_vault(root, 40)
    assert cli("import", str(root), db=db).returncode == 0
    return root, db


@pytest.fixture
def nobody_place() -> Iterator[Path]:
    """A folder an unprivileged user owns (tests run as root, for whom chmod 000 does not stop reads)."""
    if os.geteuid() != 0:
        yield Path(tempfile.mkdtemp(prefix="vaultsync-unprivileged-"))
        return
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: chmod 000 cannot be made to stop reads")
    place = Path(tempfile.mkdtemp(prefix="vaultsync-nobody-"))
    os.chmod(place, 0o755)
    try:
        yield place
    finally:
        for folder, dirs, _ in os.walk(place):
            for d in dirs:
                os.chmod(os.path.join(folder, d), 0o755)
        shutil.rmtree(place)


def as_nobody() -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if os.geteuid() == 0 else []


def nobody_vault(place: Path, cli) -> tuple[Path, Path, dict[str, str]]:
    root, db, home = place / "vault", place / "db" / "vaultsync.db", place / "home"
    make_vault(root, 40)
    env = {"VAULTSYNC_HOME": str(home)}
    assert cli("import", str(root), db=db, env=env).returncode == 0
    if os.geteuid() == 0:
        for folder, dirs, files in os.walk(place):
            for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                os.chown(name, NOBODY, NOBODY)
    return root, db, env


# ---------------------------------------------------------------- import


def test_import_refuses_a_mass_deletion_with_one_line_and_confirms_with_the_flag(big_vault, cli) -> None:
    root, db = big_vault
    for note in sorted(root.glob("F[012]/*.md")):
        note.unlink()
    refused = cli("import", str(root), db=db)
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "refusing to record 30 deletions of 40 live notes" in refused.stderr
    assert refused.stderr.rstrip().endswith("(--allow-mass-delete)")
    assert len(live(db)) == 40 and deletions(db) == 0
    done = cli("import", str(root), "--allow-mass-delete", "--json", db=db)
    assert done.returncode == 0, done.stderr
    assert len(live(db)) == 10 and deletions(db) == 30


def test_few_deletions_and_a_big_rename_are_not_mass_deletions(big_vault) -> None:
    root, db = big_vault
    with Vault.open(db, root=root) as vault:
        (root / "F0").rename(root / "Moved")  # 10 renames + 30 of 40 notes moving: renames delete nothing
        (root / "F1").rename(root / "Moved" / "F1")
        (root / "F2").rename(root / "Moved" / "F2")
        summary = vault.sync()
        assert (summary.renamed, summary.deleted) == (30, 0)
        for note in sorted((root / "Moved").glob("*.md"))[:9]:
            note.unlink()
        assert vault.sync().deleted == 9  # under the minimum of 20


def test_a_folder_on_another_device_is_refused_until_confirmed(big_vault, cli) -> None:
    root, db = big_vault
    with Vault.open(db, root=root) as vault:
        with own_store(db, readonly=False) as store:
            registered = store.vault_device(vault.id)
            assert registered == os.stat(root).st_dev
            store.set_vault_device(vault.id, registered + 1)  # as if registered on another disk
        (root / "F0" / "Note 0000.md").unlink()
        with pytest.raises(VaultUnavailable, match="on another device than when it was registered"):
            vault.sync()
    assert len(live(db)) == 40
    refused = cli("import", str(root), db=db)
    assert refused.returncode == 1 and "another device" in refused.stderr and "--allow-mass-delete" in refused.stderr
    assert cli("import", str(root), "--allow-mass-delete", db=db).returncode == 0
    assert len(live(db)) == 39
    assert cli("import", str(root), db=db).returncode == 0, "the confirmed device is registered"


def test_library_sync_names_the_reason(big_vault, tmp_path: Path) -> None:
    root, db = big_vault
    with Vault.open(db, root=root) as vault:
        root.rename(tmp_path / "away")
        with pytest.raises(VaultUnavailable, match="is gone"):
            vault.sync()
        (tmp_path / "away").rename(root)
        for note in sorted(root.glob("F[012]/*.md")):
            note.unlink()
        with pytest.raises(MassDeletion):
            vault.sync(["F0", "F1", "F2"])  # the watcher's path batches are guarded too
    assert len(live(db)) == 40


# ---------------------------------------------------------------- a real watcher


@pytest.mark.slow
def test_watch_vault_renamed_away_and_back(big_vault, tmp_path: Path) -> None:
    root, db = big_vault
    with watching(db, root, "--step-ms", "50") as proc:
        root.rename(tmp_path / "away")
        proc.wait_for("is gone")
        (tmp_path / "away" / "F0" / "Note 0000.md").unlink()  # a real deletion while it was away
        (tmp_path / "away").rename(root)
        proc.wait_for("is back; recording again")
        wait_until(lambda: deletions(db) == 1, what="the deletion made meanwhile to be recorded")
        (root / "New.md").write_text("# New\n", encoding="utf-8")
        wait_until(lambda: "New.md" in live(db), what="recording to resume")
    assert said(proc, "is gone") == 1, proc.stderr
    assert len(live(db)) == 40 and deletions(db) == 1


@pytest.mark.slow
def test_watch_vault_replaced_by_an_empty_folder(big_vault, tmp_path: Path) -> None:
    root, db = big_vault
    with watching(db, root, "--step-ms", "50") as proc:
        root.rename(tmp_path / "away")
        root.mkdir()
        proc.wait_for("refusing to record 40 deletions of 40 live notes")
        wait_until(lambda: "refusing" in (proc.lines[-1] if proc.lines else ""), what="the refusal")
        root.rmdir()
        (tmp_path / "away").rename(root)
        resumes(proc, root, db)
    assert said(proc, "refusing to record") == 1, proc.stderr
    assert len(live(db)) == 41 and deletions(db) == 0


def test_watch_vault_made_unreadable_and_readable(nobody_place: Path, cli) -> None:
    """Run as an unprivileged user (setpriv), since chmod 000 does not stop root."""
    root, db, env = nobody_vault(nobody_place, cli)
    with watching(db, root, "--step-ms", "50", prefix=as_nobody(), env=env, undo=lambda: os.chmod(root, 0o755)) as proc:
        os.chmod(root, 0o000)
        (root / "F0" / "Note 0000.md").unlink()  # root still can: another program deleting a note meanwhile
        proc.wait_for("cannot be read: Permission denied")
        os.chmod(root, 0o755)
        proc.wait_for("is back; recording again")
        wait_until(lambda: deletions(db) == 1, what="the real deletion to be recorded")
    assert said(proc, "cannot be read") == 1, proc.stderr
    assert len(live(db)) == 39 and deletions(db) == 1


def test_watch_subfolder_made_unreadable_keeps_its_notes(nobody_place: Path, cli) -> None:
    root, db, env = nobody_vault(nobody_place, cli)
    with watching(
        db,
        root,
        "--step-ms",
        "50",
        "--reconcile-s",
        "1",
        prefix=as_nobody(),
        env=env,
        undo=lambda: os.chmod(root / "F1", 0o755),
    ) as proc:
        os.chmod(root / "F1", 0o000)
        proc.wait_for("skipped F1: cannot list folder")
        (root / "Other.md").write_text("# Other\n", encoding="utf-8")
        wait_until(lambda: "Other.md" in live(db), what="the rest of the vault to be recorded")
        os.chmod(root / "F1", 0o755)
        (root / "F1" / "Note 0001.md").write_text("# changed\n", encoding="utf-8")
        wait_until(
            lambda: "changed" in Vault.open(db, name="vault", readonly=True).read("F1/Note 0001.md").content,
            what="the folder to be recorded again",
        )
    assert len(live(db)) == 41 and deletions(db) == 0


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A vault folder bind-mounted from a tmpfs (skipped where this machine cannot mount)."""
    store, root = tmp_path / "tmpfs", tmp_path / "vault"
    store.mkdir()
    root.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "vaultsync-test", str(store)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): needs root and CAP_SYS_ADMIN"
        )
    try:
        (store / "vault").mkdir()
        yield store / "vault", root
    finally:
        subprocess.run(["umount", str(root)], capture_output=True)
        subprocess.run(["umount", str(store)], capture_output=True)


@pytest.mark.slow
def test_watch_bind_mount_unmounted_and_mounted_again(mounted: tuple[Path, Path], tmp_path: Path, cli) -> None:
    source, root = mounted
    make_vault(source, 30)
    subprocess.run(["mount", "--bind", str(source), str(root)], check=True)
    db = tmp_path / "db" / "vaultsync.db"
    assert cli("import", str(root), db=db).returncode == 0
    with watching(db, root, "--step-ms", "50") as proc:
        subprocess.run(["umount", str(root)], check=True)
        proc.wait_for("on another device than when it was registered")
        subprocess.run(["mount", "--bind", str(source), str(root)], check=True)
        resumes(proc, root, db)
    assert said(proc, "another device") == 1, proc.stderr
    assert len(live(db)) == 31 and deletions(db) == 0


@pytest.mark.slow
def test_watch_records_30_of_1000_deleted_in_one_batch(tmp_path: Path, cli) -> None:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    make_vault(root, 1000, folders=40)
    assert cli("import", str(root), db=db).returncode == 0
    with watching(db, root, "--step-ms", "300", "--json") as proc:
        victim = root / "F7"
        assert len(list(victim.glob("*.md"))) == 25
        shutil.rmtree(victim)
        for note in sorted((root / "F8").glob("*.md"))[:5]:
            note.unlink()
        wait_until(lambda: deletions(db) == 30, what="the 30 deletions")
    with Vault.open(db, name="vault", readonly=True) as vault:
        batches = {r.batch_id for r in vault.changes(0) if r.kind == "deleted"}
    assert len(batches) == 1, "one batch"
    assert len(live(db)) == 970 and "refusing" not in proc.stderr


@pytest.mark.slow
def test_watcher_status_says_the_vault_is_unavailable(big_vault, tmp_path: Path) -> None:
    """What ``vault_status`` shows (its watcher fields are the watcher's status)."""
    from vaultsync.live.watcher import Watcher

    root, db = big_vault
    with Vault.open(db, root=root) as vault, Watcher(vault, step_ms=20, debounce_ms=200) as watcher:
        assert watcher.status()["vault_unavailable"] is None
        root.rename(tmp_path / "away")
        status = wait_until(
            lambda: watcher.status() if watcher.status()["vault_unavailable"] else None, what="the outage in the status"
        )
        assert "is gone" in status["vault_unavailable"] and watcher.healthy()
        (tmp_path / "away").rename(root)
        wait_until(lambda: watcher.status()["vault_unavailable"] is None, what="the vault to be back")
    assert len(live(db)) == 40

"""The watcher in-process, with a real watchdog observer on temporary folders and a real SQLite file."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from support.watch_helpers import HeldClock, atomic_write, debounce_clock, no_thread_leaks, wait_until  # noqa: F401  (fixtures)

from vaultsync import LockedError, NoteNotFound, Vault
from vaultsync.live.watcher import Watcher
from vaultsync.store.lock import holders
from vaultsync.sync import BatchSummary

FAST = {"step_ms": 50, "debounce_ms": 500}

# watchdog re-registering the watch of a folder moved out and back in (silenced by vaultsync.live.events
# at import; pytest resets warning filters per test)
pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")


@pytest.fixture
def vault(db_path: Path, vault_dir: Path) -> Iterator[Vault]:
    with Vault.open(db_path, root=vault_dir) as opened:
        yield opened


def content(vault: Vault, path: str) -> str | None:
    try:
        return vault.read(path).content
    except NoteNotFound:
        return None


def paths(vault: Vault, prefix: str = "") -> list[str]:
    return [r.path for r in vault.ls(prefix=prefix)]


@pytest.mark.capabilities_off("no-dir-fd")
def test_edit_new_and_deleted_notes_become_readable(vault: Vault, vault_dir: Path) -> None:
    seen: list[BatchSummary] = []
    with Watcher(vault, **FAST, on_batch=seen.append) as watcher:
        assert seen and seen[0].added == 2, "the catch-up batch records the vault as found"
        status = watcher.status()
        assert status["running"] and status["observer"] in ("inotify", "fsevents", "kqueue", "windows", "polling")
        inbox = vault_dir / "Inbox.md"
        inbox.write_text("# Inbox\n\n- call the plumber again\n", encoding="utf-8")
        wait_until(lambda: content(vault, "Inbox.md") == "# Inbox\n\n- call the plumber again\n", what="the edit")
        (vault_dir / "Ideas.md").write_text("# Ideas\n", encoding="utf-8")
        (vault_dir / "Projects" / "Atlas.md").unlink()
        wait_until(lambda: paths(vault) == ["Ideas.md", "Inbox.md"], what="the new and deleted notes")
        assert any("Inbox.md" in s.paths for s in seen[1:]), "on_batch is told which paths each batch wrote"
        # (a reader can see a batch's commit before the watcher has told on_batch of it)
        wait_until(lambda: watcher.status()["batches"] == len(seen), what="on_batch told of every batch")
    assert not watcher.running and not vault.lock.held
    assert [r.kind for r in vault.history("Inbox.md")] == ["created", "modified"]


@pytest.mark.capabilities_off("no-dir-fd")
def test_atomic_save_and_ignored_places(vault: Vault, vault_dir: Path) -> None:
    with Watcher(vault, **FAST) as watcher:
        atomic_write(vault_dir / "Inbox.md", "# Inbox\n\nsaved atomically\n")
        wait_until(lambda: content(vault, "Inbox.md") == "# Inbox\n\nsaved atomically\n", what="the atomic save")
        (vault_dir / ".obsidian" / "workspace.md").write_text("changed\n", encoding="utf-8")
        (vault_dir / ".trash").mkdir()
        (vault_dir / ".trash" / "old.md").write_text("# old\n", encoding="utf-8")
        (vault_dir / ".git").mkdir()
        (vault_dir / ".git" / "HEAD.md").write_text("ref\n", encoding="utf-8")
        for name in ("Inbox.md~", "Inbox.md.swp", ".Inbox.md.swp", "4913", "notes.txt", ".hidden.md", "#Inbox.md#"):
            (vault_dir / name).write_text("noise\n", encoding="utf-8")
        (vault_dir / "marker.md").write_text("# marker\n", encoding="utf-8")  # written last
        wait_until(lambda: "marker.md" in paths(vault), what="the marker note")
        # events arrive in order: the noise came before the marker, so it has been filtered or written by now
        wait_until(lambda: watcher.status()["pending"] == 0, what="nothing left pending")
        # a text file is an attachment, recorded; editors' temporary files and dot-places are not
        assert paths(vault) == ["Inbox.md", "Projects/Atlas.md", "marker.md", "notes.txt"]
    history = vault.history("Inbox.md")
    assert [r.kind for r in history] == ["created", "modified"], "an atomic save is an edit, not delete + create"


@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow")
@pytest.mark.slow
def test_folder_rename_move_out_and_new_nested_folders(vault: Vault, vault_dir: Path, tmp_path: Path) -> None:
    (vault_dir / "Projects" / "Deep").mkdir()
    (vault_dir / "Projects" / "Deep" / "Plan.md").write_text("# Plan\n\nsteps\n", encoding="utf-8")
    with Watcher(vault, **FAST):
        os.rename(vault_dir / "Projects", vault_dir / "Work")
        wait_until(lambda: paths(vault, "Work/") == ["Work/Atlas.md", "Work/Deep/Plan.md"], what="the folder rename")
        assert paths(vault, "Projects/") == []
        assert vault.history("Work/Deep/Plan.md")[-1].renamed_from == "Projects/Deep/Plan.md"
        shutil.move(str(vault_dir / "Work"), str(tmp_path / "outside"))
        wait_until(lambda: paths(vault) == ["Inbox.md"], what="the folder moved out of the vault")
        nested = vault_dir / "a" / "b" / "c"
        nested.mkdir(parents=True)
        (nested / "deep.md").write_text("# deep\n", encoding="utf-8")
        (vault_dir / "a" / "top.md").write_text("# top\n", encoding="utf-8")
        wait_until(lambda: paths(vault, "a/") == ["a/b/c/deep.md", "a/top.md"], what="notes in new nested folders")
        shutil.move(str(tmp_path / "outside"), str(vault_dir / "Back"))
        wait_until(lambda: paths(vault, "Back/") == ["Back/Atlas.md", "Back/Deep/Plan.md"], what="a folder moved in")
    assert [r.kind for r in vault.history("Inbox.md")] == ["created"]


@pytest.mark.slow
def test_burst_of_1000_new_files_is_a_few_batches(vault: Vault, vault_dir: Path, debounce_clock: HeldClock) -> None:  # noqa: F811
    """Events that come faster than the quiet period coalesce: the debouncer's clock is held while the
    files are written (a slow machine cannot split the burst by taking longer than the maximum wait)."""
    seen: list[BatchSummary] = []
    burst = vault_dir / "burst"
    with Watcher(vault, step_ms=100, debounce_ms=1000, on_batch=seen.append) as watcher:
        caught_up = len(seen)
        debounce_clock.hold()
        for sub in range(10):
            (burst / f"d{sub}").mkdir(parents=True)
            for i in range(100):
                (burst / f"d{sub}" / f"n{i:03}.md").write_text(f"# Note {sub}-{i}\n\nbody {i}\n", encoding="utf-8")
        wait_until(lambda: watcher.status()["pending"] > 0, what="the burst's first event")
        debounce_clock.release()
        wait_until(lambda: len(paths(vault, "burst/")) == 1000, timeout=60, what="1000 notes")
    batches = seen[caught_up:]
    assert sum(s.added for s in batches) == 1000
    assert len(batches) <= 10, [s.added for s in batches]
    for rev in vault.ls(prefix="burst/d7/"):
        assert rev.content_hash == hashlib.sha256((vault_dir / rev.path).read_bytes()).hexdigest()


def test_changes_while_stopped_are_caught_up_on_start(vault: Vault, vault_dir: Path) -> None:
    with Watcher(vault, **FAST):
        pass
    (vault_dir / "Inbox.md").write_text("# Inbox\n\nedited offline\n", encoding="utf-8")
    os.rename(vault_dir / "Projects" / "Atlas.md", vault_dir / "Atlas.md")
    (vault_dir / "New.md").write_text("# New\n", encoding="utf-8")
    seen: list[BatchSummary] = []
    with Watcher(vault, **FAST, on_batch=seen.append) as watcher:
        assert len(seen) == 1 and watcher.status()["batches"] == 1
        assert (seen[0].added, seen[0].modified, seen[0].renamed, seen[0].deleted) == (1, 1, 1, 0)
        assert paths(vault) == ["Atlas.md", "Inbox.md", "New.md"]
        assert content(vault, "Inbox.md") == "# Inbox\n\nedited offline\n"


@pytest.mark.slow
def test_concurrent_readers_never_see_a_partial_batch(vault: Vault, vault_dir: Path, db_path: Path) -> None:
    """Groups of notes appear by renaming a staged folder in; every state a reader sees holds whole groups.

    One reader has its own connection (like the MCP server); the other reads through the very Vault
    the watcher writes with.
    """
    group_size, groups = 6, 40
    staging = vault_dir / ".staging"
    (vault_dir / "groups").mkdir()
    failures: list[str] = []
    observed: set[int] = set()
    done = threading.Event()

    def reader(shared: bool) -> None:
        with Vault.open(db_path, name=vault.name, readonly=True) as own:
            mine = vault if shared else own  # the watcher's own Vault, or a connection of its own
            while not done.is_set():
                try:
                    check(mine, "shared" if shared else "own")
                except Exception as exc:  # noqa: BLE001 - reported by the test
                    failures.append(f"{'shared' if shared else 'own'} reader: {exc!r}")
                    return

    def check(mine: Vault, who: str) -> None:
        revs = mine.ls(prefix="groups/")
        found: dict[str, int] = {}
        for rev in revs:
            group = rev.path.split("/")[1][1:]
            found[group] = found.get(group, 0) + 1
        partial = {g: n for g, n in found.items() if n != group_size}
        if partial:
            failures.append(f"{who} reader: partial groups {partial}")
        observed.add(len(revs))
        if revs:
            group = revs[-1].path.split("/")[1][1:]
            if f"group {group}" not in mine.read(revs[-1].path).content:
                failures.append(f"{who} reader: {revs[-1].path} has the wrong content")

    threads = [threading.Thread(target=reader, args=(shared,), name=f"reader-{shared}") for shared in (False, True)]
    with Watcher(vault, step_ms=20, debounce_ms=200):
        for thread in threads:
            thread.start()
        try:
            for g in range(groups):
                folder = staging / f"g{g:02}"
                folder.mkdir(parents=True)
                for i in range(group_size):
                    (folder / f"n{i}.md").write_text(
                        f"# group {g:02}\n\nmember {i} of group {g:02}\n" * 20, encoding="utf-8"
                    )
                os.rename(folder, vault_dir / "groups" / f"g{g:02}")
                if g % 4 == 3:  # spread over many batches: let them land and a reader see them, then go on
                    landed = (g + 1) * group_size
                    wait_until(
                        lambda n=landed: n in observed or failures, timeout=60, what=f"a reader seeing {landed} notes"
                    )
            wait_until(lambda: len(paths(vault, "groups/")) == group_size * groups, timeout=60, what="every group")
        finally:
            done.set()
            for thread in threads:
                thread.join()
    assert not failures, failures[:5]
    assert all(n % group_size == 0 for n in observed)
    assert len(observed) > 2, "the reader saw the store while it was being written"


@pytest.mark.capabilities_off("no-fcntl")
def test_second_writer_is_refused_while_watching(vault: Vault, db_path: Path, vault_dir: Path) -> None:
    with Watcher(vault, **FAST):
        with Vault.open(db_path, root=vault_dir) as other:
            with pytest.raises(LockedError, match=rf"already being written by pid {os.getpid()} "):
                other.sync()
            with pytest.raises(LockedError):
                Watcher(other, **FAST).start()
    with Vault.open(db_path, root=vault_dir) as other:
        assert other.sync().changed == 0, "the lock is released when the watcher stops"


def test_failed_batch_keeps_paths_dirty_and_retries(
    vault_dir: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULTSYNC_BUSY_TIMEOUT_MS", "50")  # the documented knob: a blocked batch gives up fast
    with Vault.open(db_path, root=vault_dir) as vault, Watcher(vault, **FAST) as watcher:
        blocker = apsw.Connection(str(db_path))
        blocker.set_busy_timeout(30_000)  # the watcher's own start-up writes may hold the lock for a moment
        blocker.execute("BEGIN IMMEDIATE")  # another connection holds SQLite's write lock
        try:
            (vault_dir / "Inbox.md").write_text("# Inbox\n\nwritten while the database was busy\n", encoding="utf-8")
            wait_until(lambda: watcher.status()["failures"] >= 1, what="a failed batch")
            [holder] = holders(str(db_path))  # the watcher itself holds the vault's writer lock
            assert holder.startswith(f"pid {os.getpid()} (")
            assert watcher.status()["last_error"] == (
                f"the database {db_path} is busy: {holder} is writing to it; try again when it has finished"
            )
            wait_until(lambda: watcher.status()["pending"] >= 1, what="the failed paths to stay dirty")
            assert content(vault, "Inbox.md") != "# Inbox\n\nwritten while the database was busy\n"
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        wait_until(
            lambda: content(vault, "Inbox.md") == "# Inbox\n\nwritten while the database was busy\n",
            what="the retried batch",
        )
        assert watcher.status()["last_error"] is None


class Deaf:
    """An observer that reports nothing (like inotify past its watch limit), for the reconcile tests."""

    kind = "deaf"

    def __init__(self, root: Path, mark: object, polling: bool) -> None:
        self.mark = mark

    def intact(self) -> bool:
        return True

    def alive(self) -> bool:
        return True

    def stop(self) -> None:
        pass


class Lost(Deaf):
    """An observer that lost the watch of a moved folder (``intact`` False), as inotify does."""

    def intact(self) -> bool:
        return False


def test_an_observer_started_afresh_is_never_taken_for_one_that_stopped(vault: Vault, vault_dir: Path) -> None:
    """Watching again after a moved folder's watch was lost stops the observer and starts a new one (a real one
    takes a while to add its watches): ``healthy`` stays True meanwhile, else ``watch`` stops, saying the observer
    stopped."""
    observers: list[Deaf] = []

    def factory(root: Path, mark: object, polling: bool) -> Deaf:
        if observers:
            time.sleep(1.0)  # the new observer adding the watches of every folder
        observers.append((Lost if not observers else Deaf)(root, mark, polling))
        return observers[-1]

    with Watcher(vault, **FAST, reconcile_s=0, observer_factory=factory) as watcher:
        observers[0].mark(["Gone"])  # type: ignore[operator]  # a folder reported gone: its watch looked at
        seen: list[bool] = []
        deadline = time.monotonic() + 60
        while len(observers) < 2 and time.monotonic() < deadline:
            seen.append(watcher.healthy())
            time.sleep(0.01)
        assert len(observers) == 2, "the observer was started afresh"
        assert seen and all(seen), f"healthy() was False {seen.count(False)} times of {len(seen)} meanwhile"
        assert watcher.healthy()


class LostLater(Deaf):
    """An observer whose watch of a moved folder looks intact at first and is lost a moment later."""

    def __init__(self, root: Path, mark: object, polling: bool) -> None:
        super().__init__(root, mark, polling)
        self.looks = 0

    def intact(self) -> bool:
        self.looks += 1
        return self.looks == 1


def test_a_folder_moved_into_a_new_folder_is_a_rename_when_the_watch_is_found_lost_at_the_second_look(
    vault: Vault, vault_dir: Path
) -> None:
    """inotify reports a folder moved into a new folder as gone, and may drop its watch only after that batch: the
    second look a second later finds it lost and scans the vault. The unpaired deletion is held until then (its
    own hold ends first), so the scan pairs it with where the notes went: a rename, never deleted then created."""
    observers: list[Deaf] = []

    def factory(root: Path, mark: object, polling: bool) -> Deaf:
        observers.append((LostLater if not observers else Deaf)(root, mark, polling))
        return observers[-1]

    with Watcher(vault, **FAST, reconcile_s=0, observer_factory=factory) as watcher:
        (vault_dir / "New" / "Deep").mkdir(parents=True)
        os.rename(vault_dir / "Projects", vault_dir / "New" / "Deep" / "Projects")
        observers[0].mark(["Projects"])  # type: ignore[operator]  # the folder gone; where it went is not reported
        wait_until(lambda: len(observers) == 2, what="the observer started afresh after the second look")
        wait_until(lambda: content(vault, "New/Deep/Projects/Atlas.md") is not None, what="the scan after it")
        wait_until(lambda: watcher.status()["held"] == 0, what="nothing held")
    history = vault.history("New/Deep/Projects/Atlas.md")
    assert [(r.path, r.kind) for r in history] == [
        ("Projects/Atlas.md", "created"),
        ("New/Deep/Projects/Atlas.md", "renamed"),
    ]


@pytest.mark.capabilities_off("no-dir-fd")
def test_reconcile_repairs_what_the_observer_missed(vault: Vault, vault_dir: Path) -> None:
    with Watcher(vault, **FAST, reconcile_s=0.3, observer_factory=Deaf) as watcher:
        assert watcher.status()["observer"] == "deaf"
        (vault_dir / "Missed.md").write_text("# never reported\n", encoding="utf-8")
        wait_until(lambda: content(vault, "Missed.md") == "# never reported\n", what="the reconcile scan")


@pytest.mark.capabilities_off("no-dir-fd")
def test_scripted_paths_and_a_vanished_vault_folder(vault: Vault, vault_dir: Path, tmp_path: Path) -> None:
    """Replay dirty paths through the seam; a vault folder that disappears never becomes mass deletion."""
    observers: list[Deaf] = []

    def factory(root: Path, mark: object, polling: bool) -> Deaf:
        observers.append(Deaf(root, mark, polling))
        return observers[-1]

    with Watcher(vault, **FAST, reconcile_s=0.3, observer_factory=factory) as watcher:
        (vault_dir / "Scripted.md").write_text("# scripted\n", encoding="utf-8")
        observers[0].mark(["Scripted.md"])  # type: ignore[operator]
        wait_until(lambda: content(vault, "Scripted.md") == "# scripted\n", what="the scripted path")
        os.rename(vault_dir, tmp_path / "unmounted")
        wait_until(lambda: watcher.status()["failures"] >= 1, what="a refused reconcile")
        assert "gone" in watcher.status()["last_error"]
        assert len(paths(vault)) == 3, "nothing was deleted while the vault folder was missing"
        os.rename(tmp_path / "unmounted", vault_dir)
        wait_until(lambda: watcher.status()["last_error"] is None, what="reconcile to succeed again")
    assert len(paths(vault)) == 3


def test_forced_polling_sees_edits(vault: Vault, vault_dir: Path) -> None:
    with Watcher(vault, **FAST, polling=True) as watcher:
        assert watcher.status()["observer"] == "polling"
        atomic_write(vault_dir / "Projects" / "Atlas.md", "# Atlas\n\npolled\n")
        (vault_dir / "Polled.md").write_text("# polled\n", encoding="utf-8")
        wait_until(
            lambda: (
                content(vault, "Projects/Atlas.md") == "# Atlas\n\npolled\n"
                and content(vault, "Polled.md") == "# polled\n"
            ),
            what="changes seen by polling",
        )

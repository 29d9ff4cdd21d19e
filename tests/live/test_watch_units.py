"""The watcher's pure parts: the debouncer (on a clock the test drives), path collapsing, the handler fed
scripted watchdog events, and the note rules of every door (scanner, watcher, targeted sync, git backfill)."""

from __future__ import annotations

import shutil
import subprocess
import threading
import unicodedata
from pathlib import Path

import pytest
from support.watch_helpers import no_thread_leaks  # noqa: F401  (autouse fixture)
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
    FileSystemEvent,
)

from vaultsync.disk.folder import observe_paths, scan
from vaultsync.disk.ignore import recorded
from vaultsync.disk.paths import changed_path, nfc
from vaultsync.gitimport import GitHistory
from vaultsync.live import debounce
from vaultsync.live.debounce import Debouncer, Pending, collapse
from vaultsync.live.events import DirtyHandler, NoteFilter


def test_collapse_keeps_folders_and_drops_what_they_cover() -> None:
    paths = {"a/b/c.md", "a", "a b.md", "a/b", "ab/x.md", "z.md", "ab"}
    assert collapse(paths) == ["a", "a b.md", "ab", "z.md"]
    assert collapse([]) == []


class ManualClock:
    """Stands in for the ``time`` module inside ``vaultsync.live.debounce``: time moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    """The debouncer's clock, driven by the test (``get(timeout=0)`` then never waits)."""
    manual = ManualClock()
    monkeypatch.setattr(debounce, "time", manual)
    return manual


def test_debouncer_waits_for_quiet(clock: ManualClock) -> None:
    deb = Debouncer(step_s=0.1, max_s=5.0)
    deb.add(["a.md"])
    clock.advance(0.06)
    deb.add(["b.md", "a.md"])
    clock.advance(0.06)  # 0.12 s after the first change, 0.06 s after the last
    assert deb.get(timeout=0) is None, "not quiet yet"
    deb.add(["a.md"])  # a path already pending still restarts the quiet period
    clock.advance(0.09)
    assert deb.get(timeout=0) is None, "not quiet yet"
    clock.advance(0.02)
    got = deb.get(timeout=0)
    assert got is not None and got.paths == {"a.md", "b.md"}
    assert got.first == pytest.approx(1000.0) and got.last == pytest.approx(1000.12)
    assert deb.snapshot() == (0, None)
    assert deb.get(timeout=0) is None


def test_debouncer_maximum_wait_under_constant_writes(clock: ManualClock) -> None:
    deb = Debouncer(step_s=0.2, max_s=0.4)
    sets: list[tuple[float, Pending]] = []
    written = 0
    while len(sets) < 3:
        assert written < 1000, "no set was released under constant writes"
        deb.add([f"n{written}.md"])
        written += 1
        clock.advance(0.01)  # never quiet for 0.2 s
        got = deb.get(timeout=0)
        if got is not None:
            sets.append((clock.now, got))
    for released, got in sets:
        assert got.paths
        assert released - got.last < deb.step_s, "sets were released while changes kept coming"
        assert deb.max_s <= released - got.first < deb.max_s + 0.011, "released at the maximum wait"
    assert not set.intersection(*(got.paths for _, got in sets))
    assert set.union(*(got.paths for _, got in sets)) == {f"n{i}.md" for i in range(written)}


def test_debouncer_put_back_drain_and_close() -> None:
    deb = Debouncer(step_s=10, max_s=20)
    failed = Pending({"old.md"}, first=1.0, last=2.0)
    deb.add(["new.md"])
    deb.put_back(failed)
    count, first = deb.snapshot()
    assert count == 2 and first == 1.0, "a failed set keeps its first time (latency, max wait)"
    assert deb.get(timeout=0.01) is not None, "an old set is due at once"
    deb.add(["x.md"])
    drained = deb.drain()
    assert drained is not None and drained.paths == {"x.md"} and deb.drain() is None
    woke = []
    thread = threading.Thread(target=lambda: woke.append(deb.get()))
    thread.start()
    deb.close()
    thread.join(timeout=5)
    assert woke == [None]


ROOT = "/vault"


@pytest.mark.parametrize(
    ("event", "dirty"),
    [
        (FileModifiedEvent(f"{ROOT}/a.md"), ["a.md"]),
        (FileClosedEvent(f"{ROOT}/Sub/a.md"), ["Sub/a.md"]),
        (FileMovedEvent(f"{ROOT}/.a.md.tmp", f"{ROOT}/a.md"), ["a.md"]),  # atomic save: temp name ignored
        (FileMovedEvent(f"{ROOT}/a.md", f"{ROOT}/b.md"), ["a.md", "b.md"]),
        (FileMovedEvent(f"{ROOT}/a.md", f"{ROOT}/.trash/a.md"), ["a.md"]),
        (FileMovedEvent(f"{ROOT}/a.md", "/elsewhere/a.md"), ["a.md"]),
        (FileCreatedEvent(f"{ROOT}/.obsidian/workspace.md"), []),
        (FileCreatedEvent(f"{ROOT}/a.md~"), []),
        (FileCreatedEvent(f"{ROOT}/.a.md.swp"), []),
        (FileCreatedEvent(f"{ROOT}/a.md.swp"), []),
        (FileCreatedEvent(f"{ROOT}/4913"), []),
        (FileCreatedEvent(f"{ROOT}/image.png"), ["image.png"]),  # an attachment
        (FileDeletedEvent("/elsewhere/a.md"), []),
        (FileOpenedEvent(f"{ROOT}/a.md"), []),
        (FileClosedNoWriteEvent(f"{ROOT}/a.md"), []),
        (DirModifiedEvent(f"{ROOT}/Sub"), []),
        (DirModifiedEvent(ROOT), []),
        (DirDeletedEvent(f"{ROOT}/Sub"), ["Sub"]),  # a folder moved out of the vault
        (DirCreatedEvent(f"{ROOT}/New/Deeper"), ["New/Deeper"]),
        (DirMovedEvent(f"{ROOT}/Old", f"{ROOT}/New"), ["Old", "New"]),
        (DirMovedEvent(f"{ROOT}/.staging/g1", f"{ROOT}/groups/g1"), ["groups/g1"]),
        (DirCreatedEvent(f"{ROOT}/.git/objects"), []),
        (DirDeletedEvent(ROOT), []),
    ],
)
def test_handler_marks_only_paths_that_can_matter(event: FileSystemEvent, dirty: list[str]) -> None:
    recorded: list[str] = []
    DirtyHandler(Path(ROOT), recorded.extend).dispatch(event)
    assert recorded == dirty


# ---------------------------------------------------------------- every door, one rule

NFD_FOLDER, NFD_NAME = unicodedata.normalize("NFD", "Café"), unicodedata.normalize("NFD", "Résumé.md")
TRICKY = {
    # file as named on disk: is it recorded?  (its NFC path is the note's path; a name not ending in .md is an
    # attachment, recorded as well)
    "a.md": True,
    "Sub/b.md": True,
    "a/b/c/d/deep.md": True,
    "notes.md.md": True,
    "folder.md/inside.md": True,  # a folder named like a note is a folder
    "a b/ü.md": True,
    f"{NFD_FOLDER}/{NFD_NAME}": True,  # as macOS writes names
    f"{NFD_NAME}": True,
    "a.MD": True,  # the suffix is exactly .md: an attachment, not a note
    "Upper.Md": True,
    ".a.md": False,
    ".md": False,
    "Sub/..md": False,
    ".obsidian/workspace.md": False,
    "Sub/.trash/old.md": False,
    f".hidden/{NFD_NAME}": False,
    "a.md.tmp": False,
    "a.md~": False,
    "a.md.swp": False,
    "x.txt": True,  # an attachment
}
FOLDERS = {
    # folder event path (trailing slash as some tools send it): the notes below it
    "Sub": ["Sub/b.md"],
    "Sub/": ["Sub/b.md"],
    "a/b/": ["a/b/c/d/deep.md"],
    "folder.md": ["folder.md/inside.md"],
    NFD_FOLDER + "/": [nfc("Café/Résumé.md")],
    ".obsidian/": [],
    "Sub/.trash": [],
}
EXPECTED = sorted(nfc(path) for path, note in TRICKY.items() if note)


@pytest.fixture
def tricky_vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    for path in TRICKY:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(f"# {path}\n", encoding="utf-8")
    return root


def targeted(root: Path, paths: list[str]) -> list[str]:
    """What a targeted sync (``Vault.sync(paths)``) observes: the paths normalised once, then observed."""
    return sorted(observe_paths(root, [rel for rel in map(changed_path, paths) if rel is not None], live=())[0])


def watched(root: Path, event: FileSystemEvent) -> list[str]:
    """What the watcher writes for one event: the paths its handler marks, observed as its batch does."""
    dirty: list[str] = []
    DirtyHandler(root, dirty.extend).dispatch(event)
    return targeted(root, dirty)


def test_every_door_applies_the_same_note_rules(tricky_vault: Path) -> None:
    """The scanner (import, reconcile), the watcher (its event filter, then the paths it marks as its batch
    observes them), a targeted sync of given paths, the git backfill and ``ignore.recorded`` each decide
    on the same files; each must find exactly the files the table says, under their NFC paths."""
    root = tricky_vault
    found = {
        "scanner": sorted(scan(root)[0]),
        "watcher": sorted(p for path in TRICKY for p in watched(root, FileCreatedEvent(str(root / path)))),
        "targeted sync": sorted(p for path in TRICKY for p in targeted(root, [path])),
        "recorded": sorted(nfc(path) for path in TRICKY if recorded(root)(nfc(path))),
        "event filter": sorted(nfc(path) for path in TRICKY if NoteFilter(root)(nfc(path), False)),
    }
    if shutil.which("git") is not None:
        git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "--all", "--force"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "tricky"], check=True)
        history = GitHistory(root)
        try:
            found["git backfill"] = sorted(history.tree(history.commits()[-1].sha))
        finally:
            history.close()
    wrong = {
        door: (sorted(set(got) - set(EXPECTED)), sorted(set(EXPECTED) - set(got)))
        for door, got in found.items()
        if got != EXPECTED
    }
    assert not wrong, f"doors disagreeing with the table (extra, missing): {wrong}"


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_folder_events_cover_exactly_the_notes_below(tricky_vault: Path, folder: str) -> None:
    root = tricky_vault
    want = FOLDERS[folder]
    for event in (DirCreatedEvent(f"{root}/{folder}"), DirMovedEvent(f"{root}.elsewhere/x", f"{root}/{folder}")):
        assert watched(root, event) == want, event
    under = nfc(folder.rstrip("/"))
    assert targeted(root, [folder]) == want
    assert sorted(p for p in scan(root)[0] if p.startswith(under + "/")) == want


def test_the_default_pace_has_one_home() -> None:
    """The watcher, ``watch`` (the foreground loop) and the ``watch`` command's shown defaults are the constants of
    ``live/pace.py``; the command's help, as a user sees it, shows them."""
    import inspect
    import re
    import sys

    from vaultsync.live import foreground, pace
    from vaultsync.live.watcher import Watcher

    want = {"step_ms": pace.STEP_MS, "debounce_ms": pace.DEBOUNCE_MS, "reconcile_s": pace.RECONCILE_S}
    for function in (Watcher.__init__, foreground.watch):
        params = inspect.signature(function).parameters
        assert {name: params[name].default for name in want} == want, function
    done = subprocess.run(
        [sys.executable, "-m", "vaultsync", "watch", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stdout.split())
    shown = dict(re.findall(r"--(step-ms|debounce-ms|reconcile-s) .*?\[default: ([^;\]]+)", flat))
    assert shown == {name.replace("_", "-"): str(value) for name, value in want.items()}

"""The watcher's pure parts: the debouncer, path collapsing, and the handler fed scripted watchdog events."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from watch_helpers import no_thread_leaks  # noqa: F401  (autouse fixture)
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

from vaultsync.debounce import Debouncer, Pending, collapse
from vaultsync.observe import DirtyHandler, NoteFilter
from vaultsync.sync import is_note_path


def test_collapse_keeps_folders_and_drops_what_they_cover() -> None:
    paths = {"a/b/c.md", "a", "a b.md", "a/b", "ab/x.md", "z.md", "ab"}
    assert collapse(paths) == ["a", "a b.md", "ab", "z.md"]
    assert collapse([]) == []


def test_debouncer_waits_for_quiet() -> None:
    deb = Debouncer(step_s=0.1, max_s=5.0)
    deb.add(["a.md"])
    deb.add(["b.md", "a.md"])
    assert deb.get(timeout=0.01) is None, "not quiet yet"
    got = deb.get(timeout=5)
    assert got is not None and got.paths == {"a.md", "b.md"}
    assert deb.snapshot() == (0, None)


def test_debouncer_maximum_wait_under_constant_writes() -> None:
    deb = Debouncer(step_s=0.2, max_s=0.4)
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            deb.add([f"n{i}.md"])
            i += 1
            time.sleep(0.01)  # never quiet for 0.2 s

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        sets = [deb.get(timeout=10) for _ in range(3)]
        assert thread.is_alive(), "sets were released while changes kept coming"
    finally:
        stop.set()
        thread.join()
    assert all(s is not None and s.paths for s in sets)
    assert not set.intersection(*(s.paths for s in sets if s))


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


@pytest.mark.parametrize(("event", "dirty"), [
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
    (FileCreatedEvent(f"{ROOT}/image.png"), []),
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
])
def test_handler_marks_only_paths_that_can_matter(event: FileSystemEvent, dirty: list[str]) -> None:
    recorded: list[str] = []
    DirtyHandler(Path(ROOT), recorded.extend).dispatch(event)
    assert recorded == dirty


@pytest.mark.parametrize("rel", ["a.md", "A/b.md", "a.MD", ".a.md", "A/.b/c.md", "a.md.tmp", "a b/ü.md", "x.txt"])
def test_file_filter_agrees_with_import(rel: str) -> None:
    assert NoteFilter()(rel, False) == is_note_path(rel)

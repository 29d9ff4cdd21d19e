"""A burst is recorded as states that existed: what the watcher holds back (a deletion waiting for its add) holds
back the rest of the burst with it, and its log line says "batch N" with the delay from the burst's first change.

A real watchdog observer on a temporary folder; a burst shaped like ``git checkout`` (every deletion first, the
writes a moment later, past the quiet period, so they reach the watcher in two flushes).
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.watch_helpers import no_thread_leaks, wait_until  # noqa: F401  (autouse fixture)

from vaultsync import Vault
from vaultsync.live.watcher import Watcher

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")

OLD = [f"Old/Note {n}.md" for n in range(6)]
NEW = [f"New/Page {n}.md" for n in range(6)]


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[tuple[Vault, Path, Path]]:
    root, db = tmp_path / "vault", tmp_path / "db.sqlite"
    for n in range(20):
        (root / "Kept").mkdir(parents=True, exist_ok=True)
        (root / "Kept" / f"Kept {n}.md").write_text(f"# Kept {n}\n", encoding="utf-8")
    for rel in OLD:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel} was here\n", encoding="utf-8")
    with Vault.open(db, root=root, name="vault") as opened:
        yield opened, root, db


def listings(db: Path) -> dict[int, set[str]]:
    """Every batch's state: batch id -> the notes ``ls --as-of r<id>`` lists."""
    with Vault.open(db, name="vault", readonly=True) as reader:
        batches = [news.batch_id for news in reader.batches_after(0)]
        return {batch: {r.path for r in reader.ls(as_of=f"r{batch}")} for batch in batches}


def checkout(root: Path, edited: str) -> float:
    """Delete the old notes, then (past the quiet period) write the new ones and edit a kept one; when it began."""
    began = time.monotonic()
    for rel in OLD:
        (root / rel).unlink()
    time.sleep(0.3)
    for rel in NEW:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel} is new\n", encoding="utf-8")
    (root / edited).write_text("# edited in the burst\n", encoding="utf-8")
    return began


def test_the_adds_of_a_burst_are_never_recorded_without_its_deletions(
    vault: tuple[Vault, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    opened, root, db = vault
    caplog.set_level(logging.INFO, logger="vaultsync.live.watcher")
    with Watcher(opened, step_ms=50, debounce_ms=100, reconcile_s=0) as watcher:
        began = checkout(root, "Kept/Kept 3.md")
        wait_until(lambda: watcher.status()["held"] == 0 and set(NEW) <= live(db), what="the burst recorded")
        took_ms = (time.monotonic() - began) * 1000
        assert not set(OLD) & live(db)
    for batch, notes in listings(db).items():
        assert not (set(OLD) & notes and set(NEW) & notes), f"batch {batch} lists notes that never coexisted"
    with Vault.open(db, name="vault", readonly=True) as reader:
        assert [r.kind for r in reader.history("Kept/Kept 3.md")] == ["created", "modified"]
    told = [r.getMessage() for r in caplog.records if " deleted, " in r.getMessage()]
    burst = [line for line in told if re.search(r", [1-9]\d* deleted, ", line)]
    assert burst and all(line.startswith("batch ") for line in burst), told
    # the delay told runs from the burst's first change (the deletions), not from the last flush
    delays = [float(re.search(r", (\d+) ms after the first change", line).group(1)) for line in burst]  # type: ignore[union-attr]
    assert delays[-1] >= 300 and delays[-1] <= took_ms, burst
    assert "(13 notes)" in burst[-1], burst  # 6 deleted, 6 added, 1 edited


def test_a_folder_of_renames_is_told_with_its_count(
    vault: tuple[Vault, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    opened, root, db = vault
    caplog.set_level(logging.INFO, logger="vaultsync.live.watcher")
    with Watcher(opened, step_ms=50, debounce_ms=200, reconcile_s=0):
        (root / "Kept").rename(root / "Moved")
        wait_until(lambda: "Moved/Kept 0.md" in live(db) and "Kept/Kept 0.md" not in live(db), what="the move")
    told = [r.getMessage() for r in caplog.records if " renamed, " in r.getMessage()]
    assert any(", 20 renamed, " in line and "(20 notes)" in line for line in told), told


def live(db: Path) -> set[str]:
    with Vault.open(db, name="vault", readonly=True) as reader:
        return {r.path for r in reader.ls()}


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        check=True,
        capture_output=True,
    )


@pytest.mark.slow
def test_a_checkout_deleting_most_notes_is_recorded_and_a_vanished_folder_is_not(tmp_path: Path) -> None:
    """More deletions than the mass-deletion guard allows: recorded when git's HEAD moved (a checkout), as one state
    that existed; refused when the same files vanish with HEAD where it was."""
    root, db = tmp_path / "vault", tmp_path / "db.sqlite"
    root.mkdir()
    for n in range(40):
        (root / f"Note {n}.md").write_text(f"# Note {n}\n\nbody {n}\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "forty")
    git(root, "checkout", "-q", "-b", "lean")
    for n in range(30):
        (root / f"Note {n}.md").unlink()
    (root / "Fresh.md").write_text("# Fresh\n\nonly on the lean branch\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "lean")
    git(root, "checkout", "-q", "main")
    gone, kept = {f"Note {n}.md" for n in range(30)}, {f"Note {n}.md" for n in range(30, 40)}
    with Vault.open(db, root=root, name="vault") as opened, Watcher(opened, step_ms=50, debounce_ms=200) as watcher:
        git(root, "checkout", "-q", "lean")
        wait_until(lambda: live(db) == {*kept, "Fresh.md"}, what="the checkout recorded")
        assert watcher.status()["vault_unavailable"] is None
        git(root, "checkout", "-q", "main")
        wait_until(lambda: live(db) == gone | kept, what="the way back recorded")
        for batch, notes in listings(db).items():
            assert not ("Fresh.md" in notes and gone & notes), f"batch {batch} lists notes that never coexisted"
        for n in range(30):  # the same deletions without git: a vanished folder, refused
            (root / f"Note {n}.md").unlink()
        wait_until(lambda: watcher.status()["vault_unavailable"], what="the mass deletion refused")
        assert live(db) == gone | kept


def test_a_note_rewritten_continuously_is_recorded_only_as_states_it_rested_in(
    vault: tuple[Vault, Path, Path],
) -> None:
    """Hundreds of saves a second (each empties the file, then writes it whole) past several maximum waits: no
    revision is a state the note only passed through (empty, or part of a save); the last save is recorded. A state
    the file rested in for ``SETTLE_NS`` is one the watcher may record: on a loaded machine this test's own writer
    may be paused that long with the file empty, and then the empty state is one the note was in."""
    from vaultsync.sync import SETTLE_NS

    opened, root, db = vault
    note = root / "Kept" / "Kept 5.md"
    versions = [f"# Kept 5\n\nsave {n}\n" + "text " * 40 + "\n" for n in range(100_000)]
    longest_empty = 0
    with Watcher(opened, step_ms=50, debounce_ms=150, reconcile_s=0):
        deadline, n = time.monotonic() + 1.5, 0
        while time.monotonic() < deadline:
            emptied = time.monotonic_ns()
            with note.open("w", encoding="utf-8") as f:
                f.flush()
                time.sleep(0.001)  # emptied: the state a save passes through
                f.write(versions[n])
            longest_empty = max(longest_empty, time.monotonic_ns() - emptied)
            n += 1
        last = versions[n - 1]
        wait_until(lambda: read_now(db, "Kept/Kept 5.md") == last, what="the last save recorded")
    rested_empty = longest_empty >= SETTLE_NS - TICK_NS  # (a time stamp may lag the write by a clock tick)
    saved = set(versions[:n]) | {"# Kept 5\n"} | ({""} if rested_empty else set())
    with Vault.open(db, name="vault", readonly=True) as reader:
        recorded = [
            reader.read("Kept/Kept 5.md", as_of=f"r{r.batch_id}").content for r in reader.history("Kept/Kept 5.md")
        ]
    assert n > 50 and all(text in saved for text in recorded), [t[:30] for t in recorded if t not in saved]


TICK_NS = 10_000_000
"""The longest a file's time stamp may lag a write (the kernel's coarse clock: a tick at 100 Hz)."""


def read_now(db: Path, path: str) -> str | None:
    with Vault.open(db, name="vault", readonly=True) as reader:
        return reader.read(path).content


def test_git_head_is_read_from_a_repository_a_subfolder_a_linked_work_tree_and_packed_refs(tmp_path: Path) -> None:
    from vaultsync.disk.vanished import git_head

    repo, elsewhere = tmp_path / "repo", tmp_path / "plain"
    (repo / "Notes").mkdir(parents=True)
    elsewhere.mkdir()
    assert git_head(elsewhere) is None
    git(repo, "init", "-q", "-b", "main")
    assert git_head(repo) == "refs/heads/main (no commit yet)"
    (repo / "Notes" / "a.md").write_text("# a\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    first = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert git_head(repo) == git_head(repo / "Notes") == f"refs/heads/main {first}"
    git(repo, "pack-refs", "--all")
    assert git_head(repo) == f"refs/heads/main {first}"
    git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "linked"))
    assert git_head(tmp_path / "linked") == f"refs/heads/side {first}"
    (repo / "Notes" / "b.md").write_text("# b\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")
    assert git_head(repo) != f"refs/heads/main {first}" and git_head(tmp_path / "linked") == f"refs/heads/side {first}"
    git(repo, "checkout", "-q", "--detach", first)
    assert git_head(repo / "Notes") == first


def test_a_file_that_never_rests_waits_three_holds_at_most() -> None:
    """A log appended to every few milliseconds never rests (``Plan``'s ``unsettled``): it may wait as long as a run
    of holds, and is then recorded as read."""
    from vaultsync.live.holding import HOLD_ROUNDS, HeldPaths

    held, hold_s = HeldPaths(), 0.1
    held.keep([], everything=False, hold_s=hold_s, first=time.monotonic(), unsettled=["Log.md"])
    assert held.may_hold("Log.md") and held.may_hold("Other.md")
    time.sleep(HOLD_ROUNDS * hold_s / 2)
    held.keep([], everything=False, hold_s=hold_s, first=time.monotonic(), unsettled=["Log.md"])
    assert held.may_hold("Log.md")  # still within its longest wait: it keeps its first time
    time.sleep(HOLD_ROUNDS * hold_s / 2 + 0.05)
    assert not held.may_hold("Log.md") and held.may_hold("Other.md")
    held.keep([], everything=False, hold_s=hold_s, first=time.monotonic(), unsettled=[])  # recorded: forgotten
    assert held.may_hold("Log.md")

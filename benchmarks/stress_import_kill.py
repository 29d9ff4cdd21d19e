"""SIGKILL stress of ``vaultsync import``: a 2,500-note change batch killed while its transaction is being
written, then 22 of its notes read one by one with ``vaultsync read``: every round must show all of the
batch or none of it.

Each round rewrites every note (generation g: each note's text ends with "generation g"), starts a real
``vaultsync import`` (parse workers on, as the CLI runs them) with its progress bar on a pseudo-terminal,
and kills it with SIGKILL at a random point of the write transaction (the bar counts notes written
inside it; one round in four up to two seconds after the last note: the index, the commit, the exit).
Then 22 random notes are read one by one, each by its own ``vaultsync read`` process (the first of them
meets the killed writer's WAL and runs its recovery), and ``ls --json`` after them. A round passes when
every read shows the same generation (g: the batch landed whole; g-1: not at all) and each read's bytes
hash to what ``ls`` lists for the note; then an import completes the batch and the next round starts.
Not part of ``make test`` nor of the harness (about a minute a round here; what it showed: docs/performance-notes.md).

    .venv/bin/python benchmarks/stress_import_kill.py --rounds 200          # the full procedure
    .venv/bin/python benchmarks/stress_import_kill.py --rounds 5 --notes 2500
"""

from __future__ import annotations

import argparse
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
import tempfile
import time
from pathlib import Path

PERCENT = re.compile(rb"(\d+)%")
GENERATION = re.compile(r"generation (\d+)\n\Z")
WORDS = "alpha beta gamma delta river stone cloud ledger orbit maple quartz harbor lantern meadow signal".split()


def note_text(rng: random.Random, index: int, generation: int) -> str:
    lines = [f"# Note {index}\n"]
    for section in range(3):
        words = " ".join(rng.choice(WORDS) for _ in range(30))
        lines.append(f"\n## Part {section}\n\n{words} [[Note {rng.randrange(1000)}]] #t{section}\n")
    lines.append(f"\ngeneration {generation}\n")
    return "".join(lines)


def write_generation(root: Path, notes: int, generation: int, rng: random.Random) -> None:
    for index in range(notes):
        path = root / f"folder{index % 50}" / f"Note {index}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(note_text(rng, index, generation), encoding="utf-8")


def vaultsync(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vaultsync", "--db", str(db), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def import_and_kill(db: Path, root: Path, percent: int, extra_s: float) -> tuple[int, bool]:
    """Start ``vaultsync import`` (its stderr on a pseudo-terminal, so it draws its progress bar) and SIGKILL it
    once the bar shows ``percent`` (+ ``extra_s``); returns the percent seen and whether it had exited first."""
    master, slave = pty.openpty()
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
        while proc.poll() is None and seen < percent:
            ready, _, _ = select.select([master], [], [], 0.002)
            if ready:
                try:
                    buffer = (buffer + os.read(master, 65536))[-4096:]
                except OSError:
                    continue
                found = PERCENT.findall(buffer)
                if found:
                    seen = int(found[-1])
        if extra_s and proc.poll() is None:
            time.sleep(extra_s)
        exited = proc.poll() is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        os.close(master)
    return seen, exited


def generation_of(text: str) -> int | None:
    found = GENERATION.search(text)
    return int(found.group(1)) if found else None


def one_round(db: Path, root: Path, notes: int, sample: int, generation: int, rng: random.Random) -> dict:
    write_generation(root, notes, generation, rng)
    percent = rng.choice([rng.randint(1, 99), rng.randint(1, 99), rng.randint(1, 99), 100])
    extra = round(rng.uniform(0.0, 2.0), 2) if percent == 100 else 0.0  # the tombstones, the index, the commit
    seen, exited = import_and_kill(db, root, percent, extra)
    paths = sorted(rng.sample(range(notes), sample))
    reads, hashes = [], {}
    for index in paths:
        path = f"folder{index % 50}/Note {index}.md"
        done = vaultsync(db, "read", path)
        reads.append(generation_of(done.stdout) if done.returncode == 0 else f"error: {done.stderr.strip()}")
        hashes[path] = hashlib.sha256(done.stdout.encode("utf-8")).hexdigest()
    listed = {n["path"]: n["content_hash"] for n in json.loads(vaultsync(db, "ls", "--json").stdout or "[]")}
    with_new = sum(r == generation for r in reads)
    agree = (
        len(set(reads)) == 1
        and reads[0] in (generation, generation - 1)
        and all(digest.startswith(listed.get(path) or "-") for path, digest in hashes.items())
    )  # (or its prefix)
    finished = vaultsync(db, "import", str(root))
    after = vaultsync(db, "read", f"folder{paths[0] % 50}/Note {paths[0]}.md")
    return {
        "generation": generation,
        "aimed": percent,
        "extra_s": extra,
        "seen": seen,
        "exited_first": exited,
        "landed": with_new,
        "of": sample,
        "agree": agree,
        "reads": reads,
        "listed": len(listed),
        "completed": finished.returncode == 0 and generation_of(after.stdout) == generation,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--notes", type=int, default=2500)
    parser.add_argument("--sample", type=int, default=22)
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--dir", type=Path, default=None, help="work here (default: a temporary folder)")
    args = parser.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="vaultsync-stress-"))
    root, db = base / "vault", base / "db" / "vaultsync.db"
    rng = random.Random(args.seed)
    write_generation(root, args.notes, 0, rng)
    first = vaultsync(db, "import", str(root))
    if first.returncode != 0:
        print(first.stderr, file=sys.stderr)
        return 2
    failures, landed_whole, landed_none = 0, 0, 0
    started = time.monotonic()
    for generation in range(1, args.rounds + 1):
        result = one_round(db, root, args.notes, args.sample, generation, rng)
        ok = result["agree"] and result["completed"]
        failures += not ok
        landed_whole += result["landed"] == result["of"]
        landed_none += result["landed"] == 0
        extra = f" +{result['extra_s']:.2f}s" if result["extra_s"] else ""
        exited = ", had exited" if result["exited_first"] else ""
        print(
            f"round {generation:3d}: killed at {result['seen']:3d}% (aimed {result['aimed']}%{extra}{exited})"
            f" -> {result['landed']}/{result['of']} reads show the batch; "
            f"{'ok' if ok else 'DISAGREE ' + json.dumps(result['reads'])}",
            flush=True,
        )
    check = vaultsync(db, "check")
    print(
        f"{args.rounds} rounds of a {args.notes}-note batch, {args.sample} reads each, "
        f"{time.monotonic() - started:.0f} s: {landed_whole} landed whole, {landed_none} not at all, "
        f"{failures} disagreeing; check: {check.stdout.strip() or check.stderr.strip()}"
    )
    return 1 if failures or check.returncode else 0


if __name__ == "__main__":
    sys.exit(main())

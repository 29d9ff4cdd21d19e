"""SIGKILL stress of ``vaultsync import``: a 2,500-note change batch killed while its transaction is being
written, then 22 of its notes read one by one with ``vaultsync read``: every round must show all of the
batch or none of it.

Set up once: a vault of generated notes (each note's text ends with "generation 0") is imported, the
database is kept as the base, and every note is rewritten (new text, ending with "generation 1"): the
change batch. Each round starts from a fresh copy of the base database (its folder holds nothing else),
starts a real ``vaultsync import`` of the rewritten vault (parse workers on, as the CLI runs them) with
its progress bar on a pseudo-terminal, and kills it with SIGKILL at a random point of the write
transaction (the bar counts notes written inside it; one round in four after the last note, up to 0.15 s or
2 s later: the search index and the commit take a fraction of a second, then the exit; ``--tail``: every round
within 0.15 s of the last note). Then 22 random notes are read one by one, each by its own
``vaultsync read`` process (the first of them meets the killed writer's WAL and runs its recovery), and
``ls --json`` after them. A round passes when every read shows the same generation (1: the batch landed
whole; 0: not at all) and each read's bytes hash to what ``ls`` lists for the note. Every tenth round
(and the last) an import then completes the batch on the killed database and ``check`` must pass.

Registered in the harness as ``stress_import_kill`` (200 rounds; ``--quick``: one round on the sample vault,
each note ending with its generation, 5 reads). Not part of ``make test``. Run as a script for other sizes; its result
line goes through the harness to benchmarks/results/stress_import_kill.jsonl (``--no-save``: print only):

    .venv/bin/python -m benchmarks run stress_import_kill                  # the full procedure, 200 rounds
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
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: the benchmarks package lives beside vaultsync/
    sys.path.insert(0, str(REPO))

from benchmarks.harness import measure, percentile, record  # noqa: E402
from benchmarks.inputs import SAMPLE  # noqa: E402

NAME = "stress_import_kill"
PERCENT = re.compile(rb"(\d+)%")
GENERATION = re.compile(r"generation (\d+)\n\Z")
WORDS = "alpha beta gamma delta river stone cloud ledger orbit maple quartz harbor lantern meadow signal".split()


def generated_text(rng: random.Random, index: int, generation: int) -> str:
    lines = [f"# Note {index}\n"]
    for section in range(3):
        words = " ".join(rng.choice(WORDS) for _ in range(30))
        lines.append(f"\n## Part {section}\n\n{words} [[Note {rng.randrange(1000)}]] #t{section}\n")
    lines.append(f"\ngeneration {generation}\n")
    return "".join(lines)


def write_generated(root: Path, notes: int, generation: int, rng: random.Random) -> list[str]:
    paths = []
    for index in range(notes):
        rel = f"folder{index % 50}/Note {index}.md"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(generated_text(rng, index, generation), encoding="utf-8")
        paths.append(rel)
    return paths


def write_sample(root: Path, source: Path, generation: int) -> list[str]:
    """The sample vault's notes, each ending with its generation line (the quick form)."""
    paths = []
    for path in sorted(source.rglob("*.md")):
        if path.is_symlink() or any(part.startswith(".") for part in path.relative_to(source).parts):
            continue
        rel = path.relative_to(source).as_posix()
        text = path.read_text(encoding="utf-8").rstrip("\n")
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"{text}\n\ngeneration {generation}\n", encoding="utf-8")
        paths.append(rel)
    return paths


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


def fresh_copy(base: Path, to: Path) -> Path:
    """The base database's folder copied to ``to`` (emptied first): the round's database."""
    shutil.rmtree(to, ignore_errors=True)
    shutil.copytree(base.parent, to)
    return to / base.name


def one_round(
    base: Path, work: Path, root: Path, paths: list[str], sample: int, complete: bool, rng: random.Random, tail: bool
):
    db = fresh_copy(base, work / "round")
    percent = 100 if tail else rng.choice([rng.randint(1, 99), rng.randint(1, 99), rng.randint(1, 99), 100])
    # after the last note: the tombstones, the search index, the commit (a fraction of a second), the exit
    reach = 0.15 if tail else rng.choice([0.15, 2.0])
    extra = round(rng.uniform(0.0, reach), 3) if percent == 100 else 0.0
    seen, exited = import_and_kill(db, root, percent, extra)
    chosen = rng.sample(paths, min(sample, len(paths)))
    reads: list[Any] = []
    hashes = {}
    for path in chosen:
        done = vaultsync(db, "read", path)
        reads.append(generation_of(done.stdout) if done.returncode == 0 else f"error: {done.stderr.strip()}")
        hashes[path] = hashlib.sha256(done.stdout.encode("utf-8")).hexdigest()
    listed = {n["path"]: n["content_hash"] for n in json.loads(vaultsync(db, "ls", "--json").stdout or "[]")}
    agree = (
        len(set(reads)) == 1
        and reads[0] in (0, 1)
        and all(digest.startswith(listed.get(path) or "-") for path, digest in hashes.items())
    )  # ls lists a hash or its prefix
    result = {
        "aimed": percent,
        "extra_s": extra,
        "seen": seen,
        "exited_first": exited,
        "landed": sum(r == 1 for r in reads),
        "of": len(reads),
        "agree": agree,
        "reads": reads,
        "completed": None,
    }
    if complete:  # the killed database takes the batch whole afterwards, and its check passes
        finished = vaultsync(db, "import", str(root))
        after = vaultsync(db, "read", chosen[0])
        check = vaultsync(db, "check")
        result["completed"] = finished.returncode == 0 and generation_of(after.stdout) == 1 and check.returncode == 0
        result["check"] = check.stdout.strip() or check.stderr.strip()
    return result


def stress(
    rounds: int,
    notes: int | None,
    sample: int,
    seed: int,
    complete_every: int = 10,
    max_seconds: float | None = None,
    work: Path | None = None,
    log=sys.stderr,
    tail: bool = False,
) -> dict[str, Any]:
    """The procedure; ``notes=None`` uses the sample vault. Returns the figures."""
    own = work is None
    work = work or Path(tempfile.mkdtemp(prefix="vaultsync-stress-"))
    try:
        root, base = work / "vault", work / "base" / "vaultsync.db"
        for old in (root, base.parent, work / "round"):  # a --dir used before
            shutil.rmtree(old, ignore_errors=True)
        rng = random.Random(seed)
        if notes is None:
            write_sample(root, SAMPLE, 0)
        else:
            write_generated(root, notes, 0, rng)
        first = vaultsync(base, "import", str(root))
        if first.returncode != 0:
            raise SystemExit(f"the base import failed: {first.stderr.strip()[-2000:]}")
        paths = write_sample(root, SAMPLE, 1) if notes is None else write_generated(root, notes, 1, rng)
        started = time.monotonic()
        ran = whole = none = disagreed = completed = not_completed = exited_first = 0
        seconds, seen, bad_rounds = [], [], []
        for number in range(1, rounds + 1):
            if max_seconds is not None and time.monotonic() - started > max_seconds:
                break
            round_started = time.monotonic()
            complete = number % complete_every == 0 or number == rounds
            result = one_round(base, work, root, paths, sample, complete, rng, tail)
            seconds.append(time.monotonic() - round_started)
            ran += 1
            whole += result["landed"] == result["of"] and result["agree"]
            none += result["landed"] == 0 and result["agree"]
            disagreed += not result["agree"]
            exited_first += result["exited_first"]
            seen.append(result["seen"])
            if result["completed"] is not None:
                completed += result["completed"]
                not_completed += not result["completed"]
            if not result["agree"] or result["completed"] is False:
                bad_rounds.append(number)
            extra = f" +{result['extra_s']:.3f}s" if result["extra_s"] else ""
            gone = ", had exited" if result["exited_first"] else ""
            verdict = "ok" if result["agree"] else "DISAGREE " + json.dumps(result["reads"])
            if result["completed"] is not None:
                verdict += "; completed, check ok" if result["completed"] else f"; NOT COMPLETED ({result['check']})"
            print(
                f"round {number:3d}: killed at {result['seen']:3d}% (aimed {result['aimed']}%{extra}{gone})"
                f" -> {result['landed']}/{result['of']} reads show the batch; {verdict}"
                f" [{seconds[-1]:.0f} s]",
                file=log,
                flush=True,
            )
        killed_inside = [s for s in seen if 0 <= s < 100]
        return {
            "rounds_asked": rounds,
            "rounds_run": ran,
            "notes": len(paths),
            "reads_per_round": min(sample, len(paths)),
            "landed_whole": whole,
            "landed_none": none,
            "disagreed": disagreed,
            "completions_checked": completed + not_completed,
            "completions_failed": not_completed,
            "bad_rounds": ", ".join(map(str, bad_rounds[:12])),
            "killed_before_100_percent": len(killed_inside),
            "killed_at_100_percent_or_later": ran - len(killed_inside) - exited_first,
            "had_exited_before_the_kill": exited_first,
            "round_p50_s": round(percentile(seconds, 0.5), 1) if seconds else None,
            "seed": seed,
            "tail_only": tail,
        }
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


def run(quick: bool) -> dict[str, Any]:
    """The harness's entry: 200 rounds of a 2,500-note batch; quick: one round on the sample vault, 5 reads."""
    if quick:
        return stress(rounds=1, notes=None, sample=5, seed=34, complete_every=1)
    return stress(rounds=200, notes=2500, sample=22, seed=34)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--notes", type=int, default=2500, help="generated notes (0: the sample vault)")
    parser.add_argument("--sample", type=int, default=22, help="notes read one by one after each kill")
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--complete-every", type=int, default=10, help="complete the batch every Nth round")
    parser.add_argument("--max-minutes", type=float, default=None, help="start no round after this; record what ran")
    parser.add_argument(
        "--tail", action="store_true", help="kill every round within 0.15 s after the last note (the commit's window)"
    )
    parser.add_argument("--dir", type=Path, default=None, help="work here (default: a temporary folder)")
    parser.add_argument("--no-save", action="store_true", help="print the result only")
    parser.add_argument("--results", type=Path, help="folder for the JSON line (default benchmarks/results)")
    args = parser.parse_args()
    command = "python benchmarks/stress_import_kill.py " + " ".join(sys.argv[1:])
    if args.dir:
        args.dir.mkdir(parents=True, exist_ok=True)
    entry = measure(
        NAME,
        lambda _quick: stress(
            args.rounds,
            args.notes or None,
            args.sample,
            args.seed,
            args.complete_every,
            args.max_minutes * 60 if args.max_minutes else None,
            args.dir,
            tail=args.tail,
        ),
        command=command.strip(),
    )
    print(json.dumps(entry, ensure_ascii=False))
    if not args.no_save:
        print(f"appended to {record(entry, args.results)}", file=sys.stderr)
    f = entry["figures"]
    return 1 if f["disagreed"] or f["completions_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""CLI start-up cost: what ``vaultsync --help`` pays before it prints anything (issue 8, item 4).

    .venv/bin/python benchmarks/bench_startup.py [--runs 5] [--no-save]

Runs ``python -X importtime -m vaultsync --help`` RUNS times, each in a fresh process, and prints the
median of vaultsync's own import time (the sum of the cumulative times of the top-level ``vaultsync*``
entries in the importtime report) and the median wall time of those runs. Target: under 150 ms of
vaultsync's own imports. Results go to benchmarks/results/startup.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND = [sys.executable, "-X", "importtime", "-m", "vaultsync", "--help"]


def own_import_us(report: str) -> int:
    """Sum of the cumulative microseconds of the top-level ``vaultsync*`` entries of an importtime report."""
    total = 0
    for line in report.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if name.startswith(" vaultsync") and not name.startswith("  "):  # one space after "|": top level
            total += int(cumulative)
    return total


def run_once() -> tuple[float, float]:
    """One fresh ``--help``: (vaultsync's own import ms, wall ms)."""
    start = time.perf_counter()
    done = subprocess.run(COMMAND, cwd=ROOT, capture_output=True, text=True, check=True)
    wall_ms = (time.perf_counter() - start) * 1000
    return own_import_us(done.stderr) / 1000, wall_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    runs = [run_once() for _ in range(args.runs)]
    own = statistics.median(r[0] for r in runs)
    wall = statistics.median(r[1] for r in runs)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    report = (
        "# CLI start-up (`benchmarks/bench_startup.py`)\n\n"
        f"`{' '.join(['python', *COMMAND[1:]])}`, {args.runs} fresh processes, median; "
        f"HEAD {commit}, Python {sys.version.split()[0]}.\n\n"
        "| measure | median | runs |\n|---|---:|---|\n"
        f"| vaultsync's own imports (cumulative, top-level `vaultsync*`) | {own:.1f} ms | "
        f"{', '.join(f'{r[0]:.1f}' for r in runs)} |\n"
        f"| whole `--help` wall time (with -X importtime) | {wall:.1f} ms | "
        f"{', '.join(f'{r[1]:.0f}' for r in runs)} |\n"
    )
    print(report)
    if not args.no_save:
        out = ROOT / "benchmarks" / "results" / "startup.md"
        out.write_text(report, encoding="utf-8")
        print(f"saved {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

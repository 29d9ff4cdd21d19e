"""CLI start-up: what ``vaultsync --help`` pays before it prints anything.

Runs ``python -X importtime -m vaultsync --help`` in fresh processes (5; 2 when quick) and takes the median of
vaultsync's own import time (the sum of the cumulative times of the top-level ``vaultsync*`` entries of the
importtime report) and of the wall time. Target: under 150 ms of vaultsync's own imports.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from benchmarks.harness import Figures
from benchmarks.inputs import REPO

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


def run(quick: bool) -> Figures:
    own, wall = [], []
    for _ in range(2 if quick else 5):
        start = time.perf_counter()
        done = subprocess.run(COMMAND, cwd=REPO, capture_output=True, text=True, check=True)
        wall.append((time.perf_counter() - start) * 1000)
        own.append(own_import_us(done.stderr) / 1000)
    return {
        "runs": len(own),
        "own_imports_ms": round(statistics.median(own), 1),
        "help_wall_ms": round(statistics.median(wall), 1),
    }

"""Shared helpers of the benchmark scripts not yet ported to the harness (``python -m benchmarks``): corpora, clones,
timing, saving results (one JSON line in benchmarks/results/NAME.jsonl, through ``harness.record_script``)."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORPORA = REPO.parent / "shared" / "corpora"
RESULTS = REPO / "benchmarks" / "results"
sys.path.insert(0, str(REPO / "tests" / "support"))  # search_truth: the independent ground truth
sys.path.insert(0, str(REPO))
from benchmarks.harness import record_script  # noqa: E402


def clone(bundle: str, dest: Path) -> Path:
    """A fresh clone of a corpus bundle (read at run time only; never copied into the repo)."""
    if not (dest / ".git").exists():
        subprocess.run(["git", "clone", "-q", str(CORPORA / bundle), str(dest)], check=True)
    return dest


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def timed(fn, *args, **kwargs) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return (time.perf_counter() - start) * 1000.0, out


def summary_ms(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(values), 2) if values else None,
        "p95_ms": round(percentile(values, 0.95), 2) if values else None,
    }


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}


def save(name: str, payload: dict[str, Any], markdown: str) -> None:
    """Print the script's markdown and append its figures to benchmarks/results/NAME.jsonl."""
    print(markdown)
    print(f"appended to {record_script(name, payload)}")


def history_db(work: Path, name: str) -> tuple[Path, Path, dict[str, Any]]:
    """A corpus clone (``obsidian-NAME.bundle``) and its whole git history imported once (``import_git``) into
    ``work/NAME-history.db``; reused when it exists. Returns the clone, the database and what it holds."""
    from vaultsync.vault import Vault

    root = clone(f"obsidian-{name}.bundle", work / name)
    db = work / f"{name}-history.db"
    info: dict[str, Any] = {}
    if not db.exists():
        started = time.perf_counter()
        with Vault.open(db, root=root, name=name) as vault:
            result = vault.import_git()
        info["import_seconds"] = round(time.perf_counter() - started, 1)
        info["commits"] = result.commits
    with Vault.open(db, name=name, readonly=True) as vault:
        stats = vault.stats().to_json()
        info.update(
            notes=stats["notes"],
            revisions=stats["revisions"],
            batches=stats["batches"],
            first_batch=stats["first_batch"],
            last_batch=stats["last_batch"],
        )
    return root, db, info

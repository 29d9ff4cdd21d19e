"""One way to time a benchmark: ``measure()`` runs it and records what every result needs.

A benchmark is a function ``run(quick: bool) -> dict`` returning its named figures (numbers or short strings).
``measure(name, quick)`` calls it and adds, around it:

* wall seconds, and CPU seconds of the whole process tree: this process and every child it waited for
  (``resource.getrusage`` of ``RUSAGE_SELF`` plus ``RUSAGE_CHILDREN``, before and after), so parse workers,
  CLI subprocesses and servers the benchmark stopped are counted;
* peak memory: the largest resident set of this process or of any waited-for child (``ru_maxrss``; a
  high-water mark over the process's life, so an upper bound for this benchmark when others ran before it);
* the load average before and after (the machine may be shared: CPU seconds are the fairer figure);
* the commit (``git rev-parse``, ``+dirty`` when the tree has changes), the date (UTC) and the machine.

``record(entry)`` appends the entry as one JSON line to ``benchmarks/results/NAME.jsonl``.
Benchmarks never assert on speed: a figure is recorded, never judged.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"

Figures = dict[str, Any]


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not available on this platform
        return []


def commit() -> str:
    """The checkout's short commit, with ``+dirty`` when tracked files (results aside) differ from it; ``""``
    outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":(exclude)benchmarks/results",
            ],  # recording a result is not a change of code
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+dirty" if dirty else "")


def machine() -> dict[str, Any]:
    import sqlite3

    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
    }


def _usage() -> tuple[float, float]:
    """(CPU seconds, peak RSS in MB) of this process and its waited-for children so far."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return cpu, max(me.ru_maxrss, kids.ru_maxrss) / scale


def measure(
    name: str, fn: Callable[[bool], Figures], quick: bool = False, command: str | None = None
) -> dict[str, Any]:
    """Run ``fn(quick)`` once and return the result entry: its figures beside the measurement of the run."""
    load_before = load_average()
    cpu_before, _ = _usage()
    started = time.perf_counter()
    figures = fn(quick)
    wall = time.perf_counter() - started
    cpu_after, peak_mb = _usage()
    if not isinstance(figures, dict):
        raise TypeError(f"benchmark {name} returned {type(figures).__name__}, not a dict of figures")
    return {
        "benchmark": name,
        "command": command or f"python -m benchmarks run {name}" + (" --quick" if quick else ""),
        "quick": quick,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit(),
        "machine": machine(),
        "load_average": {"before": load_before, "after": load_average()},
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu_after - cpu_before, 3),
        "peak_rss_mb": round(peak_mb, 1),
        "figures": figures,
    }


def results_file(name: str, results: Path | None = None) -> Path:
    return (results or RESULTS) / f"{name}.jsonl"


def record(entry: dict[str, Any], results: Path | None = None) -> Path:
    """Append ``entry`` as one JSON line to the benchmark's results file; returns the file."""
    path = results_file(entry["benchmark"], results)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(entry, ensure_ascii=False, sort_keys=False) + "\n")
    return path


def entries(name: str, results: Path | None = None) -> list[dict[str, Any]]:
    """Every recorded entry of a benchmark, oldest first (an empty list when it never ran)."""
    path = results_file(name, results)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# Small helpers the benchmarks share.


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def p50_p95(prefix: str, values_ms: list[float]) -> Figures:
    """``{prefix}_p50_ms`` and ``{prefix}_p95_ms`` of a list of milliseconds (and how many there were)."""
    if not values_ms:
        return {f"{prefix}_n": 0}
    return {
        f"{prefix}_n": len(values_ms),
        f"{prefix}_p50_ms": round(percentile(values_ms, 0.5), 2),
        f"{prefix}_p95_ms": round(percentile(values_ms, 0.95), 2),
    }


_ID_KEYS = ("scale", "corpus", "set", "case", "variant", "process", "name", "mode", "run")


def flatten(payload: dict[str, Any], prefix: str = "", limit: int = 400) -> Figures:
    """Nested results as named figures: ``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; a list of records by what names each
    record (``{"rows": [{"case": "x", "s": 1}]}`` -> ``{"rows.x.s": 1}``); short lists of numbers or strings joined
    into one string, longer ones left out; at most ``limit`` figures."""
    out: Figures = {}
    for key, value in payload.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}.", limit))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, dict) for v in value):
            for i, record in enumerate(value):
                label = "-".join(str(record[k]) for k in _ID_KEYS if isinstance(record.get(k), (str, int))) or str(i)
                out.update(flatten({k: v for k, v in record.items() if k not in _ID_KEYS}, f"{name}.{label}.", limit))
        elif isinstance(value, (list, tuple)):
            if len(value) <= 6 and all(isinstance(v, (int, float, str)) for v in value):
                out[name] = ", ".join(str(v) for v in value)
        elif value is None or isinstance(value, (int, float, str, bool)):
            out[name] = value
        if len(out) >= limit:
            break
    return dict(list(out.items())[:limit])


_STARTED = time.perf_counter()


def record_script(name: str, payload: dict[str, Any], results: Path | None = None) -> Path:
    """For the scripts not yet ported to ``run(quick)``: record their result as an entry like ``measure()``'s,
    measured over the whole script (wall since this module was imported, CPU and peak memory of the process tree
    since it started)."""
    cpu, peak = _usage()
    entry = {
        "benchmark": name,
        "command": "python " + " ".join(["benchmarks/" + Path(sys.argv[0]).name, *sys.argv[1:]]),
        "quick": False,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit(),
        "machine": machine(),
        "load_average": {"before": [], "after": load_average()},
        "wall_s": round(time.perf_counter() - _STARTED, 3),
        "cpu_s": round(cpu, 3),
        "peak_rss_mb": round(peak, 1),
        "figures": flatten(payload),
    }
    return record(entry, results)


def adopt(path: Path, name: str, command: str | None = None, results: Path | None = None) -> Path:
    """Append a result a script saved as JSON before the harness existed (``results/X.json``) to NAME's JSON lines:
    its figures flattened, the whole payload kept as ``detail``, the commit and date of the file's last commit
    (unless the payload names its own), marked with a ``note``. The old file is left for the caller to remove."""
    payload = json.loads(Path(path).read_text(encoding="utf-8"))
    log = subprocess.run(
        ["git", "log", "-1", "--format=%h %cI", "--", str(Path(path).resolve())],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.split()
    last_commit, last_date = (log[0], log[1][:19] + "Z") if log else ("", "")
    m = (
        payload.get("machine")
        if isinstance(payload.get("machine"), dict)
        else {k: payload[k] for k in ("python", "cpus", "platform") if k in payload}
    )
    before = m.get("load_average") or payload.get("load_start") or payload.get("load_average_at_start") or []
    after = payload.get("load_end") or payload.get("load_average_at_end") or []
    argv = next((payload[k] for k in ("argv", "command") if isinstance(payload.get(k), str)), None)
    skip = {
        "machine",
        "argv",
        "command",
        "load_start",
        "load_end",
        "load_average_at_start",
        "load_average_at_end",
        "python",
        "cpus",
        "platform",
        "commit",
        "started",
        "started_utc",
    }
    figures = {
        k: v
        for k, v in flatten({k: v for k, v in payload.items() if k not in skip}).items()
        if ".warnings." not in k and ".errors." not in k and not (isinstance(v, str) and len(v) > 80)
    }
    entry = {
        "benchmark": name,
        "command": command or argv or f"python benchmarks/{Path(path).stem}",
        "quick": False,
        "date": m.get("date") or payload.get("started") or payload.get("started_utc") or last_date,
        "commit": m.get("vaultsync_commit") or payload.get("commit") or last_commit,
        "machine": {k: m[k] for k in ("python", "cpus", "platform", "sqlite") if k in m},
        "load_average": {
            "before": before if isinstance(before, list) else [],
            "after": after if isinstance(after, list) else [],
        },
        "wall_s": None,
        "cpu_s": None,
        "peak_rss_mb": None,
        "figures": figures,
        "detail": payload,
        "note": f"measured before the harness; adopted from {Path(path).name}"
        + (f" (committed in {last_commit}, {last_date[:10]})" if last_commit else ""),
    }
    return record(entry, results)

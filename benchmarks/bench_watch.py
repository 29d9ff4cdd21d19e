"""Latency and cost of `vaultsync watch` on the Obsidian Hub vault (a real `vaultsync watch` process).

Measures, with the watcher's default quiet period (300 ms) and maximum wait (3 s):

* write → readable latency of spaced edits (half in-place writes, half atomic saves), p50/p95/p99,
  timed from the end of the write to the first `Vault.read` (own read-only connection) returning the
  new text; target p95 <= quiet period + 150 ms;
* CPU used by the watcher process while idle (target <= 1 % of one core), and the amortised cost of
  its periodic reconcile scan;
* the watcher's peak resident memory (VmHWM; target <= 150 MB);
* 1,000-file bursts: copying 1,000 real notes into the vault, and `git checkout` of the hub's largest
  commit (1,256 files), each against `import` (an in-process `Vault.sync()` from the same starting
  store to the same files) — target within 2x;
* idle CPU of the polling fallback, for comparison.

Quick: the sample vault, 4 edits, 1 s idle, a 5-file burst, 1 s of polling idle, no checkout.
Linux only (reads /proc for CPU and memory).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import apsw

from benchmarks.harness import Figures
from benchmarks.inputs import corpus, vault_for, workdir
from vaultsync import NoteNotFound, Vault

CHECKOUT_COMMIT = "56de0227"  # "add-missing-eols": 1,256 notes changed at once
TICK = os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def memory_mb(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


class Watch:
    """A `vaultsync watch --json` process; batch lines are collected with their arrival times."""

    def __init__(self, db: Path, vault: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vaultsync", "--db", str(db), "watch", str(vault), "--json", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.batches: list[tuple[float, dict[str, Any]]] = []
        self.log: list[str] = []
        self._threads = [
            threading.Thread(target=self._out, daemon=True),
            threading.Thread(target=self._err, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _out(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.batches.append((time.monotonic(), json.loads(line)))

    def _err(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            self.log.append(line.rstrip())

    def wait_ready(self, timeout: float = 600) -> float:
        start = time.monotonic()
        while not any("watching " in line for line in self.log):
            if self.proc.poll() is not None or time.monotonic() - start > timeout:
                raise SystemExit("vaultsync watch did not start:\n" + "\n".join(self.log))
            time.sleep(0.05)
        return time.monotonic() - start

    def wait_total(self, key: str, total: int, since: int, timeout: float = 600) -> float:
        """Arrival time of the batch line that brings the sum of ``key`` (batches after ``since``) to ``total``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            running = 0
            for arrived, batch in self.batches[since:]:
                running += batch[key]
                if running >= total:
                    return arrived
            time.sleep(0.01)
        raise SystemExit(f"timed out waiting for {total} {key}:\n" + "\n".join(self.log[-20:]))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=120)
        for thread in self._threads:
            thread.join(timeout=10)
        if code != 0:
            raise SystemExit(f"vaultsync watch exited {code}:\n" + "\n".join(self.log[-20:]))


def cli(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "vaultsync", *args], check=True, capture_output=True)
    return time.perf_counter() - start


def snapshot(db: Path, dest: Path) -> None:
    """A consistent copy of the store (SQLite backup API)."""
    source = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    target = apsw.Connection(str(dest))
    with target.backup("main", source, "main") as backup:
        backup.step()
    target.close()
    source.close()


def import_seconds(db: Path, root: Path) -> tuple[float, dict[str, Any]]:
    """`import` of the same files from the same starting store, timed in-process (no Python start-up)."""
    with Vault.open(db, root=root) as vault:
        start = time.perf_counter()
        summary = vault.sync()
        return time.perf_counter() - start, summary.to_json()


def measure_edits(
    watch: Watch, db: Path, root: Path, edits: int, rng: random.Random, spacing: tuple[float, float] = (0.5, 1.5)
) -> dict[str, Any]:
    notes = sorted(p for p in root.rglob("*.md") if ".git" not in p.parts)
    latencies: dict[str, list[float]] = {"in-place": [], "atomic": []}
    misses = 0
    with Vault.open(db, name=root.name, readonly=True) as reader:
        for i in range(edits):
            path = rng.choice(notes)
            rel = path.relative_to(root).as_posix()
            text = path.read_text(encoding="utf-8") + f"\nbench edit {i} {time.time_ns()}\n"
            kind = "atomic" if i % 2 else "in-place"
            if kind == "atomic":
                tmp = path.with_name(f".{path.name}.tmp")
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, path)
            else:
                path.write_text(text, encoding="utf-8")
            written = time.monotonic()
            while True:
                try:
                    if reader.read(rel).content == text:
                        break
                except NoteNotFound:
                    pass
                if time.monotonic() - written > 15:
                    misses += 1
                    break
                time.sleep(0.005)
            latencies[kind].append((time.monotonic() - written) * 1000)
            time.sleep(rng.uniform(*spacing))
    every = latencies["in-place"] + latencies["atomic"]

    def figures(xs: list[float]) -> dict[str, float]:
        return {
            "n": len(xs),
            "p50_ms": round(statistics.median(xs), 1),
            "p95_ms": round(percentile(xs, 0.95), 1),
            "p99_ms": round(percentile(xs, 0.99), 1),
            "max_ms": round(max(xs), 1),
        }

    return {
        "all": figures(every),
        "in_place": figures(latencies["in-place"]),
        "atomic_save": figures(latencies["atomic"]),
        "timed_out": misses,
    }


def idle_cpu(pid: int, seconds: float) -> float:
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return round((cpu_seconds(pid) - before) / seconds * 100, 3)


def burst_copy(watch: Watch, db: Path, root: Path, work: Path, rng: random.Random, count: int) -> dict[str, Any]:
    before = work / "before-copy.db"
    snapshot(db, before)
    sources = rng.sample(sorted(p for p in root.rglob("*.md") if ".git" not in p.parts), count)
    target = root / "bench-burst"
    since = len(watch.batches)
    start = time.monotonic()
    target.mkdir()
    for i, source in enumerate(sources):
        shutil.copyfile(source, target / f"{i:04} {source.name}")
    written = time.monotonic()
    done = watch.wait_total("added", count, since)
    batches = watch.batches[since:]
    return {
        "files": count,
        "watch_s": round(done - start, 2),
        "after_last_write_s": round(done - written, 2),
        "writing_s": round(written - start, 2),
        "batches": len(batches),
        "batch_sizes": [b["added"] + b["modified"] for _, b in batches],
        "_snapshot": before,
    }


def burst_checkout(work: Path, rng: random.Random) -> dict[str, Any]:
    root = work / "hub-checkout"
    subprocess.run(["git", "clone", "-q", str(corpus("obsidian-hub.bundle")), str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "checkout", "-q", f"{CHECKOUT_COMMIT}^"], check=True)
    changed = subprocess.run(
        ["git", "-C", str(root), "diff", "-z", "--name-only", f"{CHECKOUT_COMMIT}^", CHECKOUT_COMMIT],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\0")
    notes = [p for p in changed if p.endswith(".md") and not any(part.startswith(".") for part in p.split("/"))]
    db = work / "checkout.db"
    cli("--db", str(db), "import", str(root))
    time.sleep(2.5)  # past the racy-mtime window, as for a store imported a while ago
    before = work / "before-checkout.db"
    snapshot(db, before)
    watch = Watch(db, root)
    watch.wait_ready()
    since = len(watch.batches)
    start = time.monotonic()
    subprocess.run(["git", "-C", str(root), "checkout", "-q", CHECKOUT_COMMIT], check=True)
    written = time.monotonic()
    done = watch.wait_total("modified", len(notes), since)
    batches = watch.batches[since:]
    memory = memory_mb(watch.proc.pid)
    watch.stop()
    import_s, summary = import_seconds(before, root)
    watch_s = done - start
    return {
        "commit": CHECKOUT_COMMIT,
        "files": len(notes),
        "watch_s": round(watch_s, 2),
        "after_last_write_s": round(done - written, 2),
        "writing_s": round(written - start, 2),
        "batches": len(batches),
        "batch_sizes": [b["added"] + b["modified"] for _, b in batches],
        "import_s": round(import_s, 2),
        "import_modified": summary["modified"],
        "ratio": round(watch_s / import_s, 2),
        "watcher_memory_mb": memory,
    }


def _flat(prefix: str, figures: dict[str, Any]) -> Figures:
    return {f"{prefix}_{key}": value for key, value in figures.items() if not isinstance(value, (list, dict))}


def run(quick: bool) -> Figures:
    if not Path("/proc/self/stat").exists():
        from benchmarks.inputs import Unavailable

        raise Unavailable("the watch benchmark reads /proc (Linux only)")
    edits, idle_s, burst, polling_idle_s = (4, 1.0, 5, 1.0) if quick else (100, 60.0, 1000, 30.0)
    rng = random.Random(4)
    figures: Figures = {"step_ms": 300, "debounce_ms": 3000}
    with workdir("watch") as work:
        root = vault_for(quick, work)
        db = work / "vaultsync.db"
        figures["import_full_s"] = round(cli("--db", str(db), "import", str(root)), 2)
        time.sleep(2.5)  # past the racy-mtime window
        with Vault.open(db, root=root) as vault:
            figures["notes"] = vault.stats().notes
            scans = []
            for _ in range(1 if quick else 3):
                start = time.perf_counter()
                vault.sync()
                scans.append(time.perf_counter() - start)
        figures["reconcile_scan_s"] = round(statistics.median(scans), 3)
        figures["reconcile_amortised_cpu_percent"] = round(statistics.median(scans) / 300 * 100, 3)
        watch = Watch(db, root)
        figures["startup_s"] = round(watch.wait_ready(), 2)
        time.sleep(0.2 if quick else 1)
        result = measure_edits(watch, db, root, edits, rng, (0.1, 0.3) if quick else (0.5, 1.5))
        figures.update(
            _flat("edit", result["all"]),
            edit_in_place_p50_ms=result["in_place"]["p50_ms"],
            edit_atomic_save_p50_ms=result["atomic_save"]["p50_ms"],
            edit_timed_out=result["timed_out"],
        )
        time.sleep(0.5 if quick else 5)
        figures["idle_cpu_percent_of_one_core"] = idle_cpu(watch.proc.pid, idle_s)
        figures.update(_flat("idle_memory", memory_mb(watch.proc.pid)))
        copy = burst_copy(watch, db, root, work, rng, burst)
        figures.update(_flat("after_bursts_memory", memory_mb(watch.proc.pid)))
        watch.stop()
        import_s, summary = import_seconds(copy.pop("_snapshot"), root)
        copy.update(
            import_s=round(import_s, 3),
            import_added=summary["added"],
            ratio=round(copy["watch_s"] / max(import_s, 1e-6), 2),
        )
        figures.update(_flat("burst_copy", copy))
        poll = Watch(db, root, "--polling")
        poll.wait_ready()
        time.sleep(0.5 if quick else 3)
        figures["polling_idle_cpu_percent_of_one_core"] = idle_cpu(poll.proc.pid, polling_idle_s)
        figures.update(_flat("polling_memory", memory_mb(poll.proc.pid)))
        poll.stop()
        if not quick:
            figures.update(_flat("burst_checkout", burst_checkout(work, rng)))
    return figures

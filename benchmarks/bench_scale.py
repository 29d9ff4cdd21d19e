"""Ten and twenty times the Obsidian Hub on one machine: import, watch and search at 66k and 131k notes.

For each scale k, k copies of the Hub's newest tree (cloned at run time from
../shared/corpora/obsidian-hub.bundle, never committed) are made in sub-folders ``copy-00`` …
of the work folder's vault-{k}x, and measured in one run:

* ``vaultsync import`` (CLI, its default parse workers): wall time, per-note cost and its ratio to
  1x, peak RSS (the largest process, from ``wait4``; and the sampled sum over the process and its
  workers), database size;
* ``vaultsync import`` again with nothing changed (CLI wall time, and ``Vault.sync()`` in-process);
* ``vaultsync watch``: start-up (lock, observer on every folder, catch-up scan) until it logs that
  it is watching; RSS after 10 s idle; one edit → readable (p50 over 10 spaced edits, polled with
  a read-only ``Vault.read``); a ``git pull``-like burst (up to ``--burst`` notes modified as fast as
  possible): batches, their sizes, time until the last lands, the watcher's peak RSS;
* the polling fallback, in a private user namespace whose inotify limit is half the folder count
  (``unshare -Ur``): the warning line, start-up and idle RSS;
* search in-process (read-only ``Vault``): keyword and default (hybrid) mode, p50/p95 over the
  Hub's real queries, now and as of the import's cutoff (every later batch hidden).

Targets at 10x: per-note import cost within 1.3x of 1x, peak RSS < 400 MB, no-change re-import
< 3 s, watcher idle RSS < 300 MB, default search p50 < 100 ms; at 20x no error, the same per-note
cost. Linux only (reads /proc).

``scale_search`` skips the watcher and polling parts: the vault is imported (CLI), then the later
batches the watcher would have written are made in-process (10 single-note edits, one sync each, then
one sync of the burst), and only search is measured, as of the import and now.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, clone, summary_ms
from vaultsync.live.events import count_folders
from vaultsync.vault import Vault

WORK = REPO / "benchmarks" / "work" / "scale"
REUSE = False
PAUSES = {"settle": 10.0, "idle": 10.0, "edits": 10, "gap": 1.0, "poll_settle": 5.0}
"""Seconds the watcher is left alone before and while idle, edits timed and the gap between them (quick: less)."""
MB = 1024 * 1024
TICK = os.sysconf("SC_CLK_TCK")


def vaultsync(*args: str) -> list[str]:
    return [sys.executable, "-m", "vaultsync", *args]


def tree_rss_kb(pid: int) -> int:
    """VmRSS of ``pid`` and its descendants (parse workers), in kB."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{current}/task").iterdir():
                stack.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue
    return total


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run_measured(args: list[str]) -> dict[str, Any]:
    """Run to completion: wall seconds, peak RSS of the largest process (``wait4``), sampled peak of the tree."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err, text=True)
        peak_tree = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.25):
                peak_tree[0] = max(peak_tree[0], tree_rss_kb(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        sampler.join()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{stderr[-3000:]}")
    return {
        "wall_s": wall,
        "largest_peak_mb": usage.ru_maxrss / 1024,
        "tree_peak_mb": peak_tree[0] / 1024,
        "stdout": stdout,
        "stderr": stderr,
    }


def build_vault(hub: Path, k: int) -> Path:
    root = WORK / f"vault-{k}x"
    if root.exists():
        shutil.rmtree(root)
    for i in range(k):
        shutil.copytree(hub, root / f"copy-{i:02d}", ignore=shutil.ignore_patterns(".git"))
    return root


def folders_and_notes(root: Path) -> tuple[int, int, int]:
    """(folders an inotify observer watches, notes, Markdown bytes)."""
    notes = size = 0
    for _, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.endswith(".md") and not name.startswith("."):
                notes += 1
                size += os.path.getsize(os.path.join(_, name))
    return count_folders(root), notes, size


class Watch:
    """A `vaultsync watch --json` process; batch lines collected with their arrival times."""

    def __init__(self, args: list[str]) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.batches: list[tuple[float, dict[str, Any]]] = []
        self.log: list[str] = []
        for target in (self._out, self._err):
            threading.Thread(target=target, daemon=True).start()

    def _out(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.batches.append((time.monotonic(), json.loads(line)))

    def _err(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            self.log.append(line.rstrip())

    def wait_log(self, text: str, timeout: float = 1200) -> float:
        while not any(text in line for line in self.log):
            if self.proc.poll() is not None or time.monotonic() - self.started > timeout:
                raise SystemExit(f"no {text!r} from vaultsync watch:\n" + "\n".join(self.log[-20:]))
            time.sleep(0.05)
        return time.monotonic() - self.started

    def wait_total(self, key: str, total: int, since: int, timeout: float = 1800) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            running = 0
            for arrived, batch in self.batches[since:]:
                running += batch[key]
                if running >= total:
                    return arrived
            time.sleep(0.05)
        raise SystemExit(f"timed out waiting for {total} {key}:\n" + "\n".join(self.log[-20:]))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=1200)
        if code != 0:
            raise SystemExit(f"vaultsync watch exited {code}:\n" + "\n".join(self.log[-20:]))


def readable(db: Path, name: str, path: str, marker: str, timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    with Vault.open(db, name=name, readonly=True) as vault:
        while time.monotonic() < deadline:
            try:
                if marker in vault.read(path).content:
                    return time.monotonic()
            except Exception:  # noqa: BLE001 - not there yet
                pass
            time.sleep(0.005)
    raise SystemExit(f"{path} never showed {marker!r}")


def measure_watch(db: Path, root: Path, notes: list[Path], burst: int) -> dict[str, Any]:
    watch = Watch(vaultsync("--db", str(db), "watch", str(root), "--json"))
    out: dict[str, Any] = {"startup_s": round(watch.wait_log("watching "), 2)}
    time.sleep(PAUSES["settle"])
    cpu0 = cpu_s(watch.proc.pid)
    time.sleep(PAUSES["idle"])
    out["idle_rss_mb"] = round(status_kb(watch.proc.pid, "VmRSS") / 1024, 1)
    out["idle_cpu_pct"] = round((cpu_s(watch.proc.pid) - cpu0) / PAUSES["idle"] * 100, 1)
    latencies = []
    for i in range(int(PAUSES["edits"])):
        note = notes[(i * 7919) % len(notes)]
        marker = f"scale-edit-{i}-{time.time_ns()}"
        with note.open("a", encoding="utf-8") as handle:
            handle.write(f"\n{marker}\n")
        written = time.monotonic()
        latencies.append((readable(db, root.name, note.relative_to(root).as_posix(), marker) - written) * 1000)
        time.sleep(PAUSES["gap"])
    out["edit_readable"] = summary_ms(latencies)
    count = min(burst, len(notes))
    since = len(watch.batches)
    start = time.monotonic()
    step = max(1, len(notes) // count)
    for note in notes[::step][:count]:
        with note.open("a", encoding="utf-8") as handle:
            handle.write("\nburst\n")
    written = time.monotonic()
    done = watch.wait_total("modified", count, since)
    sizes = [b["modified"] + b["added"] for _, b in watch.batches[since:]]
    out["burst"] = {
        "notes": count,
        "writing_s": round(written - start, 1),
        "landed_s": round(done - start, 1),
        "batches": len(sizes),
        "largest_batch": max(sizes),
    }
    out["peak_rss_mb"] = round(status_kb(watch.proc.pid, "VmHWM") / 1024, 1)
    watch.stop()
    return out


def measure_polling(db: Path, root: Path, folders: int) -> dict[str, Any]:
    """The fallback when the inotify limit is below the folder count (a private user namespace)."""
    if shutil.which("unshare") is None:
        return {"skipped": "no unshare"}
    limit = max(1, folders // 2)
    script = f'echo {limit} > /proc/sys/user/max_inotify_watches && exec "$@"'
    watch = Watch(
        ["unshare", "-Ur", "sh", "-c", script, "sh", *vaultsync("--db", str(db), "watch", str(root), "--json")]
    )
    try:
        watch.wait_log("falling back to polling", timeout=600)
        ready = watch.wait_log("watching ", timeout=1200)
    except SystemExit as exc:
        watch.proc.kill()
        return {"skipped": str(exc).splitlines()[0]}
    warning = next(line for line in watch.log if "falling back to polling" in line)
    time.sleep(PAUSES["poll_settle"])
    cpu0 = cpu_s(watch.proc.pid)
    time.sleep(PAUSES["idle"])
    out = {
        "limit": limit,
        "warning": warning.split("WARNING", 1)[-1].strip(" :"),
        "startup_s": round(ready, 2),
        "idle_rss_mb": round(status_kb(watch.proc.pid, "VmRSS") / 1024, 1),
        "idle_cpu_pct": round((cpu_s(watch.proc.pid) - cpu0) / PAUSES["idle"] * 100, 1),
    }
    watch.stop()
    return out


def measure_search(db: Path, name: str, queries: list[str], past: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Vault.open(db, name=name, readonly=True) as vault:
        for mode in ("keyword", "hybrid"):
            for when, as_of in (("now", None), ("past", past)):
                vault.search(queries[0], mode=mode, as_of=as_of)  # warm the page cache
                times, cpu = [], []
                for query in queries:
                    start, cpu0 = time.perf_counter(), time.process_time()
                    vault.search(query, mode=mode, as_of=as_of)
                    times.append((time.perf_counter() - start) * 1000)
                    cpu.append((time.process_time() - cpu0) * 1000)
                out[f"{mode}_{when}"] = summary_ms(times)
                out[f"{mode}_{when}_cpu"] = summary_ms(cpu)  # this process's CPU: less sensitive to a loaded machine
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:  # a count for the report only
            out["chunks"] = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    return out


def build_history(hub: Path, k: int, burst: int) -> tuple[Path, str, dict[str, Any]]:
    """The search-only database: the import, then the later batches the watcher would write (not timed)."""
    meta = WORK / f"scale-{k}x.json"
    db = WORK / f"scale-{k}x.db"
    if REUSE and meta.exists() and db.exists():
        return db, f"vault-{k}x", json.loads(meta.read_text())
    print(f"== {k}x: building the vault", file=sys.stderr, flush=True)
    root = build_vault(hub, k)
    folders, count, size = folders_and_notes(root)
    for old in WORK.glob(f"scale-{k}x.db*"):
        old.unlink()
    print(f"== {k}x: import of {count} notes", file=sys.stderr, flush=True)
    first = run_measured(vaultsync("--db", str(db), "import", str(root), "--json"))
    summary = json.loads(first["stdout"])
    notes = sorted(p for p in root.rglob("*.md") if not any(part.startswith(".") for part in p.relative_to(root).parts))
    with Vault.open(db, root=root) as vault:
        for i in range(10):
            with notes[(i * 7919) % len(notes)].open("a", encoding="utf-8") as handle:
                handle.write(f"\nscale-edit-{i}\n")
            vault.sync()
        step = max(1, len(notes) // min(burst, len(notes)))
        for note in notes[::step][:burst]:
            with note.open("a", encoding="utf-8") as handle:
                handle.write("\nburst\n")
        vault.sync()
    info = {
        "notes": count,
        "markdown_mb": round(size / MB, 1),
        "folders": folders,
        "past": summary["known_at"],
        "import_wall_s": round(first["wall_s"], 1),
        "database_mb": round(sum(p.stat().st_size for p in WORK.glob(f"scale-{k}x.db*")) / MB, 1),
    }
    meta.write_text(json.dumps(info, indent=1) + "\n")
    shutil.rmtree(root, ignore_errors=True)
    return db, root.name, info


def measure_search_only(hub: Path, k: int, queries: list[str], burst: int) -> dict[str, Any]:
    db, name, info = build_history(hub, k, burst)
    print(f"== {k}x: search", file=sys.stderr, flush=True)
    r = {"scale": k, **info, "search": measure_search(db, name, queries, info["past"])}
    print(json.dumps(r, indent=1), file=sys.stderr, flush=True)
    return r


def measure_scale(hub: Path, k: int, queries: list[str], burst: int) -> dict[str, Any]:
    print(f"== {k}x: building the vault", file=sys.stderr, flush=True)
    root = build_vault(hub, k)
    folders, count, size = folders_and_notes(root)
    db = WORK / f"scale-{k}x.db"
    for old in WORK.glob(f"scale-{k}x.db*"):
        old.unlink()
    r: dict[str, Any] = {"scale": k, "notes": count, "markdown_mb": round(size / MB, 1), "folders": folders}
    print(f"== {k}x: import of {count} notes", file=sys.stderr, flush=True)
    first = run_measured(vaultsync("--db", str(db), "import", str(root), "--json"))
    summary = json.loads(first["stdout"])
    r["import"] = {
        "wall_s": round(first["wall_s"], 1),
        "added": summary["added"],
        "ms_per_note": round(first["wall_s"] * 1000 / count, 3),
        "largest_process_peak_mb": round(first["largest_peak_mb"], 1),
        "all_processes_peak_mb": round(first["tree_peak_mb"], 1),
        "errors": len(summary["errors"]),
    }
    r["database_mb"] = round(sum(p.stat().st_size for p in WORK.glob(f"scale-{k}x.db*")) / MB, 1)
    again = run_measured(vaultsync("--db", str(db), "import", str(root), "--json"))
    with Vault.open(db, root=root) as vault:  # the same, in-process: the sync alone, without Python start-up
        start = time.perf_counter()
        unchanged = vault.sync().unchanged
        sync_s = time.perf_counter() - start
    r["reimport"] = {
        "wall_s": round(again["wall_s"], 2),
        "sync_s": round(sync_s, 2),
        "unchanged": unchanged,
        "peak_mb": round(again["largest_peak_mb"], 1),
    }
    print(f"== {k}x: watch", file=sys.stderr, flush=True)
    notes = sorted(p for p in root.rglob("*.md") if not any(part.startswith(".") for part in p.relative_to(root).parts))
    r["watch"] = measure_watch(db, root, notes, burst)
    print(f"== {k}x: polling fallback", file=sys.stderr, flush=True)
    r["polling"] = measure_polling(db, root, folders)
    print(f"== {k}x: search", file=sys.stderr, flush=True)
    r["search"] = measure_search(db, root.name, queries, summary["known_at"])
    print(json.dumps(r, indent=1), file=sys.stderr, flush=True)
    return r


def _run(quick: bool, search_only: bool) -> dict[str, Any]:
    """The harness's entries: 1x, 10x and 20x the Hub, 40 queries, a burst of 10,000 notes; quick: the sample
    vault at 1x and 2x, 5 queries, a burst of 10 notes, short pauses."""
    global WORK, REUSE
    from benchmarks.harness import flatten
    from benchmarks.inputs import QUICK_QUERIES, bench_work, hub_queries, sample_vault, workdir

    with workdir("scale") as tmp:
        REUSE = False
        if quick:
            WORK = tmp
            hub, scales, queries, burst = sample_vault(tmp / "notes"), [1, 2], QUICK_QUERIES[:5], 10
            PAUSES.update(settle=0.2, idle=1.0, edits=2, gap=0.1, poll_settle=0.2)
        else:
            WORK = bench_work("scale")
            hub, scales, burst = clone("obsidian-hub.bundle", WORK / "hub"), [1, 10, 20], 10_000
            every = hub_queries()
            queries = every[:: max(1, len(every) // 40)][:40]
        measure = measure_search_only if search_only else measure_scale
        figures: dict[str, Any] = {}
        try:
            for k in scales:
                figures.update(flatten(measure(hub, k, queries, burst), f"{k}x."))
                if not search_only:
                    shutil.rmtree(WORK / f"vault-{k}x", ignore_errors=True)
        finally:
            PAUSES.update(settle=10.0, idle=10.0, edits=10, gap=1.0, poll_settle=5.0)
    return figures


def run(quick: bool) -> dict[str, Any]:
    return _run(quick, search_only=False)


def run_search(quick: bool) -> dict[str, Any]:
    return _run(quick, search_only=True)

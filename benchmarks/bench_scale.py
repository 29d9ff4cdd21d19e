"""Ten and twenty times the Obsidian Hub on one machine: import, watch and search at 66k and 131k notes.

    .venv/bin/python benchmarks/bench_scale.py [--scales 1 10 20] [--queries 40] [--burst 10000] [--no-save]
    .venv/bin/python benchmarks/bench_scale.py --search-only [--work DIR] [--reuse] [--name scale_search]

For each scale k, k copies of the Hub's newest tree (cloned at run time from
../shared/corpora/obsidian-hub.bundle, never committed) are made in sub-folders ``copy-00`` …
of benchmarks/work/scale/vault-{k}x, and measured in one run:

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
cost. Results: benchmarks/results/scale.json and scale.md. Linux only (reads /proc).

``--search-only`` skips the watcher and polling parts: the vault is imported (CLI), then the later
batches the watcher would have written are made in-process (10 single-note edits, one sync each, then
one sync of the burst), and only search is measured, as of the import and now. With ``--reuse`` a
database left in ``--work`` by an earlier run is searched as it is (its cutoff read from the side
file ``scale-{k}x.json``), so that two vaultsync versions can be measured on the same databases: run
this script with the other version's Python (its own venv), e.g. ``/old/.venv/bin/python
benchmarks/bench_scale.py --search-only --reuse --name scale_search_old``.
"""

from __future__ import annotations

import argparse
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

from common import CORPORA, REPO, clone, machine, save, summary_ms

from vaultsync.live.events import count_folders
from vaultsync.vault import Vault

WORK = REPO / "benchmarks" / "work" / "scale"
REUSE = False
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
    return {"wall_s": wall, "largest_peak_mb": usage.ru_maxrss / 1024, "tree_peak_mb": peak_tree[0] / 1024,
            "stdout": stdout, "stderr": stderr}


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
    time.sleep(10)
    cpu0 = cpu_s(watch.proc.pid)
    time.sleep(10)
    out["idle_rss_mb"] = round(status_kb(watch.proc.pid, "VmRSS") / 1024, 1)
    out["idle_cpu_pct"] = round((cpu_s(watch.proc.pid) - cpu0) / 10 * 100, 1)
    latencies = []
    for i in range(10):
        note = notes[(i * 7919) % len(notes)]
        marker = f"scale-edit-{i}-{time.time_ns()}"
        with note.open("a", encoding="utf-8") as handle:
            handle.write(f"\n{marker}\n")
        written = time.monotonic()
        latencies.append((readable(db, root.name, note.relative_to(root).as_posix(), marker) - written) * 1000)
        time.sleep(1)
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
    out["burst"] = {"notes": count, "writing_s": round(written - start, 1), "landed_s": round(done - start, 1),
                    "batches": len(sizes), "largest_batch": max(sizes)}
    out["peak_rss_mb"] = round(status_kb(watch.proc.pid, "VmHWM") / 1024, 1)
    watch.stop()
    return out


def measure_polling(db: Path, root: Path, folders: int) -> dict[str, Any]:
    """The fallback when the inotify limit is below the folder count (a private user namespace)."""
    if shutil.which("unshare") is None:
        return {"skipped": "no unshare"}
    limit = max(1, folders // 2)
    script = f"echo {limit} > /proc/sys/user/max_inotify_watches && exec \"$@\""
    watch = Watch(["unshare", "-Ur", "sh", "-c", script, "sh", *vaultsync("--db", str(db), "watch", str(root), "--json")])
    try:
        watch.wait_log("falling back to polling", timeout=600)
        ready = watch.wait_log("watching ", timeout=1200)
    except SystemExit as exc:
        watch.proc.kill()
        return {"skipped": str(exc).splitlines()[0]}
    warning = next(line for line in watch.log if "falling back to polling" in line)
    time.sleep(5)
    cpu0 = cpu_s(watch.proc.pid)
    time.sleep(10)
    out = {"limit": limit, "warning": warning.split("WARNING", 1)[-1].strip(" :"), "startup_s": round(ready, 2),
           "idle_rss_mb": round(status_kb(watch.proc.pid, "VmRSS") / 1024, 1),
           "idle_cpu_pct": round((cpu_s(watch.proc.pid) - cpu0) / 10 * 100, 1)}
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
    print(f"== {k}x: building the vault", flush=True)
    root = build_vault(hub, k)
    folders, count, size = folders_and_notes(root)
    for old in WORK.glob(f"scale-{k}x.db*"):
        old.unlink()
    print(f"== {k}x: import of {count} notes", flush=True)
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
    info = {"notes": count, "markdown_mb": round(size / MB, 1), "folders": folders, "past": summary["known_at"],
            "import_wall_s": round(first["wall_s"], 1),
            "database_mb": round(sum(p.stat().st_size for p in WORK.glob(f"scale-{k}x.db*")) / MB, 1)}
    meta.write_text(json.dumps(info, indent=1) + "\n")
    shutil.rmtree(root, ignore_errors=True)
    return db, root.name, info


def measure_search_only(hub: Path, k: int, queries: list[str], burst: int) -> dict[str, Any]:
    db, name, info = build_history(hub, k, burst)
    print(f"== {k}x: search", flush=True)
    r = {"scale": k, **info, "search": measure_search(db, name, queries, info["past"])}
    print(json.dumps(r, indent=1), flush=True)
    return r


def search_report(results: list[dict[str, Any]], argv: str, info: dict[str, Any]) -> str:
    cols = [f"{r['scale']}x" for r in results]
    lines = [f"# Scale, search only: the Obsidian Hub ×{', ×'.join(str(r['scale']) for r in results)}", "",
             f"`{argv}` — {info['started']}, vaultsync {info['commit']} ({info['code']}), Python {info['python']}, "
             f"{info['cpus']} CPUs (load average at start {info['load_start']}, at end {info['load_end']}; "
             "the machine is shared).", "",
             "| figure | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    lines.append("| notes / chunks | " + " | ".join(f"{r['notes']} / {r['search']['chunks']}" for r in results) + " |")
    for mode in ("keyword", "hybrid"):
        for when in ("now", "past"):
            key = f"{mode}_{when}"
            label = f"search {mode if mode == 'keyword' else 'default (hybrid)'} {when} p50 / p95"
            lines.append(f"| {label} | " + " | ".join(
                f"{r['search'][key]['p50_ms']} / {r['search'][key]['p95_ms']} ms" for r in results) + " |")
            lines.append("| … CPU time of the search p50 / p95 | " + " | ".join(
                f"{r['search'][key + '_cpu']['p50_ms']} / {r['search'][key + '_cpu']['p95_ms']} ms"
                if key + "_cpu" in r["search"] else "–" for r in results) + " |")
    return "\n".join(lines) + "\n"


def measure_scale(hub: Path, k: int, queries: list[str], burst: int) -> dict[str, Any]:
    print(f"== {k}x: building the vault", flush=True)
    root = build_vault(hub, k)
    folders, count, size = folders_and_notes(root)
    db = WORK / f"scale-{k}x.db"
    for old in WORK.glob(f"scale-{k}x.db*"):
        old.unlink()
    r: dict[str, Any] = {"scale": k, "notes": count, "markdown_mb": round(size / MB, 1), "folders": folders}
    print(f"== {k}x: import of {count} notes", flush=True)
    first = run_measured(vaultsync("--db", str(db), "import", str(root), "--json"))
    summary = json.loads(first["stdout"])
    r["import"] = {"wall_s": round(first["wall_s"], 1), "added": summary["added"],
                   "ms_per_note": round(first["wall_s"] * 1000 / count, 3),
                   "largest_process_peak_mb": round(first["largest_peak_mb"], 1),
                   "all_processes_peak_mb": round(first["tree_peak_mb"], 1),
                   "errors": len(summary["errors"])}
    r["database_mb"] = round(sum(p.stat().st_size for p in WORK.glob(f"scale-{k}x.db*")) / MB, 1)
    again = run_measured(vaultsync("--db", str(db), "import", str(root), "--json"))
    with Vault.open(db, root=root) as vault:  # the same, in-process: the sync alone, without Python start-up
        start = time.perf_counter()
        unchanged = vault.sync().unchanged
        sync_s = time.perf_counter() - start
    r["reimport"] = {"wall_s": round(again["wall_s"], 2), "sync_s": round(sync_s, 2), "unchanged": unchanged,
                     "peak_mb": round(again["largest_peak_mb"], 1)}
    print(f"== {k}x: watch", flush=True)
    notes = sorted(p for p in root.rglob("*.md") if not any(part.startswith(".") for part in p.relative_to(root).parts))
    r["watch"] = measure_watch(db, root, notes, burst)
    print(f"== {k}x: polling fallback", flush=True)
    r["polling"] = measure_polling(db, root, folders)
    print(f"== {k}x: search", flush=True)
    r["search"] = measure_search(db, root.name, queries, summary["known_at"])
    print(json.dumps(r, indent=1), flush=True)
    return r


def report(results: list[dict[str, Any]], argv: str, info: dict[str, Any]) -> str:
    base = next((r for r in results if r["scale"] == 1), results[0])
    cols = [f"{r['scale']}x" for r in results]
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, fn: Any) -> None:
        cells = []
        for r in results:
            try:
                cells.append(str(fn(r)))
            except (KeyError, TypeError):
                cells.append("–")
        rows.append((label, cells))

    row("notes / Markdown MB / folders", lambda r: f"{r['notes']} / {r['markdown_mb']} / {r['folders']}")
    row("chunks", lambda r: r["search"]["chunks"])
    row("import wall time", lambda r: f"{r['import']['wall_s']} s")
    row("per-note cost (ratio to 1x)", lambda r: f"{r['import']['ms_per_note']} ms "
        f"({r['import']['ms_per_note'] / base['import']['ms_per_note']:.2f}x)")
    row("import peak RSS: largest process / all", lambda r: f"{r['import']['largest_process_peak_mb']} / "
        f"{r['import']['all_processes_peak_mb']} MB")
    row("database size", lambda r: f"{r['database_mb']} MB")
    row("no-change re-import: CLI / in-process sync / peak RSS", lambda r: f"{r['reimport']['wall_s']} s / "
        f"{r['reimport']['sync_s']} s / {r['reimport']['peak_mb']} MB")
    row("watcher start-up", lambda r: f"{r['watch']['startup_s']} s")
    row("watcher idle RSS / idle CPU", lambda r: f"{r['watch']['idle_rss_mb']} MB / {r['watch']['idle_cpu_pct']} %")
    row("one edit → readable p50 / p95", lambda r: f"{r['watch']['edit_readable']['p50_ms']} / "
        f"{r['watch']['edit_readable']['p95_ms']} ms")
    row("burst: notes → batches (largest), landed after", lambda r: f"{r['watch']['burst']['notes']} → "
        f"{r['watch']['burst']['batches']} ({r['watch']['burst']['largest_batch']}), {r['watch']['burst']['landed_s']} s")
    row("watcher peak RSS (after the burst)", lambda r: f"{r['watch']['peak_rss_mb']} MB")
    row("polling fallback: start-up / idle RSS / idle CPU", lambda r: f"{r['polling']['startup_s']} s / "
        f"{r['polling']['idle_rss_mb']} MB / {r['polling']['idle_cpu_pct']} %")
    for mode in ("keyword", "hybrid"):
        for when in ("now", "past"):
            row(f"search {mode if mode == 'keyword' else 'default (hybrid)'} {when} p50 / p95",
                lambda r, key=f"{mode}_{when}": f"{r['search'][key]['p50_ms']} / {r['search'][key]['p95_ms']} ms")
    lines = [f"# Scale: the Obsidian Hub ×{', ×'.join(str(r['scale']) for r in results)}", "",
             f"`{argv}` — {info['started']}, vaultsync {info['commit']}, Python {info['python']}, "
             f"{info['cpus']} CPUs (load average at start {info['load_start']}, at end {info['load_end']}; "
             "the machine is shared).", "",
             "| figure | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    warnings = {r["polling"].get("warning") for r in results if r["polling"].get("warning")}
    if warnings:
        lines += ["", "Polling fallback warning (inotify limit set to half the folder count): "
                  + "; ".join(f"`{w}`" for w in sorted(warnings))]
    ten = next((r for r in results if r["scale"] == 10), None)
    if ten is not None:
        checks = [
            ("per-note import cost within 1.3x of 1x", ten["import"]["ms_per_note"] / base["import"]["ms_per_note"] <= 1.3),
            ("import peak RSS < 400 MB (largest process)", ten["import"]["largest_process_peak_mb"] < 400),
            ("no-change re-import < 3 s (CLI)", ten["reimport"]["wall_s"] < 3),
            ("watcher idle RSS < 300 MB", ten["watch"]["idle_rss_mb"] < 300),
            ("default search p50 < 100 ms (now)", ten["search"]["hybrid_now"]["p50_ms"] < 100),
        ]
        lines += ["", "Targets at 10x: " + "; ".join(f"{name}: {'met' if ok else '**not met**'}" for name, ok in checks)]
    return "\n".join(lines) + "\n"


def main() -> None:
    global WORK, REUSE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10, 20])
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--search-only", action="store_true", help="import and search only (no watcher, no polling)")
    parser.add_argument("--work", type=Path, default=None, help="where vaults and databases are made")
    parser.add_argument("--reuse", action="store_true", help="with --search-only: search the databases already in --work")
    parser.add_argument("--name", default=None, help="results file name (default scale, or scale_search)")
    args = parser.parse_args()
    WORK, REUSE = (args.work or WORK).resolve(), args.reuse
    WORK.mkdir(parents=True, exist_ok=True)
    hub = clone("obsidian-hub.bundle", WORK / "hub")
    lines = (CORPORA / "retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()
    queries = [json.loads(line)["query"] for line in lines[:: max(1, len(lines) // args.queries)]][: args.queries]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    info = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit,
            "load_start": [round(x, 2) for x in os.getloadavg()], **machine(),
            "code": str(Path(sys.modules["vaultsync.vault"].__file__).parents[1])}
    measure = measure_search_only if args.search_only else measure_scale
    results = []
    for k in args.scales:
        try:
            results.append(measure(hub, k, queries, args.burst))
        except (SystemExit, Exception) as exc:  # noqa: BLE001 - report what finished, and why the rest did not
            print(f"{k}x did not finish: {exc}", file=sys.stderr)
            info.setdefault("failed", {})[f"{k}x"] = str(exc)[-2000:]
            break
        finally:
            if not args.search_only:
                shutil.rmtree(WORK / f"vault-{k}x", ignore_errors=True)
    info["load_end"] = [round(x, 2) for x in os.getloadavg()]
    argv = "python benchmarks/bench_scale.py " + " ".join(sys.argv[1:])
    render = search_report if args.search_only else report
    markdown = render(results, argv.strip(), info) if results else "no scale finished\n"
    if info.get("failed"):
        markdown += "\nDid not finish: " + "; ".join(f"{k}: {v.splitlines()[0]}" for k, v in info["failed"].items()) + "\n"
    if args.no_save:
        print(markdown)
    else:
        save(args.name or ("scale_search" if args.search_only else "scale"), {"argv": argv, **info, "results": results}, markdown)


if __name__ == "__main__":
    main()

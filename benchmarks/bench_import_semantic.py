"""A full import of the Hub at its newest commit with the semantic extra (``--embedder minilm``).

    .venv/bin/python benchmarks/bench_import_semantic.py [--work DIR] [--db FILE] [--no-save]

The Hub bundle (../shared/corpora/obsidian-hub.bundle, read at run time) is cloned to ``DIR/hub``;
``vaultsync import DIR/hub --embedder minilm --known-at 2026-06-01`` runs into an empty database
(default ``DIR/hub-head-minilm.db``, the file ``bench_quality.py --work DIR --embedder minilm``
reuses). Measured: wall time; user and system CPU time of the command and every process it waited
for (its parse workers; ``os.wait4``); peak memory as the largest sum of the RSS of the command's
whole process tree, sampled from /proc every 0.5 s; the 1-minute load average every 30 s (the machine
is shared: CPU time is the fairer figure). Results go to benchmarks/results/import_semantic.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import clone, machine, save


def tree_rss_mb(root: int) -> float:
    """Sum of VmRSS over ``root`` and its descendants (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= more
        grew = bool(more)
    total = 0
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "vs-quality")
    parser.add_argument("--db", type=Path)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    root = clone("obsidian-hub.bundle", args.work / "hub")
    db = args.db or args.work / "hub-head-minilm.db"
    if db.exists():
        sys.exit(f"{db} exists: the import is measured into an empty database")
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    exe = Path(sys.executable).with_name("vaultsync")
    command = [str(exe), "--db", str(db), "import", str(root), "--embedder", "minilm", "--known-at", "2026-06-01",
               "--json"]
    loads: list[tuple[float, float]] = []
    peak = [0.0]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()

    def sample() -> None:
        last_load = -30.0
        while not stop.is_set():
            peak[0] = max(peak[0], tree_rss_mb(proc.pid))
            now = time.perf_counter() - started
            if now - last_load >= 30:
                loads.append((round(now), os.getloadavg()[0]))
                print(f"{now:7.0f} s  load {os.getloadavg()[0]:.2f}  tree RSS peak {peak[0]:.0f} MB", flush=True)
                last_load = now
            stop.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()  # wait4-equivalent rusage below comes from the reaped child
    wall = time.perf_counter() - started
    stop.set()
    sampler.join()
    usage = os.times()  # children's user/sys: the command and the workers it reaped
    if proc.returncode != 0:
        sys.exit(f"import failed ({proc.returncode}): {err[-2000:]}")
    summary = json.loads(out) if out.strip().startswith("{") else {"stdout": out[-500:]}
    wal = Path(str(db) + "-wal")
    payload = {
        "machine": machine(), "hub_commit": head, "command": " ".join(command),
        "wall_s": round(wall, 1), "user_s": round(usage.children_user, 1), "sys_s": round(usage.children_system, 1),
        "peak_tree_rss_mb": round(peak[0]), "load_avg_1m": loads,
        "load_avg_mean": round(sum(v for _, v in loads) / max(len(loads), 1), 2),
        "database_bytes": db.stat().st_size + (wal.stat().st_size if wal.exists() else 0), "summary": summary,
    }
    cpu = payload["user_s"] + payload["sys_s"]
    markdown = (
        "# Hub import at its newest commit with the semantic extra\n\n"
        f"`.venv/bin/python benchmarks/bench_import_semantic.py` ({payload['machine']['cpus']} CPUs, shared), "
        f"Hub commit {head[:12]}: `vaultsync import hub --embedder minilm`.\n\n"
        "| what | figure |\n|---|---:|\n"
        f"| wall time | {wall / 60:.1f} min ({wall:.0f} s) |\n"
        f"| CPU time, user + sys, all processes | {cpu / 60:.1f} min ({payload['user_s']:.0f} + {payload['sys_s']:.0f} s) |\n"
        f"| peak memory, RSS summed over the process tree | {payload['peak_tree_rss_mb']} MB |\n"
        f"| load average (1 min) during the run | mean {payload['load_avg_mean']}, "
        f"{min(v for _, v in loads):.1f}–{max(v for _, v in loads):.1f} |\n"
        f"| database | {payload['database_bytes'] / 1e6:.1f} MB |\n\n"
        f"Import summary: `{json.dumps(summary)[:400]}`\n")
    if args.no_save:
        print(markdown)
    else:
        save("import_semantic", payload, markdown)


if __name__ == "__main__":
    main()

"""A full import with the semantic extra (``--embedder minilm``): the Hub at its newest commit (quick: the sample
vault) into an empty database. Measured: wall time until the batch is recorded (the command prints its summary
then: the vault is searchable by its words) and until the command exits (its semantic vectors complete: the import
fills them after the batch); CPU time of the command and every process it waited for (its parse workers); peak
memory as the largest sum of the RSS of the command's whole process tree, sampled from /proc every 0.5 s; the
database's size. Linux only (/proc)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.harness import Figures
from benchmarks.inputs import Unavailable, db_bytes, vault_for, workdir


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


def run(quick: bool) -> Figures:
    if importlib.util.find_spec("onnxruntime") is None:
        raise Unavailable("the semantic extra is not installed (pip install -e '.[semantic]')")
    if not Path("/proc/self/stat").exists():
        raise Unavailable("the import_semantic benchmark reads /proc (Linux only)")
    with workdir("import-semantic") as work:
        root, db = vault_for(quick, work), work / "minilm.db"
        command = [
            sys.executable,
            "-m",
            "vaultsync",
            "--db",
            str(db),
            "import",
            str(root),
            "--embedder",
            "minilm",
            "--known-at",
            "2026-06-01",
            "--json",
        ]
        peak = [0.0]
        before = os.times()
        started = time.perf_counter()
        errors = (work / "stderr.txt").open("w+", encoding="utf-8")  # a file: a full pipe never blocks the command
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], tree_rss_mb(proc.pid))
                stop.wait(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        assert proc.stdout is not None
        out = proc.stdout.readline()  # the summary, printed once the batch is recorded
        recorded = time.perf_counter() - started
        rest, _ = proc.communicate()
        out += rest
        errors.seek(0)
        err = errors.read()
        errors.close()
        wall = time.perf_counter() - started
        stop.set()
        sampler.join()
        after = os.times()  # children's user/sys: the command and the workers it reaped
        if proc.returncode != 0:
            raise SystemExit(f"import failed ({proc.returncode}): {err[-2000:]}")
        summary = json.loads(out)
        return {
            "notes": summary.get("added"),
            "recorded_s": round(recorded, 2),
            "wall_s": round(wall, 2),
            "vectors_s": round(wall - recorded, 2),
            "cpu_s": round(
                after.children_user + after.children_system - before.children_user - before.children_system, 2
            ),
            "peak_tree_rss_mb": round(peak[0]),
            "database_mb": round(db_bytes(db) / 1e6, 2),
        }

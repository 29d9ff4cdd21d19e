"""What an idle reader server costs (issue 14, item 4): CPU over a minute, memory, inotify watches.

    .venv/bin/python benchmarks/bench_reader_idle.py [--seconds 60] [--readers 3] [--vault FOLDER] [--no-save]

Imports a copy of FOLDER (default: the repo's sample ``notes/``) into a fresh database, then starts
one ``vaultsync watch`` (the watcher), READERS ``vaultsync serve --watch`` (readers in standby) and
one plain ``vaultsync serve`` (the read-only baseline), each answering one ``vault_status`` over
stdio as a host would. Then nothing happens for SECONDS, and for each process it reads from /proc:
CPU time used in that window (user + system), resident memory (VmRSS) and the number of inotify
watches it holds. Results go to benchmarks/results/reader_idle.md. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, machine, save

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def inotify_watches(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            count += Path(f"/proc/{pid}/fdinfo/{fd}").read_text().count("inotify wd:")
        except OSError:
            pass
    return count


def vaultsync(db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "vaultsync", "--db", str(db), *args]


def start_server(db: Path, root: Path, *flags: str) -> subprocess.Popen[bytes]:
    """``serve`` over stdio, after one initialize and one vault_status (so everything a host uses is loaded)."""
    proc = subprocess.Popen(vaultsync(db, "serve", str(root), *flags), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "vault_status", "arguments": {}}},
    ):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        if "id" in message:
            reply = json.loads(proc.stdout.readline())
            assert "result" in reply, reply
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--vault", type=Path, default=REPO / "notes")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-reader-idle-") as tmp:
        root, db = Path(tmp) / "vault", Path(tmp) / "db" / "vaultsync.db"
        shutil.copytree(args.vault, root, symlinks=True)
        subprocess.run(vaultsync(db, "import", str(root)), check=True, capture_output=True)
        notes = sum(1 for _ in root.rglob("*.md"))
        watcher = subprocess.Popen(vaultsync(db, "watch", str(root)), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        assert watcher.stderr is not None
        while "watching " not in watcher.stderr.readline():
            pass
        procs: list[tuple[str, subprocess.Popen[Any]]] = [("vaultsync watch (the watcher)", watcher)]
        procs += [(f"serve --watch (reader {i + 1})", start_server(db, root, "--watch")) for i in range(args.readers)]
        procs.append(("serve (read-only baseline)", start_server(db, root)))
        try:
            time.sleep(2.0)  # let start-up work settle before the window
            before = {p.pid: cpu_seconds(p.pid) for _, p in procs}
            start = time.monotonic()
            time.sleep(args.seconds)
            window = time.monotonic() - start
            rows = [{"process": name, "cpu_s": round(cpu_seconds(p.pid) - before[p.pid], 3),
                     "cpu_pct": round((cpu_seconds(p.pid) - before[p.pid]) / window * 100, 3),
                     "rss_mb": round(rss_mb(p.pid), 1), "inotify_watches": inotify_watches(p.pid),
                     "threads": threads(p.pid)} for name, p in procs]
        finally:
            for _, p in procs:
                p.terminate()
            for _, p in procs:
                p.wait(timeout=60)

    lines = [f"# Idle cost of reader servers ({window:.0f} s window, {notes} notes)", "",
             f"`{' '.join(['.venv/bin/python', *sys.argv])}` on {machine()['platform']}, "
             f"{machine()['cpus']} CPUs, Python {machine()['python']}", "",
             "| process | CPU s in window | CPU % of a core | RSS MB | inotify watches | threads |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['process']} | {r['cpu_s']} | {r['cpu_pct']} | {r['rss_mb']} | {r['inotify_watches']} "
              f"| {r['threads']} |" for r in rows]
    payload = {"seconds": window, "notes": notes, "rows": rows, "machine": machine()}
    if args.no_save:
        print("\n".join(lines))
    else:
        save("reader_idle", payload, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

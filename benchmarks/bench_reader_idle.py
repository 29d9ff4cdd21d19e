"""What idle reader servers cost: CPU over a minute, memory, inotify watches.

Imports a copy of the sample vault (``notes/``) into a fresh database, then starts
one ``vaultsync watch`` (the watcher), 3 ``vaultsync serve --watch`` (readers in standby; 1 when quick) and
one plain ``vaultsync serve`` (the read-only baseline), each answering one ``vault_status`` over
stdio as a host would. Then nothing happens for 60 s (1 s when quick), and for each process it reads from /proc:
CPU time used in that window (user + system), resident memory (VmRSS) and the number of inotify
watches it holds. Linux only (/proc).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import Figures
from benchmarks.inputs import SAMPLE, Unavailable, workdir
from benchmarks.inputs import vaultsync as command

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
    return command("--db", str(db), *args)


def start_server(db: Path, root: Path, *flags: str) -> subprocess.Popen[bytes]:
    """``serve`` over stdio, after one initialize and one vault_status (so everything a host uses is loaded)."""
    proc = subprocess.Popen(
        vaultsync(db, "serve", str(root), *flags),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    for message in (
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "vault_status", "arguments": {}}},
    ):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        if "id" in message:
            reply = json.loads(proc.stdout.readline())
            assert "result" in reply, reply
    return proc


def run(quick: bool) -> Figures:
    if not Path("/proc/self/fdinfo").exists():
        raise Unavailable("the reader_idle benchmark reads /proc (Linux only)")
    seconds, readers = (1.0, 1) if quick else (60.0, 3)
    with workdir("reader-idle") as work:
        root, db = work / "vault", work / "db" / "vaultsync.db"
        shutil.copytree(SAMPLE, root, symlinks=True)
        subprocess.run(vaultsync(db, "import", str(root)), check=True, capture_output=True)
        notes = sum(1 for _ in root.rglob("*.md"))
        watcher = subprocess.Popen(
            vaultsync(db, "watch", str(root)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        assert watcher.stderr is not None
        while "watching " not in watcher.stderr.readline():
            if watcher.poll() is not None:
                raise SystemExit("vaultsync watch did not start")
        procs: list[tuple[str, subprocess.Popen[Any]]] = [("watcher", watcher)]
        procs += [(f"reader{i + 1}", start_server(db, root, "--watch")) for i in range(readers)]
        procs.append(("baseline", start_server(db, root)))
        try:
            time.sleep(0.5 if quick else 2.0)  # let start-up work settle before the window
            before = {p.pid: cpu_seconds(p.pid) for _, p in procs}
            start = time.monotonic()
            time.sleep(seconds)
            window = time.monotonic() - start
            figures: Figures = {"seconds": round(window, 1), "notes": notes}
            for name, p in procs:
                used = cpu_seconds(p.pid) - before[p.pid]
                figures.update(
                    {
                        f"{name}_cpu_s": round(used, 3),
                        f"{name}_cpu_pct": round(used / window * 100, 3),
                        f"{name}_rss_mb": round(rss_mb(p.pid), 1),
                        f"{name}_inotify_watches": inotify_watches(p.pid),
                        f"{name}_threads": threads(p.pid),
                    }
                )
        finally:
            for _, p in procs:
                p.terminate()
            for _, p in procs:
                p.wait(timeout=60)
    return figures

"""``import --from-git`` of the Hub's history (or its first N commits), old code against new, back to back.

Usage: ``.venv/bin/python benchmarks/bench_import_history.py --old /tmp/old-checkout [--commits 200]
[--rounds 1] [--work /tmp/vaultsync-bench-import-history] [--name import_history]``

The Hub bundle (../shared/corpora/obsidian-hub.bundle, read at run time, never copied) is cloned once and
its branch put at its N-th first-parent commit (0: the whole history, 592 commits), as
``bench_postgres.sliced`` does. Each round imports it into a fresh database with the old checkout's own
``.venv/bin/vaultsync`` and then with this checkout's, one right after the other (the CLI as a user runs
it: its parse workers included). For each: wall time, CPU time of the whole process tree (the command and
every process it waited for, its parse workers included: ``os.wait4``), the load average before and
after, the database size and what it holds. Results: benchmarks/results/NAME.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from common import REPO, clone, machine, save

MB = 2**20


def sliced(root: Path, commits: int) -> str:
    """Put the clone's branch at its ``commits``-th first-parent commit (0: the newest); return that commit."""
    shas = subprocess.run(["git", "-C", str(root), "rev-list", "--first-parent", "--reverse", "origin/HEAD"],
                          check=True, capture_output=True, text=True).stdout.split()
    target = shas[min(commits, len(shas)) - 1] if commits else shas[-1]
    subprocess.run(["git", "-C", str(root), "checkout", "-q", "-B", "bench", target], check=True)
    return target


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run(code: Path, db: Path, root: Path) -> dict:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    before = load()
    started = time.perf_counter()
    proc = subprocess.Popen([str(code / ".venv" / "bin" / "vaultsync"), "--db", str(db), "import", str(root),
                             "--from-git", "--json"], cwd=code, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"import failed with {code}: exit {proc.returncode}")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        batches, notes = (con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("batches", "notes"))
    finally:
        con.close()
    size = sum(Path(f"{db}{s}").stat().st_size for s in ("", "-wal") if Path(f"{db}{s}").exists())
    return {"wall_s": round(wall, 1), "cpu_user_s": round(usage.ru_utime, 1), "cpu_sys_s": round(usage.ru_stime, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "load_before": before, "load_after": load(),
            "batches": batches, "revisions": notes, "db_bytes": size}


def git_head(path: Path) -> str:
    return subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="a checkout of the old code with its own .venv")
    parser.add_argument("--commits", type=int, default=0, help="the first N first-parent commits (0: all)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--work", type=Path, default=Path("/tmp/vaultsync-bench-import-history"))
    parser.add_argument("--name", default="import_history", help="results file name (benchmarks/results/NAME.*)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    root = clone("obsidian-hub.bundle", args.work / "hub")
    commit = sliced(root, args.commits)
    codes = {"old": args.old.resolve(), "new": REPO}
    payload = {"argv": "python benchmarks/bench_import_history.py " + " ".join(sys.argv[1:]),
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **machine(), "commits": args.commits,
               "hub_commit": commit[:8], "old_commit": git_head(args.old), "new_commit": git_head(REPO), "runs": []}
    for round_ in range(1, args.rounds + 1):
        for name, code in codes.items():
            result = {"round": round_, "code": name, **run(code, args.work / f"{name}.db", root)}
            payload["runs"].append(result)
            print(result, flush=True)
    lines = [f"`{payload['argv']}` ({payload['date']}, {payload['cpus']} CPUs shared with other sessions). "
             f"Old: {payload['old_commit']}; new: {payload['new_commit']}. Hub history: "
             f"{'all' if not args.commits else f'the first {args.commits}'} first-parent commits (to {commit[:8]}).", "",
             "| round | code | wall s | CPU s (user + sys, process tree) | load before → after | batches | revisions | DB MB |",
             "|---|---|---:|---:|---|---:|---:|---:|"]
    for r in payload["runs"]:
        lines.append(f"| {r['round']} | {r['code']} | {r['wall_s']} | {r['cpu_s']} ({r['cpu_user_s']} + {r['cpu_sys_s']}) | "
                     f"{'/'.join(map(str, r['load_before']))} → {'/'.join(map(str, r['load_after']))} | {r['batches']} | "
                     f"{r['revisions']} | {r['db_bytes'] / MB:.1f} |")
    save(args.name, payload, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

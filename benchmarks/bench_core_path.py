"""The library's core path (the revision tables alone, no search index) on the Hub at its newest commit,
several checkouts back to back: issue 22's "dictionary regression" figure.

    .venv/bin/python benchmarks/bench_core_path.py --code NAME=CHECKOUT [--code ...] [--rounds 3] [--work DIR]

Each ``--code`` is a checkout of vaultsync (``git worktree add DIR REV``); ``.`` is this one. Every round runs
each checkout once, in a fresh child process with that checkout first on ``sys.path`` and this venv: it scans
the Hub clone (../shared/corpora/obsidian-hub.bundle, read at run time, never copied), parses every note in
line and writes them as one batch into an empty database through the store alone, as ``bench_import``'s
"import without search indexing" does. Checkouts from before the store boundary (c7765b8) have no ``Plan``;
they are driven through their ``sync.apply``. Figures: wall seconds and the child's CPU seconds (rusage),
with the load average; compare CPU, within a round. Results: benchmarks/results/core_path.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import clone, machine, save

CORE = """
import json, sys, time
from pathlib import Path
root, db = Path(sys.argv[1]), sys.argv[2]
started = time.perf_counter()
try:
    from vaultsync.disk.folder import scan
    from vaultsync.store import Store
    from vaultsync.sync import Plan, write_plan
except ImportError:  # before the store boundary: sync.apply on a Store without indexers
    from vaultsync.store import Store
    from vaultsync.sync import apply, scan
    store = Store(db)
    vault_id = store.ensure_vault(root.name, root)
    found, errors = scan(root)
    summary = apply(store, vault_id, root.name, found, live={}, full=True, errors=errors)
else:
    store = Store(db, search=False)
    vault_id = store.ensure_vault(root.name, root)
    found, errors = scan(root)
    plan = Plan(found, store.live_state(vault_id), store.file_states(vault_id), full=True, errors=errors)
    summary = write_plan(store, vault_id, root.name, plan)
store.close()
print(json.dumps({"seconds": time.perf_counter() - started, "added": summary.added}))
"""


def run(checkout: Path, clone_dir: Path, db: Path) -> dict[str, float]:
    for old in db.parent.glob(db.name + "*"):
        old.unlink()
    env = dict(os.environ, PYTHONPATH=str(checkout))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", CORE, str(clone_dir), str(db)], stdout=out, stderr=err,
                                cwd=checkout, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{checkout}: failed:\n{err.read().decode()[-3000:]}")
        result = json.loads(out.read().decode())
    size = sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if not p.name.endswith(".lock"))
    return {"wall": round(wall, 2), "cpu": round(usage.ru_utime + usage.ru_stime, 2), "added": result["added"],
            "db_mb": round(size / 1e6, 1), "load": round(os.getloadavg()[0], 2)}


def commit_of(checkout: Path) -> str:
    return subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", action="append", required=True, metavar="NAME=CHECKOUT")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "vaultsync-core-path")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    codes = [(name, Path(path).resolve()) for name, _, path in (c.partition("=") for c in args.code)]
    args.work.mkdir(parents=True, exist_ok=True)
    hub = clone("obsidian-hub.bundle", args.work / "obsidian-hub")
    rounds: list[dict[str, dict[str, float]]] = []
    for number in range(1, args.rounds + 1):
        row = {}
        for name, checkout in codes:
            row[name] = run(checkout, hub, args.work / f"{name}.db")
            print(f"round {number} {name}: {row[name]}", file=sys.stderr)
        rounds.append(row)
    header = "| round | " + " | ".join(f"{name} wall / CPU s (load)" for name, _ in codes) + " |"
    lines = [header, "|---|" + "---:|" * len(codes)]
    for number, row in enumerate(rounds, 1):
        lines.append(f"| {number} | " + " | ".join(
            f"{row[n]['wall']} / {row[n]['cpu']} ({row[n]['load']})" for n, _ in codes) + " |")
    means = {n: round(sum(r[n]["cpu"] for r in rounds) / len(rounds), 2) for n, _ in codes}
    lines.append("| mean CPU | " + " | ".join(str(means[n]) for n, _ in codes) + " |")
    sizes = {n: rounds[-1][n]["db_mb"] for n, _ in codes}
    lines.append("| database MB | " + " | ".join(str(sizes[n]) for n, _ in codes) + " |")
    info = dict(machine(), date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                load_average=[round(x, 2) for x in os.getloadavg()])
    command = "python benchmarks/bench_core_path.py " + " ".join(f"--code {c}" for c in args.code) + \
        f" --rounds {args.rounds}"
    checkouts = ", ".join(f"{n} = {commit_of(c)} ({c})" for n, c in codes)
    markdown = (f"# The core path (store alone, no search index), Hub at its newest commit\n\n`{command}` — "
                f"{info['date']}, {info['cpus']} CPUs, load average at the end {info['load_average']}.\n"
                f"Checkouts: {checkouts}. {rounds[0][codes[0][0]]['added']} notes.\n\n" + "\n".join(lines) + "\n")
    if args.no_save:
        print(markdown)
    else:
        save("core_path", {"machine": info, "codes": {n: str(c) for n, c in codes}, "rounds": rounds,
                           "mean_cpu": means}, markdown)


if __name__ == "__main__":
    main()

"""The test suite's Help replay fixture, built outside pytest and timed: CPU of this process (the imports run
in it, as in the fixture) and of its children (the replay tool, git), wall time, load average.

    .venv/bin/python benchmarks/bench_import_replay.py [--every 16] [--work DIR] [--profile FILE] [--backfill]

Builds exactly what ``tests/conftest.py``'s ``help_replayed`` builds (its own ``replay`` and folder rule are
imported from the checkout's conftest: every ``REPLAY_EVERY``-th commit of the Help bundle, read at run time,
imported in this process with ``vaultsync import --known-at``). Run from two checkouts (each with its own
venv) to compare old and new code. ``--backfill`` builds ``help_backfilled`` instead (a clone of the bundle,
its ``HELP_GIT_VAULTS`` folders each imported with ``import --from-git`` in this process). ``--profile`` writes a cProfile of the imports (pstats format, CPU time of this process).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import conftest  # noqa: E402  (the fixture's own helpers)


def cpu() -> tuple[float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=int, default=conftest.REPLAY_EVERY)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--backfill", action="store_true", help="build the --from-git backfill fixture instead")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="vs-bench-replay-"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    env = {**os.environ, "VAULTSYNC_HOME": str(work / "home"), "REPLAY_HISTORY_CACHE": str(work / "cache")}
    env.pop("VAULTSYNC_DB", None)
    corpus = conftest.HelpCorpus(work, env)
    db, vault = work / "replay.db", work / "help"
    in_import = [0.0, 0.0]  # CPU and wall seconds inside the imports
    profile = cProfile.Profile(time.process_time) if args.profile else None
    states = []

    def import_state(commit_time: str) -> None:
        for top in vault.iterdir():
            if top.is_dir() and not conftest.replayed_folder(top.name):
                shutil.rmtree(top)
        c0, w0 = time.process_time(), time.perf_counter()
        if profile:
            profile.enable()
        done = conftest.invoke("import", str(vault), "--known-at", commit_time, "--json", db=db,
                               env={"VAULTSYNC_HOME": str(work / "home")})
        if profile:
            profile.disable()
        in_import[0] += time.process_time() - c0
        in_import[1] += time.perf_counter() - w0
        assert done.returncode == 0, done.stderr
        states.append(json.loads(done.stdout))

    load = [round(x, 2) for x in os.getloadavg()]
    own0, kids0 = cpu()
    started = time.perf_counter()
    if args.backfill:
        backfill(work, in_import, states)
    else:
        conftest.replay(corpus, vault, ["--every", str(args.every)], import_state)
    wall = time.perf_counter() - started
    own1, kids1 = cpu()
    if profile:
        profile.dump_stats(str(args.profile))
    revisions = sum(s.get("added", 0) + s.get("modified", 0) + s.get("renamed", 0) for s in states)
    print(json.dumps({"states": len(states), "revisions": revisions, "wall": round(wall, 2),
                      "cpu_self": round(own1 - own0, 2), "cpu_children": round(kids1 - kids0, 2),
                      "import_cpu": round(in_import[0], 2), "import_wall": round(in_import[1], 2),
                      "db_bytes": sum(p.stat().st_size for p in work.glob("replay.db*")),
                      "load_start": load, "load_end": [round(x, 2) for x in os.getloadavg()]}))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


def backfill(work: Path, in_import: list[float], states: list[dict]) -> None:
    """What ``help_backfilled`` builds: the bundle cloned, each of its git vaults imported with --from-git."""
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(conftest.HELP_BUNDLE), str(clone)], check=True)
    for name in conftest.HELP_GIT_VAULTS:
        c0, w0 = time.process_time(), time.perf_counter()
        done = conftest.invoke("import", str(clone / name), "--from-git", "--json", db=work / "replay.db",
                               env={"VAULTSYNC_HOME": str(work / "home")})
        in_import[0] += time.process_time() - c0
        in_import[1] += time.perf_counter() - w0
        assert done.returncode == 0, done.stderr
        states.append(json.loads(done.stdout))


if __name__ == "__main__":
    main()

"""Server time per view of ``vaultsync ui`` (tree, note, diff, search) at 10 moments of the Hub's history.

    .venv/bin/python benchmarks/bench_ui.py [--work /tmp/vs-bench-ui] [--corpus hub] [--notes 3] [--queries 3]

The Hub bundle (../shared/corpora, read at run time) is cloned and its whole first-parent history
imported, one batch per commit at its committer time. Then one ``Explorer`` (what the page's JSON
endpoints call, ``vaultsync/ui/views.py``) answers, at 10 moments spread over the history: the tree,
``--notes`` notes that existed then (the note view: text, safe HTML with links resolved then, its
revisions), the word diff of each against its previous revision, their backlinks, and ``--queries``
of the Hub's retrieval queries. Each time is the method call plus the JSON encoding of its answer:
the server's work for one request, without HTTP. Moments are visited once each, in a shuffled
order, so every tree is a first visit (its cutoff not cached); the listing of "now" (for the marks)
is cached after the first moment, as it is while a page is open.

Target: moving the timeline (the tree plus the open note at a new moment) <= 150 ms server time.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CORPORA, history_db, machine, save, summary_ms  # noqa: E402

from vaultsync.times import format_time, parse_time  # noqa: E402
from vaultsync.ui import Explorer  # noqa: E402
from vaultsync.vault import Vault  # noqa: E402


CPU: dict[str, list[float]] = {}
"""CPU milliseconds of this process per view, beside the wall times: on a machine shared with other work
the wall time counts waiting for a core, the CPU time does not."""


def timed(fn: Any, *args: Any, view: str = "", **kwargs: Any) -> tuple[float, Any]:
    """Milliseconds for the call and the JSON encoding of its answer (what the endpoint sends)."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    json.dumps(out, ensure_ascii=False)
    CPU.setdefault(view, []).append((time.process_time() - cpu) * 1000.0)
    return (time.perf_counter() - start) * 1000.0, out


def calibration_ms() -> float:
    """A fixed pure-Python loop (a million multiply-adds), to read the figures against the machine's speed
    at the time: about 50-70 ms on an idle core of a recent machine, several times that on a loaded one."""
    start = time.perf_counter()
    sum(i * i for i in range(1_000_000))
    return round((time.perf_counter() - start) * 1000.0, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vs-bench-ui"))
    parser.add_argument("--corpus", default="hub", choices=["hub", "help"])
    parser.add_argument("--notes", type=int, default=3, help="notes opened at each moment")
    parser.add_argument("--queries", type=int, default=3, help="searches at each moment")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    _, db, info = history_db(args.work, args.corpus)
    rng = random.Random(24)
    first, last = parse_time(info["first_batch"]), parse_time(info["last_batch"])
    moments = [first + (last - first) * (2 * k + 1) // 20 for k in range(10)]
    rng.shuffle(moments)
    rows = [json.loads(line) for line in (CORPORA / "retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = [r["query"] for r in rows]
    times: dict[str, list[float]] = {k: [] for k in ("timeline", "tree", "note", "move", "diff", "backlinks",
                                                     "search", "tree_again")}
    calibration = [calibration_ms()]
    with Vault.open(db, name=args.corpus, readonly=True) as vault:
        explorer = Explorer(vault)
        ms, _ = timed(explorer.timeline, view="timeline")
        times["timeline"].append(ms)
        for at in moments:
            tree_ms, tree = timed(explorer.tree, at, view="tree")
            times["tree"].append(tree_ms)
            paths = rng.sample([n["path"] for n in tree["notes"]], min(args.notes, len(tree["notes"])))
            for i, path in enumerate(paths):
                note_ms, note = timed(explorer.note, path, at, view="note")
                times["note"].append(note_ms)
                if i == 0:
                    times["move"].append(tree_ms + note_ms)
                    CPU.setdefault("move", []).append(CPU["tree"][-1] + CPU["note"][-1])
                revs = note["revisions"]
                k = next(j for j, r in enumerate(revs) if r["known_at"] == note["revision"]["known_at"]
                         and r["path"] == note["path"])
                a = revs[k - 1] if k > 0 else revs[k]
                ms, _ = timed(explorer.diff, a["path"], a["known_at"], note["path"], note["revision"]["known_at"],
                                view="diff")
                times["diff"].append(ms)
                ms, _ = timed(explorer.links, path, at, view="backlinks")
                times["backlinks"].append(ms)
            for query in rng.sample(queries, args.queries):
                ms, _ = timed(explorer.search, query, at, view="search")
                times["search"].append(ms)
            ms, _ = timed(explorer.tree, at, view="tree_again")
            times["tree_again"].append(ms)
    calibration.append(calibration_ms())
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"corpus": args.corpus, **info, "moments": [format_time(m) for m in sorted(moments)],
              "views": {k: summary_ms(v) for k, v in times.items()},
              "views_cpu": {k: summary_ms(v) for k, v in CPU.items()}, "target_move_ms": 150, "calibration_ms": calibration,
              "load_average": load, "commit": commit, "machine": machine()}
    lines = [f"# vaultsync ui: server time per view, {args.corpus} history", "",
             f"{info['batches']} batches, {info['notes']} notes now, {info['revisions']} revisions; 10 moments from "
             f"{result['moments'][0]} to {result['moments'][-1]}; {args.notes} notes and {args.queries} searches per "
             f"moment. Load average at the end: {' '.join(load)}; calibration loop (1M multiply-adds, about 60 ms on an "
             f"idle core) {calibration[0]} ms before, {calibration[1]} ms after. Commit {commit}.", "",
             "`.venv/bin/python benchmarks/bench_ui.py" + (f" --corpus {args.corpus}" if args.corpus != "hub" else "")
             + "`", "", "| view | n | wall p50 ms | wall p95 ms | CPU p50 ms | CPU p95 ms |", "|---|---:|---:|---:|---:|---:|"]
    labels = {"timeline": "timeline (every batch, once per page)", "tree": "tree at a new moment (first visit)",
              "note": "note (text, safe HTML, links resolved then, revisions)",
              "move": "**moving the timeline: tree + open note** (target <= 150)",
              "diff": "word diff against the previous revision", "backlinks": "backlinks at the moment",
              "search": "search (default mode) at the moment", "tree_again": "tree at a moment seen before (cached)"}
    for key, label in labels.items():
        s, c = result["views"][key], result["views_cpu"][key]
        lines.append(f"| {label} | {s['n']} | {s['p50_ms']} | {s['p95_ms']} | {c['p50_ms']} | {c['p95_ms']} |")
    save(f"ui_{args.corpus}", result, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

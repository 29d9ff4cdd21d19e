"""Server time per view of ``vaultsync ui`` (tree, note, diff, search) at 10 moments of the Hub's history.

The Hub bundle (../shared/corpora, read at run time) is cloned and its whole first-parent history
imported, one batch per commit at its committer time. Then one ``Explorer`` (what the page's JSON
endpoints call, ``vaultsync/ui/views.py``) answers, at 10 moments spread over the history: the tree,
3 notes that existed then (the note view: text, safe HTML with links resolved then, its
revisions), the word diff of each against its previous revision, their backlinks, and 3
of the Hub's retrieval queries. Each time is the method call plus the JSON encoding of its answer:
the server's work for one request, without HTTP. Moments are visited once each, in a shuffled
order, so every tree is a first visit (its cutoff not cached); the listing of "now" (for the marks)
is cached after the first moment, as it is while a page is open.

Quick: the sample vault with two batches, 2 moments, one note and one search each.

Target: moving the timeline (the tree plus the open note at a new moment) <= 150 ms server time.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from benchmarks.harness import Figures, p50_p95
from benchmarks.inputs import QUICK_QUERIES, bench_work, history_db, hub_queries, quick_history_db, workdir
from vaultsync.times import parse_time
from vaultsync.ui import Explorer
from vaultsync.vault import Vault

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


def run(quick: bool) -> Figures:
    CPU.clear()
    with workdir("ui") as work:
        if quick:
            _, db, info = quick_history_db(work)
            name, queries, n_moments, n_notes, n_queries = "notes", QUICK_QUERIES, 2, 1, 1
        else:
            _, db, info = history_db(bench_work("ui"), "hub")
            name, queries, n_moments, n_notes, n_queries = "hub", hub_queries(), 10, 3, 3
        return _measure(db, name, info, queries, n_moments, n_notes, n_queries)


def _measure(
    db: Any, name: str, info: dict[str, Any], queries: list[str], n_moments: int, n_notes: int, n_queries: int
) -> Figures:
    rng = random.Random(24)
    first, last = parse_time(info["first_batch"]), parse_time(info["last_batch"])
    moments = [first + (last - first) * (2 * k + 1) // (2 * n_moments) for k in range(n_moments)]
    rng.shuffle(moments)
    times: dict[str, list[float]] = {
        k: [] for k in ("timeline", "tree", "note", "move", "diff", "backlinks", "search", "tree_again")
    }
    with Vault.open(db, name=name, readonly=True) as vault:
        explorer = Explorer(vault)
        ms, _ = timed(explorer.timeline, view="timeline")
        times["timeline"].append(ms)
        for at in moments:
            tree_ms, tree = timed(explorer.tree, at, view="tree")
            times["tree"].append(tree_ms)
            paths = rng.sample([n["path"] for n in tree["notes"]], min(n_notes, len(tree["notes"])))
            for i, path in enumerate(paths):
                note_ms, note = timed(explorer.note, path, at, view="note")
                times["note"].append(note_ms)
                if i == 0:
                    times["move"].append(tree_ms + note_ms)
                    CPU.setdefault("move", []).append(CPU["tree"][-1] + CPU["note"][-1])
                revs = note["revisions"]
                k = next(
                    j
                    for j, r in enumerate(revs)
                    if r["known_at"] == note["revision"]["known_at"] and r["path"] == note["path"]
                )
                a = revs[k - 1] if k > 0 else revs[k]
                ms, _ = timed(
                    explorer.diff, a["path"], a["known_at"], note["path"], note["revision"]["known_at"], view="diff"
                )
                times["diff"].append(ms)
                ms, _ = timed(explorer.links, path, at, view="backlinks")
                times["backlinks"].append(ms)
            for query in rng.sample(queries, n_queries):
                ms, _ = timed(explorer.search, query, at, view="search")
                times["search"].append(ms)
            ms, _ = timed(explorer.tree, at, view="tree_again")
            times["tree_again"].append(ms)
    figures: Figures = {
        "notes": info["notes"],
        "batches": info["batches"],
        "revisions": info["revisions"],
        "moments": n_moments,
    }
    for view, values in times.items():
        figures.update(p50_p95(view, values))
        figures.update(
            {
                k.replace("_p", "_cpu_p", 1): v
                for k, v in p50_p95(view, CPU.get(view, [])).items()
                if not k.endswith("_n")
            }
        )
    return figures

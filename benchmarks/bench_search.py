"""Search latency: keyword, default (hybrid) and vector mode p50/p95, now and at historical cutoffs, beside the
simple correct approach (a temporary FTS5 table over the visible chunks, rebuilt for each query).

The vault (built once into ``$VAULTSYNC_BENCH_WORK/search``, default /tmp/vs-bench/search) holds the real histories
of both corpora merged by commit time: obsidian-help under help/ and obsidian-hub under hub/, one batch per commit,
then one more batch adding the hub's newest tree again under hub-copy/ (over 100,000 chunks visible at the end).
200 queries: half the Hub's human-written queries, half one or two title words. Quick: the sample vault imported,
a third of its notes edited in a second batch (the past is the first), 10 queries.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from statistics import median

import apsw

from benchmarks.harness import Figures, p50_p95
from benchmarks.inputs import QUICK_QUERIES, bench_work, clone, edit_some, hub_queries, sample_vault, workdir
from vaultsync.embed.tokenizer import TOKENIZE, parse_query
from vaultsync.gitimport import GitHistory
from vaultsync.store.search.snapshot import export_rows, take
from vaultsync.sync import Plan, write_plan
from vaultsync.vault import Vault


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return (time.perf_counter() - start) * 1000.0, out


def build(work: Path) -> Path:
    """The two histories merged by commit time, plus the Hub's newest tree again (built once into ``work``)."""
    db = work / "big.db"
    if db.exists():
        return db
    histories = {
        "help": GitHistory(clone("obsidian-help.bundle", work / "help")),
        "hub": GitHistory(clone("obsidian-hub.bundle", work / "hub")),
    }
    root = work / "vault"
    root.mkdir(exist_ok=True)
    steps = []
    for name, history in histories.items():
        parent = None
        for commit in history.commits():
            steps.append((commit.committed_at, name, parent, commit.sha))
            parent = commit.sha
    steps.sort()
    started = time.perf_counter()
    with Vault.open(db, root=root, name="big") as vault:
        last = 0
        for n, (when, name, parent, sha) in enumerate(steps, 1):
            history = histories[name]
            observed = history.tree(sha) if parent is None else history.changes(parent, sha)
            observed = {f"{name}/{path}": obs for path, obs in observed.items()}
            last = max(last, when)
            write_plan(
                vault._store,
                vault.id,
                vault.name,
                Plan(observed, vault._store.live_state(vault.id), {}),
                known_at=last,
                source="git",
                detail=sha,
            )
            if n % 200 == 0:
                print(f"{n}/{len(steps)} commits, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        head = steps[-1][0] if steps[-1][1] == "hub" else max(s[0] for s in steps if s[1] == "hub")
        hub_head = [s for s in steps if s[1] == "hub"][-1][3]
        observed = {f"hub-copy/{p}": o for p, o in histories["hub"].tree(hub_head).items()}
        write_plan(
            vault._store,
            vault.id,
            vault.name,
            Plan(observed, vault._store.live_state(vault.id), {}),
            known_at=max(last, head) + 1_000_000,
            source="git",
            detail="hub-copy",
        )
    for history in histories.values():
        history.close()
    print(f"built in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return db


def simple_search(con: apsw.Connection, vault_id: int, as_of: int | None, expression: str) -> list[tuple]:
    """The simple correct approach: a temporary FTS5 table over exactly the visible chunks, per query."""
    snap = take(con, vault_id, as_of, None)
    con.execute(f"CREATE VIRTUAL TABLE temp.simple USING fts5(indexed_text, tokenize='{TOKENIZE}')")
    try:
        con.executemany(
            "INSERT INTO temp.simple (rowid, indexed_text) VALUES (?, ?)",
            ((i, rec["indexed_text"]) for i, rec in enumerate(export_rows(con, snap))),
        )
        return con.execute(
            "SELECT rowid, bm25(simple) FROM simple WHERE simple MATCH ? ORDER BY rank LIMIT 10", (expression,)
        ).fetchall()
    finally:
        con.execute("DROP TABLE temp.simple")


def quick_db(work: Path) -> Path:
    root, db = sample_vault(work / "notes"), work / "quick.db"
    with Vault.open(db, root=root, name="notes") as vault:
        vault.sync()
        time.sleep(0.01)
        edit_some(root)
        vault.sync()
    return db


def measure_db(db: Path, queries_pool: list[str], count: int, simple: int, seed: int = 11) -> Figures:
    rng = random.Random(seed)
    with Vault.open(db, readonly=True) as vault:
        con = vault._store.db.con
        stats = vault.stats().to_json()
        visible = con.execute("SELECT count(*), count(DISTINCT doc_id) FROM search_rows WHERE died IS NULL").fetchone()
        times = [r[0] for r in con.execute("SELECT known_at FROM batches WHERE vault_id = ? ORDER BY id", (vault.id,))]
        titles = con.execute("SELECT title FROM notes WHERE title IS NOT NULL ORDER BY random() LIMIT 2000")
        words = [w for (t,) in titles for w in t.split() if len(w) > 3] or ["note"]
        queries = [
            rng.choice(queries_pool) if i % 2 else " ".join(rng.sample(words, min(len(words), rng.randint(1, 2))))
            for i in range(count)
        ]
        past = times[len(times) // 10 : -1] or times[:1]
        cutoffs = [rng.choice(past) for _ in queries]
        lat: dict[str, list[float]] = {
            f"{k}_{when}": [] for k in ("keyword", "hybrid", "vector") for when in ("now", "past")
        }
        for query, cutoff in zip(queries, cutoffs):
            for mode in ("keyword", "hybrid", "vector"):
                lat[f"{mode}_now"].append(timed(vault.search, query, mode=mode)[0])
                lat[f"{mode}_past"].append(timed(vault.search, query, mode=mode, as_of=cutoff)[0])
        simple_now, simple_past, ours_now, ours_past = [], [], [], []
        for query, cutoff in list(zip(queries, cutoffs))[:simple]:
            expression = parse_query(query).expression
            simple_now.append(timed(simple_search, con, vault.id, None, expression)[0])
            ours_now.append(timed(vault.search, query, mode="keyword")[0])
            simple_past.append(timed(simple_search, con, vault.id, cutoff, expression)[0])
            ours_past.append(timed(vault.search, query, mode="keyword", as_of=cutoff)[0])
    figures: Figures = {
        "visible_chunks": visible[0],
        "visible_distinct_texts": visible[1],
        "chunk_revisions": stats["chunk_revisions"],
        "batches": stats["batches"],
        "database_mb": round(stats["database_bytes"] / 1e6, 1),
        "queries": len(queries),
    }
    for key, values in lat.items():
        figures.update(p50_p95(key, values))
    figures.update(p50_p95("simple_now", simple_now) | p50_p95("simple_past", simple_past))
    if ours_now and ours_past:
        figures["speedup_vs_simple_now"] = round(median(simple_now) / max(median(ours_now), 1e-6), 1)
        figures["speedup_vs_simple_past"] = round(median(simple_past) / max(median(ours_past), 1e-6), 1)
    return figures


def run(quick: bool) -> Figures:
    if quick:
        with workdir("search") as work:
            return measure_db(quick_db(work), QUICK_QUERIES, 10, 2)
    return measure_db(build(bench_work("search")), hub_queries(), 200, 5)

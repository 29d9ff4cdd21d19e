"""Search speed at scale: keyword and hybrid p50/p95, now and at historical cutoffs, beside the simple
correct approach (a temporary FTS5 table over the visible chunks, rebuilt for each query).

    .venv/bin/python benchmarks/bench_search.py [--work /tmp/vs-bench] [--queries 200] [--simple 5] [--embedder hash]

The vault (built once into --work) holds the real histories of both corpora, merged by commit time:
obsidian-help under help/ and obsidian-hub under hub/, one batch per commit, then one more batch adding
the hub's newest tree again under hub-copy/ (so that over 100,000 chunks are visible at the end).
``--embedder minilm`` builds (or reuses) ``big-minilm.db``, whose vectors the semantic extra made
(each distinct text embedded once, as it is first recorded), and saves ``search_speed_minilm``; when
that embedder fuses, the default (``hybrid``) mode joins its vectors.

``--db PATH`` measures an existing database instead (e.g. a replay of the Help history), saved as
``search_speed_<--name>``; ``--windows N`` also times the default mode on N windows of 3–6 consecutive
words taken from visible chunks (stopwords and all: the queries whose words many chunks hold in order).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import apsw

from common import CORPORA, clone, machine, save, summary_ms, timed
from vaultsync.gitimport import GitHistory
from vaultsync.store.codec import unpack
from vaultsync.store.search.embedding import query_embedder
from vaultsync.store.search.snapshot import export_rows, take
from vaultsync.sync import Plan, write_plan
from vaultsync.embed.tokenizer import TOKENIZE, parse_query
from vaultsync.vault import Vault


def build(work: Path, embedder: str = "hash") -> Path:
    db = work / ("big.db" if embedder == "hash" else f"big-{embedder}.db")
    if db.exists():
        return db
    histories = {"help": GitHistory(clone("obsidian-help.bundle", work / "help")),
                 "hub": GitHistory(clone("obsidian-hub.bundle", work / "hub"))}
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
    extra = {} if embedder == "hash" else {"embedder": embedder}
    with Vault.open(db, root=root, name="big", **extra) as vault:
        last = 0
        for n, (when, name, parent, sha) in enumerate(steps, 1):
            history = histories[name]
            observed = history.tree(sha) if parent is None else history.changes(parent, sha)
            observed = {f"{name}/{path}": obs for path, obs in observed.items()}
            last = max(last, when)
            write_plan(vault._store, vault.id, vault.name, Plan(observed, vault._store.live_state(vault.id), {}),
                   known_at=last, source="git", detail=sha)
            if n % 200 == 0:
                print(f"{n}/{len(steps)} commits, {time.perf_counter() - started:.0f} s, CPU {time.process_time():.0f} s, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
        head = steps[-1][0] if steps[-1][1] == "hub" else max(s[0] for s in steps if s[1] == "hub")
        hub_head = [s for s in steps if s[1] == "hub"][-1][3]
        observed = {f"hub-copy/{p}": o for p, o in histories["hub"].tree(hub_head).items()}
        write_plan(vault._store, vault.id, vault.name, Plan(observed, vault._store.live_state(vault.id), {}),
               known_at=max(last, head) + 1_000_000, source="git", detail="hub-copy")
    for history in histories.values():
        history.close()
    print(f"built in {time.perf_counter() - started:.0f} s")
    return db


def simple_search(con: apsw.Connection, vault_id: int, as_of: int | None, expression: str) -> list[tuple]:
    """The simple correct approach: a temporary FTS5 table over exactly the visible chunks, per query."""
    snap = take(con, vault_id, as_of, None)
    con.execute(f"CREATE VIRTUAL TABLE temp.simple USING fts5(indexed_text, tokenize='{TOKENIZE}')")
    try:
        con.executemany("INSERT INTO temp.simple (rowid, indexed_text) VALUES (?, ?)",
                        ((i, rec["indexed_text"]) for i, rec in enumerate(export_rows(con, snap))))
        return con.execute("SELECT rowid, bm25(simple) FROM simple WHERE simple MATCH ? ORDER BY rank LIMIT 10",
                           (expression,)).fetchall()
    finally:
        con.execute("DROP TABLE temp.simple")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vs-bench"))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--simple", type=int, default=5, help="queries for the rebuild-per-query approach")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--db", type=Path, help="measure this existing database (no build)")
    parser.add_argument("--name", help="results name with --db (search_speed_NAME)")
    parser.add_argument("--windows", type=int, default=0, help="also time the default mode on N word windows")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    db = args.db or build(args.work, args.embedder)
    rng = random.Random(args.seed)
    hub_queries = [json.loads(line)["query"] for line in (CORPORA / "retrieval-hub.jsonl").read_text().splitlines()]
    with Vault.open(db, readonly=True) as vault:
        con = vault._store.db.con
        stats = vault.stats().to_json()
        visible = con.execute("SELECT count(*), count(DISTINCT doc_id) FROM search_rows WHERE died IS NULL").fetchone()
        times = [r[0] for r in con.execute("SELECT known_at FROM batches WHERE vault_id = ? ORDER BY id", (vault.id,))]
        words = [w for (t,) in con.execute("SELECT title FROM notes WHERE title IS NOT NULL ORDER BY random() LIMIT 2000")
                 for w in t.split() if len(w) > 3]
        queries = [rng.choice(hub_queries) if i % 2 else " ".join(rng.sample(words, rng.randint(1, 2)))
                   for i in range(args.queries)]
        cutoffs = [rng.choice(times[len(times) // 10:-1]) for _ in queries]
        kinds = ["keyword", "hybrid", "vector"]
        embedder = query_embedder(con)  # the one instance this process's searches use
        fuses = embedder.fuse
        if args.embedder != "hash":  # the default mode both with and without the embedder's vectors fused
            kinds[1:2] = ["hybrid_fused", "hybrid_unfused"]
        lat: dict[str, list[float]] = {f"{k}_{when}": [] for k in kinds for when in ("now", "past")}
        for query, cutoff in zip(queries, cutoffs):
            for kind in kinds:
                mode = kind.split("_")[0]
                embedder.fuse = fuses if kind == "hybrid" else kind == "hybrid_fused"
                lat[f"{kind}_now"].append(timed(vault.search, query, mode=mode)[0])
                lat[f"{kind}_past"].append(timed(vault.search, query, mode=mode, as_of=cutoff)[0])
        embedder.fuse = fuses
        if args.windows:
            texts = [r[0] for r in con.execute(
                "SELECT t.body FROM search_rows r JOIN chunks c ON c.id = r.id JOIN texts t ON t.id = c.text_id "
                "WHERE r.died IS NULL ORDER BY r.id")]
            windows: list[str] = []
            while len(windows) < args.windows:
                words = unpack(rng.choice(texts)).split()
                n = rng.randint(3, 6)
                if len(words) >= n:
                    start = rng.randrange(len(words) - n + 1)
                    windows.append(" ".join(w.strip(".,;:!?()[]*`#\"'") for w in words[start:start + n]))
            lat["hybrid_now_windows"], lat["hybrid_past_windows"] = [], []
            for query in windows:
                cutoff = rng.choice(times[len(times) // 10:-1])
                lat["hybrid_now_windows"].append(timed(vault.search, query)[0])
                lat["hybrid_past_windows"].append(timed(vault.search, query, as_of=cutoff)[0])
        simple_now, simple_past, ours_now, ours_past = [], [], [], []
        for query, cutoff in list(zip(queries, cutoffs))[: args.simple]:
            expression = parse_query(query).expression
            ms, rows = timed(simple_search, con, vault.id, None, expression)
            simple_now.append(ms)
            ours_now.append(timed(vault.search, query, mode="keyword")[0])
            ms, rows = timed(simple_search, con, vault.id, cutoff, expression)
            simple_past.append(ms)
            ours_past.append(timed(vault.search, query, mode="keyword", as_of=cutoff)[0])
    results = {k: summary_ms(v) for k, v in lat.items()}
    simple = {"now": summary_ms(simple_now), "past": summary_ms(simple_past),
              "ours_now_same_queries": summary_ms(ours_now), "ours_past_same_queries": summary_ms(ours_past)}
    ratio_now = simple["now"]["p50_ms"] / simple["ours_now_same_queries"]["p50_ms"]
    ratio_past = simple["past"]["p50_ms"] / simple["ours_past_same_queries"]["p50_ms"]
    payload = {"vault": {"visible_chunks": visible[0], "visible_distinct_texts": visible[1],
                         "chunk_revisions": stats["chunk_revisions"], "batches": stats["batches"],
                         "note_revisions": stats["revisions"], "database_bytes": stats["database_bytes"],
                         "first_batch": stats["first_batch"], "last_batch": stats["last_batch"]},
               "queries": len(queries), "latency": results, "simple_rebuild": simple,
               "speedup_vs_simple": {"now": round(ratio_now, 1), "past": round(ratio_past, 1)}, "machine": machine()}
    rows = [f"| {name.replace('_', ' ')} | {r['p50_ms']} | {r['p95_ms']} |" for name, r in results.items()]
    md = (f"Search latency, {len(queries)} queries (half human-written hub queries, half 1–2 title words), limit 10, "
          f"embedder {args.embedder} (`.venv/bin/python benchmarks/bench_search.py {' '.join(sys.argv[1:]) or '--embedder hash'}`; "
          f"load average {os.getloadavg()[0]:.1f} at the end)\n\n"
          f"Vault: {visible[0]:,} visible chunks ({visible[1]:,} distinct texts), {stats['chunk_revisions']:,} chunk "
          f"revisions, {stats['batches']:,} batches, database {stats['database_bytes'] / 1e6:.0f} MB\n\n"
          "| query | p50 ms | p95 ms |\n|---|---:|---:|\n" + "\n".join(rows) + "\n\n"
          f"Simple correct approach (temporary FTS5 table over the visible chunks, rebuilt per query), "
          f"{len(simple_now)} queries: p50 {simple['now']['p50_ms']:.0f} ms now, {simple['past']['p50_ms']:.0f} ms "
          f"historical; this store is {ratio_now:.0f}× / {ratio_past:.0f}× faster on the same queries.\n")
    name = f"search_speed_{args.name}" if args.name else (
        "search_speed" if args.embedder == "hash" else f"search_speed_{args.embedder}")
    save(name, payload, md)


if __name__ == "__main__":
    main()

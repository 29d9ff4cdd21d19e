"""Where a search's time goes: SQLite VM steps and nanoseconds per statement, summed over queries.

Usage: ``PYTHONPATH=CODE .venv/bin/python benchmarks/profile_past_search.py DB [--as-of T] [--mode hybrid]
[--queries 40] [--top 12]``

Runs the Hub's real queries (../shared/corpora/retrieval-hub.jsonl) with ``apsw``'s statement profile
(``trace_v2`` with ``SQLITE_TRACE_PROFILE``: ``SQLITE_STMTSTATUS_VM_STEP`` and nanoseconds per
statement, virtual-table inner queries included) and prints the statements that cost the most, with
the total wall time per query, so old and new code can be compared on one database.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import defaultdict
from pathlib import Path

import apsw

from common import CORPORA, percentile

from vaultsync.vault import Vault


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("--as-of")
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    lines = (CORPORA / "retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()
    queries = [json.loads(line)["query"] for line in lines[:: max(1, len(lines) // args.queries)]][: args.queries]
    steps: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])

    def profile(event: dict) -> None:
        sql = re.sub(r"\s+", " ", event.get("sql", ""))[:150]
        entry = steps[sql]
        entry[0] += event["stmt_status"].get("SQLITE_STMTSTATUS_VM_STEP", 0)
        entry[1] += event["nanoseconds"]
        entry[2] += 1

    with Vault.open(args.db, readonly=True) as vault:
        vault.search(queries[0], mode=args.mode, as_of=args.as_of)
        walls = []
        store = getattr(vault, "_store", None) or vault.store  # a benchmark may look inside (tests/vault/test_facade.py: the package may not)
        con = store.db.con if hasattr(store.db, "con") else None
        if con is None:
            raise SystemExit("no connection to trace")
        con.trace_v2(apsw.SQLITE_TRACE_PROFILE, profile, id="profile")
        for query in queries:
            start = time.perf_counter()
            vault.search(query, mode=args.mode, as_of=args.as_of)
            walls.append((time.perf_counter() - start) * 1000)
        con.trace_v2(0, None, id="profile")
    total_steps = sum(v[0] for v in steps.values())
    total_ns = sum(v[1] for v in steps.values())
    print(f"{len(queries)} queries, mode {args.mode}, as of {args.as_of or 'now'}: wall p50 "
          f"{percentile(walls, 0.5):.1f} ms, p95 {percentile(walls, 0.95):.1f} ms; SQLite {total_ns / 1e6 / len(queries):.1f} "
          f"ms and {total_steps / len(queries):,.0f} VM steps per query")
    for sql, (vm, ns, n) in sorted(steps.items(), key=lambda kv: -kv[1][1])[: args.top]:
        print(f"{ns / 1e6 / len(queries):8.2f} ms {vm / len(queries):12,.0f} steps {n:6d}x  {sql}")


if __name__ == "__main__":
    main()

"""CPU per keyword query for common words on a scale database (bench_scale.py's), now and at its past cutoff.

    .venv/bin/python benchmarks/bench_common_words.py DB VAULT [--repeat 5] [--limit 10] [--mode keyword]

DB is opened read-only; its cutoff is ``past`` in the side file DB with ``.json`` (bench_scale.py writes it).
Prints, for each word and for the Hub's real queries (40 of ../shared/corpora/retrieval-hub.jsonl, read at run
time), the median CPU time (``time.process_time``) of ``--repeat`` runs, then p50/p95 over the real queries, and a
digest of the hits (path, chunk, score) of every query, so that two versions of the code can be compared on the
same database (run it with each on ``PYTHONPATH``, one after the other, and compare the digests).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from pathlib import Path

from vaultsync.vault import Vault

WORDS = ["obsidian", "plugin", "note", "notes", "the", "markdown", "link", "graph", "daily", "template", "plug*",
         "Obsidian Hub", "how to use plugins"]
HUB_QUERIES = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora" / "retrieval-hub.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db", type=Path)
    ap.add_argument("vault")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--mode", default="keyword")
    args = ap.parse_args()
    past = json.loads(args.db.with_suffix(".json").read_text())["past"]
    lines = HUB_QUERIES.read_text(encoding="utf-8").splitlines()
    real = [json.loads(line)["query"] for line in lines[:: max(1, len(lines) // 40)]][:40]
    digest = hashlib.sha256()
    with Vault.open(args.db, name=args.vault, readonly=True) as vault:
        for label, when in (("now", None), ("past", past)):
            vault.search("warm", mode=args.mode, as_of=when, limit=args.limit)

            def cpu(query: str) -> float:
                runs = []
                for _ in range(args.repeat):
                    start = time.process_time()
                    hits = vault.search(query, mode=args.mode, as_of=when, limit=args.limit).hits
                    runs.append((time.process_time() - start) * 1000)
                digest.update(json.dumps([(h["path"], h["chunk_id"], h["score"]) for h in hits]).encode())
                return statistics.median(runs)

            words = {w: cpu(w) for w in WORDS}
            print(f"{args.mode} {label} limit={args.limit} " + " ".join(f"{w}={ms:.1f}" for w, ms in words.items()))
            times = sorted(cpu(q) for q in real)
            print(f"{args.mode} {label} hub queries: p50 {statistics.median(times):.2f} ms, "
                  f"p95 {times[int(len(times) * 0.95) - 1]:.2f} ms ({len(times)} queries)")
    print("hits digest", digest.hexdigest()[:16])


if __name__ == "__main__":
    main()

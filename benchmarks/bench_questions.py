"""Everyday questions beside the known-item and link/alias sets: @1, @3, @10 and MRR@10 per search mode.

    .venv/bin/python benchmarks/bench_questions.py [--embedder hash] [--modes keyword,hybrid,vector]
        [--known 300] [--titles 300] [--remembered 300] [--name questions]
        [--work /tmp/vs-questions]

Sets (note level; a question is answered when any of its notes is found; a link/alias query's ``sources``,
which contain its text, are left out of its ranking):

* ``questions tune|held-out (help-en|hub)``: ``benchmarks/questions/everyday.jsonl`` by split (``held-out``:
  never used to choose a weight or a model; ``tune``: the part that was), over the ``en/`` folder of the
  Obsidian Help bundle and over the Hub, each at its newest commit;
* ``known-item``, ``remembered`` (and its stopword-heavy half): ``bench_quality.py``'s samplers (same seeds)
  over the Hub (and over the Help's ``en/``, named so);
* ``title`` (a sample, seed 7) and ``anchor`` (all): the ``alias`` and ``anchor`` rows of
  ``retrieval-hub.jsonl``.

``--embedder`` builds (or reuses) databases whose vectors that embedder made; the default mode fuses them when
the embedder fuses. Latency (p50/p95 ms) is of ``Vault.search`` in this process on the Hub; the machine may be
shared with other work, so it is an upper bound of what a quiet machine gives.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import time
from pathlib import Path

try:  # run as a script (benchmarks/ on sys.path) or imported by the harness (python -m benchmarks)
    import bench_quality
    import common
    from common import machine, save, summary_ms, timed
except ImportError:
    from benchmarks import bench_quality, common
    from benchmarks.common import machine, save, summary_ms, timed

from vaultsync.vault import Vault

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "benchmarks" / "questions" / "everyday.jsonl"
CORPORA = Path(os.environ.get("VAULTSYNC_CORPORA", str(common.CORPORA)))
if not CORPORA.exists():  # a worktree beside the main checkout: the corpora are the main checkout's
    CORPORA = Path("/work/shared/corpora")
common.CORPORA = bench_quality.CORPORA = CORPORA
K = 10
GUIDES_LEFT_OUT = ("01 - Community/People", "02 - Community Expansions/02.05 All Community Expansions")
"""``hub-guides``: the Hub without these folders (one note per person, one per plugin or theme: 31,000 of its 35,500
texts), where every note an everyday question of the Hub points to is; a semantic model embeds it in minutes."""


def build(work: Path, vault: str, embedder: str) -> Path:
    """The database of ``vault`` (``help-en`` or ``hub``) at its newest commit, imported once per embedder: the
    import (words first), then its semantic vectors filled as the writer fills them after a batch; both timed
    (wall and this process's CPU) into ``NAME.timing.json`` beside the database."""
    bundle = "obsidian-help.bundle" if vault == "help-en" else "obsidian-hub.bundle"
    root = common.clone(bundle, work / ("hub-guides" if vault == "hub-guides" else vault.split("-")[0]))
    if vault == "help-en":
        root = root / "en"
    if vault == "hub-guides":  # a work tree of the Hub without its note-per-person and note-per-plugin folders
        for folder in GUIDES_LEFT_OUT:
            shutil.rmtree(root / folder, ignore_errors=True)
    db = work / f"{vault}-{embedder}.db"
    timing = db.with_suffix(".timing.json")
    if not db.exists():
        extra = {} if embedder == "hash" else {"embedder": embedder}
        started, cpu = time.perf_counter(), time.process_time()
        with Vault.open(db, root=root, name=vault, **extra) as v:
            summary = v.sync(known_at="2026-06-01")
            imported, imported_cpu = time.perf_counter() - started, time.process_time() - cpu
            filled = 0
            while step := v.fill_vectors(limit=256):
                filled += step
            progress = v.vector_progress()
        took = {
            "notes": summary.added,
            "import_s": round(imported, 1),
            "import_cpu_s": round(imported_cpu, 1),
            "vectors_s": round(time.perf_counter() - started - imported, 1),
            "vectors_cpu_s": round(time.process_time() - cpu - imported_cpu, 1),
            "texts_filled": filled,
            "complete": progress is None or progress["filled"] == progress["total"],
        }
        timing.write_text(json.dumps(took), encoding="utf-8")
        print(f"imported {vault} with {embedder}: {json.dumps(took)}", flush=True)
    return db


def build_times(work: Path, vault: str, embedder: str) -> dict:
    """What ``build`` measured for that database ({} when it was built before it measured)."""
    timing = (work / f"{vault}-{embedder}.db").with_suffix(".timing.json")
    return json.loads(timing.read_text(encoding="utf-8")) if timing.exists() else {}


def grouped(rows: list[dict]) -> list[dict]:
    """Rows with the same query as one item: every relevant note, every source."""
    out: dict[str, dict] = {}
    for row in rows:
        item = out.setdefault(row["query"], {"query": row["query"], "relevant": set(), "sources": set()})
        item["relevant"].add(row["relevant_path"])
        item["sources"].update(row.get("sources", []))
    return list(out.values())


def first_rank(paths: list[str], relevant: set[str], sources: set[str]) -> int | None:
    """Rank (1-based, distinct notes, sources skipped) of the first relevant note within the top ``K``."""
    seen: list[str] = []
    for path in paths:
        if path in sources or path in seen:
            continue
        seen.append(path)
        if path in relevant:
            return len(seen)
        if len(seen) == K:
            break
    return None


def measures(firsts: list[int | None]) -> dict[str, float]:
    n = len(firsts) or 1
    return {
        "n": len(firsts),
        "@1": round(sum(f == 1 for f in firsts) / n, 4),
        "@3": round(sum(f is not None and f <= 3 for f in firsts) / n, 4),
        "@10": round(sum(f is not None for f in firsts) / n, 4),
        "mrr@10": round(sum(1 / f for f in firsts if f) / n, 4),
    }


def evaluate(vault: Vault, items: list[dict], modes: list[str]) -> tuple[dict, dict]:
    """Per mode: the measures, and each item's first rank; plus latency per mode."""
    out, ranks = {}, {}
    for mode in modes:
        firsts, ms_all = [], []
        for item in items:
            ms, found = timed(vault.search, item["query"], mode=mode, limit=5 * K + 3 * len(item["sources"]))
            ms_all.append(ms)
            firsts.append(first_rank([h["path"] for h in found.hits], item["relevant"], item["sources"]))
        out[mode] = {**measures(firsts), **summary_ms(ms_all)}
        ranks[mode] = firsts
    return out, ranks


def question_sets(split: str) -> dict[str, list[dict]]:
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if split == "all" or r["split"] == split]
    return {v: grouped([r for r in rows if r["vault"] == v]) for v in ("help-en", "hub")}


def measure_vault(
    work: Path, vault_name: str, embedder: str, modes: list[str], chosen: list[str], counts: tuple[int, int, int]
) -> tuple[dict, dict]:
    """Every chosen set of one vault (``help-en`` or ``hub``) on its database of ``embedder``'s vectors: the measures
    per set and mode, and each of our own questions' first rank. ``counts``: known-item, remembered, title queries."""
    db = build(work, vault_name, embedder)
    results: dict[str, dict] = {}
    per_item: dict[str, dict] = {}
    with Vault.open(db, readonly=True) as vault:
        sets: dict[str, list[dict]] = {}
        asked = "hub" if vault_name == "hub-guides" else vault_name
        if "questions" in chosen:
            for split in ("tune", "held-out"):
                sets[f"questions {split} ({vault_name})"] = question_sets(split)[asked]
        where = "" if vault_name == "hub" else f" ({vault_name})"
        if "known-item" in chosen:
            sets[f"known-item{where}"] = grouped(bench_quality.known_items(vault, counts[0]))
        if "remembered" in chosen:
            windows = bench_quality.remembered_windows(vault, counts[1])
            sets[f"remembered{where}"] = grouped(windows)
            sets[f"remembered (stopword-heavy){where}"] = grouped([w for w in windows if w["stopword_heavy"]])
        if asked == "hub":
            rows = [
                json.loads(line) for line in (CORPORA / "retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()
            ]
            if vault_name == "hub-guides":  # the link/alias queries whose notes it holds
                held = {path for path, _, _ in vault.listing()}
                rows = [r for r in rows if r["relevant_path"] in held and set(r.get("sources", [])) <= held]
            if "title" in chosen:
                titles = grouped([r for r in rows if r["kind"] == "alias"])
                sets[f"title{where}"] = random.Random(7).sample(titles, min(counts[2], len(titles)))
            if "anchor" in chosen:
                sets[f"anchor{where}"] = grouped([r for r in rows if r["kind"] == "anchor"])
        for set_name, items in sets.items():
            results[set_name], ranks = evaluate(vault, items, modes)
            if set_name.startswith("questions"):  # our own questions only: the other sets' queries are note text
                per_item[set_name] = {m: dict(zip((i["query"] for i in items), r)) for m, r in ranks.items()}
            print(set_name, len(items), json.dumps(results[set_name]), flush=True)
    return results, per_item


def latency(work: Path, vault_name: str, rounds: int = 3, model: bool = True) -> dict:
    """p50/p95 ms of ``Vault.search`` (limit 10) in this process over the vault's everyday questions and its
    known-item sample (100), interleaved query by query so every mode meets the same load: keyword and the default
    mode by words alone (the hashed embedder's database), the default mode with MiniLM fused (its database)."""
    import importlib.util

    dbs = {"hash": build(work, vault_name, "hash")}
    if model and importlib.util.find_spec("onnxruntime") is not None:
        dbs["minilm"] = build(work, vault_name, "minilm")
    asked = "hub" if vault_name == "hub-guides" else vault_name
    with contextlib.ExitStack() as stack:
        vaults = {k: stack.enter_context(Vault.open(db, readonly=True)) for k, db in dbs.items()}
        queries = [i["query"] for i in question_sets("all")[asked]]
        queries += [i["query"] for i in grouped(bench_quality.known_items(vaults["hash"], 100))]
        runs = [("keyword", "hash", "keyword"), ("default (words)", "hash", "hybrid")]
        runs += [("default (MiniLM fused)", "minilm", "hybrid")] if "minilm" in vaults else []
        for _, key, mode in runs:  # warm: the model loads, the pages are read
            vaults[key].search(queries[0], mode=mode)
        times: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        for _ in range(rounds):
            for query in queries:
                for name, key, mode in runs:
                    ms, _ = timed(vaults[key].search, query, mode=mode, limit=10)
                    times[name].append(ms)
    return {"queries": len(queries), **{name: summary_ms(values) for name, values in times.items()}}


def modes_of(embedder: str) -> list[str]:
    """What a database of these vectors adds: words alone (keyword, default) for the hashed embedder; the default
    mode fused and the vectors alone for a semantic model (its keyword ranking is the same)."""
    return ["keyword", "hybrid"] if embedder == "hash" else ["hybrid", "vector"]


def run(quick: bool) -> dict:
    """The harness's entry. Full: each vault (the Help's ``en/``, the Hub) at its newest commit, with the hashed
    embedder (words alone) and, when the semantic extra is installed, with MiniLM (fused): the everyday questions
    (tune, held-out) beside the known-item, remembered (300 each) and link/alias sets (``modes_of``), with the
    latency of ``Vault.search`` in this process, and what each import took (words, then until its vectors were
    complete: ``build``; databases are reused between runs, with what their build measured). Quick: the sample
    vault, 10 known-item and 10 remembered queries, with each embedder. Also the latency of each mode on the Hub
    and its guides (``latency``)."""
    import importlib.util

    from benchmarks.harness import flatten
    from benchmarks.inputs import bench_work, sample_vault, workdir

    embedders = ["hash", *(["minilm"] if importlib.util.find_spec("onnxruntime") is not None else [])]
    figures: dict = {}
    if quick:
        with workdir("questions") as tmp:
            root = sample_vault(tmp / "notes")
            for embedder in embedders:
                db = tmp / f"notes-{embedder}.db"
                with Vault.open(
                    db, root=root, name="notes", **({} if embedder == "hash" else {"embedder": embedder})
                ) as v:
                    v.sync()
                    while v.fill_vectors(limit=256):
                        pass
                with Vault.open(db, readonly=True) as vault:
                    for set_name, items in {
                        "known-item": grouped(bench_quality.known_items(vault, 10)),
                        "remembered": grouped(bench_quality.remembered_windows(vault, 10)),
                    }.items():
                        measured, _ = evaluate(vault, items, modes_of(embedder))
                        figures.update(flatten(measured, f"{embedder}.{set_name}."))
        return figures
    work = bench_work("questions")
    for embedder in embedders:
        for vault_name in ("help-en", "hub-guides", "hub"):
            measured, _ = measure_vault(
                work,
                vault_name,
                embedder,
                modes_of(embedder),
                ["questions", "known-item", "remembered", "title", "anchor"],
                (300, 300, 300),
            )
            for set_name, by_mode in measured.items():
                for mode, m in by_mode.items():
                    figures.update({f"{embedder}.{set_name}.{mode}.{k}": v for k, v in m.items() if k != "n"})
            figures.update(flatten(build_times(work, vault_name, embedder), f"{embedder}.{vault_name}.import."))
    for vault_name in ("hub-guides", "hub"):
        figures.update(flatten(latency(work, vault_name), f"latency.{vault_name}."))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vs-questions"))
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--modes", default="keyword,hybrid,vector")
    parser.add_argument("--sets", default="questions,known-item,remembered,title,anchor")
    parser.add_argument("--known", type=int, default=300)
    parser.add_argument("--titles", type=int, default=300)
    parser.add_argument("--remembered", type=int, default=300)
    parser.add_argument("--name", default="questions")
    parser.add_argument(
        "--vaults", default="help-en,hub", help="which vaults: help-en, hub, hub-guides (the Hub's guides alone)"
    )
    parser.add_argument("--fuse", action="store_true", help="make the embedder fuse (to measure what it would)")
    parser.add_argument(
        "--latency", action="store_true", help="only each vault's interleaved latency (--embedder minilm: fused too)"
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.latency:
        model = args.embedder != "hash"  # --embedder hash: words alone (no model's database built)
        found = {vault_name: latency(args.work, vault_name, model=model) for vault_name in args.vaults.split(",")}
        print(json.dumps(found, indent=1))
        save(args.name, {"latency": found, "machine": machine()}, "")
        return
    modes = args.modes.split(",")
    if args.fuse:
        from vaultsync.embed import embedders

        made = embedders.EMBEDDERS[args.embedder]
        embedders.EMBEDDERS[args.embedder] = lambda: bench_quality._fusing(made())
    results: dict[str, dict] = {}
    per_item: dict[str, dict] = {}
    imports: dict[str, dict] = {}
    for vault_name in args.vaults.split(","):
        found, items = measure_vault(
            args.work,
            vault_name,
            args.embedder,
            modes,
            args.sets.split(","),
            (args.known, args.remembered, args.titles),
        )
        results.update(found)
        per_item.update(items)
        imports[vault_name] = build_times(args.work, vault_name, args.embedder)
    labels = {"keyword": "keyword", "hybrid": "default", "vector": f"vector ({args.embedder})"}
    lines = [
        "| set | mode | n | @1 | @3 | @10 | MRR@10 | p50 ms | p95 ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for set_name, by_mode in results.items():
        for mode, r in by_mode.items():
            lines.append(
                f"| {set_name} | {labels.get(mode, mode)} | {r['n']} | {r['@1']:.3f} | {r['@3']:.3f} | "
                f"{r['@10']:.3f} | {r['mrr@10']:.3f} | {r['p50_ms']} | {r['p95_ms']} |"
            )
    md = (
        "Everyday questions (`tune`: weights and model were chosen on it; `held-out`: only measured) beside the "
        f"known-item and link/alias sets; embedder `{args.embedder}`"
        f"{' (fused by force)' if args.fuse else ''}; note level; latency in-process, machine shared with other "
        "work.\n\n" + "\n".join(lines) + "\n"
    )
    payload = {"results": results, "per_item": per_item, "imports": imports, "embedder": args.embedder}
    save(args.name, {**payload, "machine": machine()}, md)


if __name__ == "__main__":
    main()

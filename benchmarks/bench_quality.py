"""Retrieval quality on the Hub vault at its newest commit, four query sets reported separately.

    .venv/bin/python benchmarks/bench_quality.py [--work /tmp/vs-quality] [--sample N] [--known N]
        [--remembered N] [--modes keyword,hybrid,vector] [--embedder hash]

Sets (note level; a query's ``sources`` notes, which contain its link text, are left out of its ranking):

* ``title``: the ``alias`` rows of ../shared/corpora/retrieval-hub.jsonl (titles and aliases);
* ``anchor``: its ``anchor`` rows (link display texts whose words differ from the target's title);
* ``known-item``: 4–6 consecutive words sampled (seed 10) from a paragraph of a note (no headings,
  tables, code or links, and only phrases found in exactly one note); the note holding them is relevant.
* ``remembered``: windows of 3–6 consecutive words as a person remembers them, stopwords and all, sampled
  (seed ``REMEMBERED_SEED``, fixed before any measurement; no weight was fitted on this set) from a paragraph
  of a note: half of them stopword-heavy (at least half the words in ``STOPWORDS``), reported again on
  their own as ``remembered (stopword-heavy)``; only windows whose words, as the keyword index tokenizes
  them (NFKC, ``unicode61 remove_diacritics 2``), stand consecutively in exactly one note; that note is
  relevant. The title, anchor and known-item sets are those the default mode's weights were chosen on.

Reported per mode: recall@10, MRR@10 and success@1, beside a plain baseline measured in the same run
(FTS5 BM25 over whole notes, title + text, any-term query). ``--embedder`` builds (or reuses) a
database whose vectors that embedder made (``import --embedder``), so ``vector`` and ``hybrid`` use it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import apsw
from markdown_it import MarkdownIt
from mdit_py_plugins.front_matter import front_matter_plugin

try:  # run as a script (benchmarks/ on sys.path) or imported by the harness (python -m benchmarks)
    from common import CORPORA, clone, machine, save, summary_ms, timed
except ImportError:
    from benchmarks.common import CORPORA, clone, machine, save, summary_ms, timed
from vaultsync.vault import Vault

K = 10
SEED = 10
REMEMBERED_SEED = 2323
STOPWORDS = frozenset(
    """a about after all also an and any are as at be because been but by can do does for from
has have how i if in into is it its more most no not of on one or other so some such than that the their them
then there these they this to up use used using was we what when which will with you your""".split()
)
_TOKENIZER = apsw.Connection(":memory:").fts5_tokenizer("unicode61", ["remove_diacritics", "2"])
_WORD = re.compile(r"^[\w'’-]+[.,;:!?]?$")
_LINKY = re.compile(r"\[|\]|\(|\)|https?:|www\.|`|<|>|\||\*|_{2}|==|#|\^|%%|\$")


def build(work: Path, embedder: str) -> tuple[Path, Path, dict]:
    root = clone("obsidian-hub.bundle", work / "hub")
    db = work / ("hub-head.db" if embedder == "hash" else f"hub-head-{embedder}.db")
    info: dict = {"embedder": embedder}
    if not db.exists():
        started = time.perf_counter()
        extra = {} if embedder == "hash" else {"embedder": embedder}
        with Vault.open(db, root=root, name="hub", **extra) as vault:
            summary = vault.sync(known_at="2026-06-01")
            info["import_seconds"] = round(time.perf_counter() - started, 1)
            while vault.fill_vectors(limit=256):  # a semantic model's vectors, filled after the import
                pass
        info["vectors_seconds"] = round(time.perf_counter() - started - info["import_seconds"], 1)
        info["notes"] = summary.added
    md_bytes = sum(p.stat().st_size for p in root.rglob("*.md") if ".github" not in p.parts and ".git" not in p.parts)
    info["markdown_bytes"] = md_bytes
    wal = Path(str(db) + "-wal")
    info["database_bytes"] = db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    info["size_ratio"] = round(info["database_bytes"] / md_bytes, 2)
    return root, db, info


def any_term(query: str) -> str:
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in query.split())


def baseline_index(vault: Vault) -> apsw.Connection:
    """One row per note, title + full text, default unicode61 tokenizer."""
    con = apsw.Connection(":memory:")
    con.execute("CREATE VIRTUAL TABLE notes USING fts5(path UNINDEXED, body)")
    with con:
        for rev in vault.ls():
            con.execute(
                "INSERT INTO notes (path, body) VALUES (?, ?)",
                (rev.path, f"{rev.title or ''}\n{vault.read(rev.path).content}"),
            )
    return con


def paragraphs(text: str) -> list[str]:
    """Text of the note's paragraphs (top level or in lists and quotes), never of headings, tables or code."""
    md = MarkdownIt("commonmark").enable("table").use(front_matter_plugin)
    tokens = md.parse(text)
    out = []
    for i, token in enumerate(tokens):
        if token.type == "inline" and i > 0 and tokens[i - 1].type == "paragraph_open":
            out.append(token.content)
    return out


def known_items(vault: Vault, count: int) -> list[dict]:
    """``count`` queries of 4–6 consecutive plain words from one paragraph of one note, found in no other note."""
    rng = random.Random(SEED)
    texts = {rev.path: vault.read(rev.path).content for rev in vault.ls()}
    flat = {path: " ".join(text.split()) for path, text in texts.items()}
    candidates: list[tuple[str, list[str]]] = []
    for path in sorted(texts):
        for para in paragraphs(texts[path]):
            if _LINKY.search(para):
                continue
            words = para.split()
            if len(words) >= 6 and all(_WORD.match(w) for w in words):
                candidates.append((path, words))
    rng.shuffle(candidates)
    out: list[dict] = []
    used: set[str] = set()
    for path, words in candidates:
        if path in used:
            continue
        n = rng.randint(4, 6)
        start = rng.randint(0, len(words) - n)
        query = " ".join(w.rstrip(".,;:!?") for w in words[start : start + n])
        exact = " ".join(words[start : start + n])
        if sum(exact in body for body in flat.values()) != 1:
            continue
        used.add(path)
        out.append({"query": query, "relevant_path": path, "sources": [], "kind": "known-item"})
        if len(out) == count:
            break
    return out


def index_tokens(text: str) -> list[str]:
    """The tokens the keyword index holds for ``text`` (NFKC, then FTS5's unicode61 with remove_diacritics 2)."""
    data = unicodedata.normalize("NFKC", text).encode("utf-8", "surrogatepass")
    return _TOKENIZER(data, apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False, include_colocated=False)


def remembered_windows(vault: Vault, count: int) -> list[dict]:
    """``count`` windows of 3–6 consecutive words from a paragraph (one per note), half stopword-heavy, whose
    tokens stand consecutively in exactly one note."""
    rng = random.Random(REMEMBERED_SEED)
    texts = {rev.path: vault.read(rev.path).content for rev in vault.ls()}
    joined = {path: " " + " ".join(index_tokens(text)) + " " for path, text in texts.items()}
    having: dict[str, set[str]] = {}  # token -> notes holding it
    for path, body in joined.items():
        for tok in set(body.split()):
            having.setdefault(tok, set()).add(path)
    candidates = [(path, para.split()) for path in sorted(texts) for para in paragraphs(texts[path])]
    candidates = [(path, words) for path, words in candidates if len(words) >= 3]
    rng.shuffle(candidates)
    quota = {True: count // 2, False: count - count // 2}
    out: list[dict] = []
    used: set[str] = set()
    for path, words in candidates:
        if path in used:
            continue
        n = rng.randint(3, min(6, len(words)))
        start = rng.randint(0, len(words) - n)
        window = [w.strip(".,;:!?\"'()") for w in words[start : start + n]]
        if not all(w and _WORD.match(w) and not _LINKY.search(w) for w in window):
            continue
        heavy = 2 * sum(w.lower() in STOPWORDS for w in window) >= len(window)
        if quota[heavy] == 0:
            continue
        toks = index_tokens(" ".join(window))
        needle = " " + " ".join(toks) + " "
        notes = set.intersection(*(having.get(t, set()) for t in toks)) if toks else set()
        if sum(needle in joined[n] for n in notes) != 1:
            continue
        used.add(path)
        quota[heavy] -= 1
        out.append(
            {
                "query": " ".join(window),
                "relevant_path": path,
                "sources": [],
                "kind": "remembered",
                "stopword_heavy": heavy,
            }
        )
        if not any(quota.values()):
            break
    return out


def score(ranked_paths: list[str], relevant: str, sources: set[str]) -> tuple[float, float, float]:
    """(hit in the top 10, reciprocal rank in the top 10, hit at rank 1) over distinct notes."""
    seen: list[str] = []
    for path in ranked_paths:
        if path in sources or path in seen:
            continue
        seen.append(path)
        if len(seen) == K:
            break
    if relevant in seen:
        rank = seen.index(relevant) + 1
        return 1.0, 1.0 / rank, 1.0 if rank == 1 else 0.0
    return 0.0, 0.0, 0.0


def evaluate(
    vault: Vault,
    base: apsw.Connection,
    queries: list[dict],
    modes: list[str],
    per: dict[str, list[tuple[float, float, float]]] | None = None,
) -> dict[str, dict]:
    """Measures per mode; ``per`` (if given) receives each query's (hit@10, RR@10, hit@1) per mode."""
    per = {} if per is None else per
    per.update({m: [] for m in ["baseline", *modes]})
    latency: dict[str, list[float]] = {m: [] for m in ["baseline", *modes]}
    for item in queries:
        sources = set(item["sources"])
        ms, rows = timed(
            lambda q, sources=sources: base.execute(
                "SELECT path FROM notes WHERE notes MATCH ? ORDER BY rank LIMIT ?", (any_term(q), 4 * K + len(sources))
            ).fetchall(),
            item["query"],
        )
        latency["baseline"].append(ms)
        per["baseline"].append(score([r[0] for r in rows], item["relevant_path"], sources))
        for mode in modes:
            ms, out = timed(vault.search, item["query"], mode=mode, limit=5 * K + 3 * len(sources))
            latency[mode].append(ms)
            hits = out.hits if hasattr(out, "hits") else out["hits"]  # typed since issue 18; a dict in older code
            per[mode].append(score([h["path"] for h in hits], item["relevant_path"], sources))
    return {name: {**measures(values), **summary_ms(latency[name])} for name, values in per.items()}


def measures(values: list[tuple[float, float, float]]) -> dict[str, float]:
    n = len(values) or 1
    return {
        "recall@10": round(sum(v[0] for v in values) / n, 4),
        "mrr@10": round(sum(v[1] for v in values) / n, 4),
        "success@1": round(sum(v[2] for v in values) / n, 4),
    }


def _fusing(embedder, fuse: bool = True):  # type: ignore[no-untyped-def]
    embedder.fuse = fuse
    return embedder


@contextlib.contextmanager
def fused(name: str, fuse: bool) -> Iterator[None]:
    """Embedder ``name`` made to fuse (or not) into the default mode while inside (to measure what fusing does)."""
    from vaultsync.embed import embedders

    made = embedders.EMBEDDERS[name]
    embedders.EMBEDDERS[name] = lambda: _fusing(made(), fuse)
    try:
        yield
    finally:
        embedders.EMBEDDERS[name] = made


def run_minilm(quick: bool) -> dict:
    """``run`` on a store whose vectors are MiniLM's (the semantic extra), the default mode by words alone."""
    return run(quick, "minilm", fuse=False)


def run_minilm_fused(quick: bool) -> dict:
    """``run`` on a store whose vectors are MiniLM's, fused into the default mode (as vaultsync ships it)."""
    return run(quick, "minilm", fuse=True)


def run(quick: bool, embedder: str = "hash", fuse: bool | None = None) -> dict:
    """The harness's entry: every set and mode on the Hub at its newest commit (work folder reused); quick: the
    known-item and remembered sets (10 each) on the sample vault. ``embedder``: whose vectors the store holds
    (filled after the import, as the writer fills them); ``fuse``: force fusing on or off (None: as shipped)."""
    import importlib.util

    from benchmarks.harness import flatten
    from benchmarks.inputs import Unavailable, bench_work, sample_vault, workdir

    if embedder == "minilm" and importlib.util.find_spec("onnxruntime") is None:
        raise Unavailable("the semantic extra is not installed (pip install -e '.[semantic]')")
    modes = ["keyword", "hybrid", "vector"]
    extra = {} if embedder == "hash" else {"embedder": embedder}
    with workdir("quality") as tmp, fused(embedder, fuse) if fuse is not None else contextlib.nullcontext():
        if quick:
            root, db = sample_vault(tmp / "notes"), tmp / "notes.db"
            with Vault.open(db, root=root, name="notes", **extra) as vault:
                vault.sync()
                while vault.fill_vectors(limit=256):
                    pass
            sets: dict[str, list[dict]] = {}
            counts = (10, 10)
        else:
            _, db, _ = build(bench_work("quality"), embedder)
            lines = (CORPORA / "retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()
            rows = [json.loads(line) for line in lines]
            sets = {
                "title": [r for r in rows if r["kind"] == "alias"],
                "anchor": [r for r in rows if r["kind"] == "anchor"],
            }
            counts = (500, 500)
        with Vault.open(db, readonly=True) as vault:
            sets["known-item"] = known_items(vault, counts[0])
            sets["remembered"] = remembered_windows(vault, counts[1])
            base = baseline_index(vault)
            results = {name: evaluate(vault, base, queries, modes) for name, queries in sets.items()}
    figures = {f"{name}_queries": len(queries) for name, queries in sets.items()}
    for name, by_mode in results.items():
        for mode, measured in by_mode.items():
            figures.update(flatten({k: v for k, v in measured.items() if k != "n"}, f"{name}.{mode}."))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vs-quality"))
    parser.add_argument("--sample", type=int, default=0, help="use N random title/anchor queries each (0: all)")
    parser.add_argument("--known", type=int, default=500, help="known-item queries to sample")
    parser.add_argument("--remembered", type=int, default=500, help="remembered windows to sample")
    parser.add_argument("--sets", default="title,anchor,known-item,remembered", help="sets to measure, in this order")
    parser.add_argument("--modes", default="keyword,hybrid,vector")
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--name", default="quality", help="results file name")
    parser.add_argument(
        "--fuse",
        action="store_true",
        help="fuse the embedder's vectors into the default mode (to measure whether it earns it: Embedder.fuse)",
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    _, db, info = build(args.work, args.embedder)
    rows = [json.loads(line) for line in (CORPORA / "retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()]
    sets = {"title": [r for r in rows if r["kind"] == "alias"], "anchor": [r for r in rows if r["kind"] == "anchor"]}
    if args.sample:
        sets = {k: random.Random(7).sample(v, min(args.sample, len(v))) for k, v in sets.items()}
    modes = args.modes.split(",")
    if args.fuse:
        from vaultsync.embed import embedders

        made = embedders.EMBEDDERS[args.embedder]
        embedders.EMBEDDERS[args.embedder] = lambda: _fusing(made())
    with Vault.open(db, readonly=True) as vault:
        chosen = args.sets.split(",")
        sets["known-item"] = known_items(vault, args.known) if "known-item" in chosen else []
        sets["remembered"] = remembered_windows(vault, args.remembered) if "remembered" in chosen else []
        sets = {name: sets[name] for name in chosen}
        base = baseline_index(vault)
        results = {}
        for name, queries in sets.items():
            per: dict[str, list[tuple[float, float, float]]] = {}
            results[name] = evaluate(vault, base, queries, modes, per)
            print(name, len(queries), json.dumps(results[name]), flush=True)
            if name == "remembered":  # the stopword-heavy half on its own (same runs)
                heavy = [q["stopword_heavy"] for q in queries]
                results["remembered (stopword-heavy)"] = {
                    m: {**measures([v for v, h in zip(values, heavy) if h]), "p50_ms": None}
                    for m, values in per.items()
                }
        sets["remembered (stopword-heavy)"] = [q for q in sets["remembered"] if q["stopword_heavy"]]
    payload = {
        "sets": {k: len(v) for k, v in sets.items()},
        "corpus": "obsidian-hub HEAD",
        "vault": info,
        "remembered_seed": REMEMBERED_SEED,
        "results": results,
        "machine": machine(),
    }
    fused = f"fused: {args.embedder}" if args.fuse else "no vectors fused"
    labels = {
        "baseline": "baseline: FTS5 BM25 over whole notes, any term",
        "keyword": "keyword (`--mode keyword`)",
        "vector": f"vector only ({args.embedder})",
        "hybrid": f"default (`hybrid`, {fused})",
    }
    lines = ["| set | system | recall@10 | MRR@10 | success@1 | p50 ms |", "|---|---|---:|---:|---:|---:|"]
    for set_name, by_mode in results.items():
        for name, r in by_mode.items():
            lines.append(
                f"| {set_name} ({len(sets[set_name])}) | {labels.get(name, name)} | {r['recall@10']:.3f} | "
                f"{r['mrr@10']:.3f} | {r['success@1']:.3f} | {'(same runs)' if r['p50_ms'] is None else r['p50_ms']} |"
            )
    md = (
        "Quality on the Hub at HEAD (note level; source notes left out; `remembered`: seed "
        f"{REMEMBERED_SEED}, not a set the weights were fitted on)\n\n"
        + "\n".join(lines)
        + "\n\n"
        + f"Database {info['database_bytes']:,} bytes ({info['size_ratio']}× the Markdown), embedder {args.embedder}.\n"
    )
    save(args.name, payload, md)


if __name__ == "__main__":
    main()

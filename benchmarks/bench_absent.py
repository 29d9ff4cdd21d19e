"""Words found nowhere: how often the default mode shows hits for a word no note holds, and the similarity floor.

    .venv/bin/python benchmarks/bench_absent.py [--words 50] [--work /tmp/vs-questions] [--embedder minilm]

For each vault (the sample vault ``notes/`` and the Help's ``en/`` at its newest commit, the database
``bench_questions.build`` makes) and a semantic embedder that fuses:

* ``absent``: ``--words`` random pronounceable words (consonant-vowel syllables, seed 2), each checked absent from
  every token the keyword index holds for the vault (the chunks' indexed text through FTS5's own tokenizer) and by
  the keyword mode finding nothing. Per word: the top cosine similarity of the vector mode (what the default mode
  would show when no chunk holds the word) and the default mode's hits. ``false_hit_rate``: the share of words for
  which the default mode shows any hit not marked "similar, no word matches" (it must be 0); ``shown_rate``: the
  share with any hit at all (with the floor: those above it, marked);
* ``tune``: another 100 such words (seed 1): the distribution the floor was chosen on (its maximum top cosine);
* ``questions``: the everyday questions of ``benchmarks/questions/everyday.jsonl`` for the vault (the Help) and, for
  the sample vault, every note's title: per query, whether any chunk holds its words (the default mode applies
  the floor only when none does) and the cosine of its relevant note's best chunk (what a floor must keep).

Saved as ``absent`` (benchmarks/results/absent.jsonl); ``python -m benchmarks absent [--quick]`` runs ``run``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

try:  # run as a script (benchmarks/ on sys.path) or imported by the harness (python -m benchmarks)
    import bench_questions
    from common import machine, save
except ImportError:
    from benchmarks import bench_questions
    from benchmarks.common import machine, save

from vaultsync.store.search.signals import tokens
from vaultsync.vault import Vault

SAMPLE = Path(__file__).resolve().parents[1] / "notes"
CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"


def vocabulary(vault: Vault) -> set[str]:
    """Every token the keyword index holds for the vault now (indexed text through FTS5's tokenizer)."""
    words: set[str] = set()
    for row in vault.export():
        if "indexed_text" in row:
            words.update(tokens(row["indexed_text"]))
    return words


def absent_words(vault: Vault, known: set[str], count: int, seed: int) -> list[str]:
    """``count`` pronounceable words of 3 syllables that the vault holds nowhere (and keyword search confirms)."""
    rng = random.Random(seed)
    found: list[str] = []
    while len(found) < count:
        word = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(3))
        if word in known or word in found:
            continue
        if vault.search(word, mode="keyword", limit=1).hits:
            raise AssertionError(f"{word!r} is not in the vocabulary yet keyword search finds it")
        found.append(word)
    return found


def top_cosine(vault: Vault, query: str) -> float:
    hits = vault.search(query, mode="vector", limit=1).hits
    return hits[0]["score"] if hits else 0.0


def relevant_cosine(vault: Vault, query: str, relevant: set[str]) -> float | None:
    """The cosine of the best chunk of a relevant note among the 200 nearest (None: not among them)."""
    for hit in vault.search(query, mode="vector", limit=200).hits:
        if hit["path"] in relevant:
            return float(hit["score"])
    return None


def measure(vault: Vault, name: str, words: int, queries: list[dict]) -> dict:
    known = vocabulary(vault)
    tune = absent_words(vault, known, 100, seed=1)
    held = [w for w in absent_words(vault, known, words + 100, seed=2) if w not in tune][:words]
    tune_cos = [top_cosine(vault, w) for w in tune]
    held_rows = []
    for word in held:
        result = vault.search(word)
        held_rows.append(
            {
                "word": word,
                "top_cosine": round(top_cosine(vault, word), 4),
                "hits": len(result.hits),
                "similar_only": getattr(result, "similar_only", False),  # the old code has no mark
            }
        )
    matched = [r for r in held_rows if r["hits"] and not r["similar_only"]]
    real = []
    for item in queries:
        worded = bool(vault.search(item["query"], mode="keyword", limit=1).hits)
        real.append(
            {
                "query": item["query"],
                "words_match": worded,
                "relevant_cosine": relevant_cosine(vault, item["query"], item["relevant"]),
                "top_cosine": round(top_cosine(vault, item["query"]), 4),
            }
        )
    unworded = [r for r in real if not r["words_match"]]
    rel = [r["relevant_cosine"] for r in real if r["relevant_cosine"] is not None]
    out = {
        "vocabulary": len(known),
        "absent": {
            "n": len(held_rows),
            "false_hit_rate": round(len(matched) / len(held_rows), 4),
            "shown_rate": round(sum(1 for r in held_rows if r["hits"]) / len(held_rows), 4),
            "hits_shown": sum(r["hits"] for r in held_rows),
            "top_cosine_max": max(r["top_cosine"] for r in held_rows),
            "top_cosine_median": round(statistics.median(r["top_cosine"] for r in held_rows), 4),
        },
        "tune": {
            "n": len(tune),
            "top_cosine_max": round(max(tune_cos), 4),
            "top_cosine_p95": round(sorted(tune_cos)[int(0.95 * len(tune_cos)) - 1], 4),
            "top_cosine_median": round(statistics.median(tune_cos), 4),
        },
        "questions": {
            "n": len(real),
            "no_word_matches": len(unworded),
            "relevant_cosine_min": round(min(rel), 4) if rel else None,
            "relevant_cosine_p05": round(sorted(rel)[max(0, int(0.05 * len(rel)) - 1)], 4) if rel else None,
            "relevant_cosine_median": round(statistics.median(rel), 4) if rel else None,
            "top_cosine_min": min(r["top_cosine"] for r in real) if real else None,
        },
    }
    print(name, json.dumps(out), flush=True)
    out["words"] = held_rows
    out["unworded_questions"] = unworded
    return out


def sample_titles(vault: Vault) -> list[dict]:
    return [{"query": rev.title, "relevant": {rev.path}} for rev in vault.ls() if rev.title]


def _sample_db(work: Path, embedder: str) -> Path:
    """The sample vault imported once with ``embedder``'s vectors, all filled."""
    db = work / f"notes-{embedder}.db"
    if not db.exists():
        extra = {} if embedder == "hash" else {"embedder": embedder}
        with Vault.open(db, root=SAMPLE, name="notes", **extra) as v:
            v.sync()
            while v.fill_vectors(limit=256):
                pass
    return db


def run(quick: bool) -> dict:
    """The harness's entry. Full: the sample vault and the Help's ``en/`` with MiniLM (when the semantic extra is
    installed, else the hashed embedder, which does not fuse: nothing to show below a floor), 50 absent words each;
    quick: the sample vault alone, 10 words."""
    import importlib.util

    from benchmarks.harness import flatten
    from benchmarks.inputs import bench_work, workdir

    embedder = "minilm" if importlib.util.find_spec("onnxruntime") is not None else "hash"
    figures: dict = {}
    if quick:
        with workdir("absent") as tmp, Vault.open(_sample_db(tmp, embedder), readonly=True) as vault:
            found = measure(vault, "notes", 10, sample_titles(vault))
        return flatten({k: found[k] for k in ("absent", "tune", "questions")}, f"{embedder}.notes.")
    work = bench_work("questions")
    for name in ("notes", "help-en"):
        db = _sample_db(work, embedder) if name == "notes" else bench_questions.build(work, name, embedder)
        with Vault.open(db, readonly=True) as vault:
            queries = sample_titles(vault) if name == "notes" else bench_questions.question_sets("all")[name]
            found = measure(vault, name, 50, queries)
        figures.update(flatten({k: found[k] for k in ("absent", "tune", "questions")}, f"{embedder}.{name}."))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vs-questions"))
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--words", type=int, default=50)
    parser.add_argument("--vaults", default="notes,help-en")
    parser.add_argument("--name", default="absent")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    for name in args.vaults.split(","):
        if name == "notes":
            with Vault.open(_sample_db(args.work, args.embedder), readonly=True) as vault:
                results[name] = measure(vault, name, args.words, sample_titles(vault))
        else:
            db = bench_questions.build(args.work, name, args.embedder)
            with Vault.open(db, readonly=True) as vault:
                results[name] = measure(vault, name, args.words, bench_questions.question_sets("all")[name])
    lines = [
        "| vault | absent words | shown as matches | any hit shown | top cosine max (tune / held) | "
        "questions without a word match | relevant cosine min / p05 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        a, t, q = r["absent"], r["tune"], r["questions"]
        lines.append(
            f"| {name} | {a['n']} | {a['false_hit_rate']:.2f} | {a['shown_rate']:.2f} | "
            f"{t['top_cosine_max']:.3f} / {a['top_cosine_max']:.3f} | {q['no_word_matches']} of {q['n']} | "
            f"{q['relevant_cosine_min']} / {q['relevant_cosine_p05']} |"
        )
    md = f"Words found nowhere, embedder `{args.embedder}` (default mode).\n\n" + "\n".join(lines) + "\n"
    save(args.name, {"results": results, "embedder": args.embedder, "machine": machine()}, md)


if __name__ == "__main__":
    main()

"""Two checkouts, the same answers, the CPU each takes: the hashed embedder and hit snippets on the Obsidian Help notes.

    .venv/bin/python benchmarks/compare_hot_paths.py --old /tmp/old [--rounds 3]

``--old`` is another checkout of vaultsync (``git worktree add /tmp/old REV``). Each checkout runs in a child
process with only its own ``vaultsync`` importable, over the same inputs: every note of the Help bundle's newest
tree (cloned at run time from ../shared/corpora, never copied), normalized as ``indexed_text`` does, and for the
snippets 40 notes per query for 210 queries (the Hub's real queries, a few CJK and prefix ones). It prints the
CPU seconds of each round and whether every vector and every snippet is the same in both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import CORPORA, REPO, clone

CHILD = r"""
import hashlib, json, random, sys, time
from pathlib import Path
from vaultsync.embed.embedders import HashEmbedder, quantize
from vaultsync.store.search.snippets import snippet
from vaultsync.embed.tokenizer import normalize, parse_query
root, queries_file, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
texts = [normalize(p.read_text(encoding="utf-8", errors="replace")) for p in sorted(root.rglob("*.md"))]
queries = [json.loads(line)["query"] for line in queries_file.read_text(encoding="utf-8").splitlines()[:200]]
queries += ["obsidian", "obs*", "the vault", '"core plugin"', "东京", "插件", "note*", "a b", "link to", "set* up"]
rng = random.Random(3)
pairs = [(t, parse_query(q)) for q in queries for t in rng.sample(texts, 40)]
out = {"texts": len(texts), "pairs": len(pairs), "embed_cpu": [], "snippet_cpu": []}
for _ in range(rounds):
    start = time.process_time(); vectors = HashEmbedder().embed_normalized(texts)
    out["embed_cpu"].append(round(time.process_time() - start, 3))
    start = time.process_time(); snippets = [snippet(t, q) for t, q in pairs]
    out["snippet_cpu"].append(round(time.process_time() - start, 3))
out["vectors"] = hashlib.sha256(b"".join(quantize(v) + repr(v).encode() for v in vectors)).hexdigest()
out["snippets"] = hashlib.sha256("\0".join(snippets).encode()).hexdigest()
print(json.dumps(out))
"""


def run(checkout: Path, notes: Path, rounds: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(notes), str(CORPORA / "retrieval-hub.jsonl"), str(rounds)],
                          cwd=checkout, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", type=Path, required=True, help="another checkout of vaultsync")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        notes = clone("obsidian-help.bundle", Path(work) / "help")
        results = {"old": run(args.old.resolve(), notes, args.rounds), "new": run(REPO, notes, args.rounds)}
    for name, r in results.items():
        print(f"{name}: {r['texts']} notes embedded, CPU s per round {r['embed_cpu']}; "
              f"{r['pairs']} snippets, CPU s per round {r['snippet_cpu']}")
    same = {key: results["old"][key] == results["new"][key] for key in ("vectors", "snippets")}
    print(f"the same vectors: {same['vectors']}; the same snippets: {same['snippets']}")
    sys.exit(0 if all(same.values()) else 1)


if __name__ == "__main__":
    main()

"""Side by side: runs of ``bench_questions.py`` (old and new code, one embedder or another), set by set.

    .venv/bin/python benchmarks/compare_questions.py NAME=LABEL [NAME=LABEL ...] [--out questions_compare]

Each ``NAME`` is a results file (``benchmarks/results/NAME.json``); each row is one set and mode, each column
group one run: @1, @3, @10 and MRR@10.
"""

from __future__ import annotations

import argparse
import json

from common import RESULTS

LABELS = {"keyword": "keyword", "hybrid": "default", "vector": "vector"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="NAME=LABEL")
    parser.add_argument("--out", default="questions_compare")
    parser.add_argument("--modes", default="hybrid,keyword,vector")
    args = parser.parse_args()
    runs = [
        (label, json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))["results"])
        for name, label in (r.split("=", 1) for r in args.runs)
    ]
    sets = list(dict.fromkeys(s for _, res in runs for s in res))
    head = "| set | mode | " + " | ".join(f"{label} @1 / @3 / @10 / MRR@10" for label, _ in runs) + " |"
    lines = [head, "|---|---|" + "---|" * len(runs)]
    for set_name in sets:
        for mode in args.modes.split(","):
            cells = []
            for _, res in runs:
                r = res.get(set_name, {}).get(mode)
                cells.append(f"{r['@1']:.3f} / {r['@3']:.3f} / {r['@10']:.3f} / {r['mrr@10']:.3f}" if r else "–")
            if any(c != "–" for c in cells):
                n = next(res[set_name][mode]["n"] for _, res in runs if mode in res.get(set_name, {}))
                lines.append(f"| {set_name} ({n}) | {LABELS[mode]} | " + " | ".join(cells) + " |")
    md = "\n".join(lines) + "\n"
    (RESULTS / f"{args.out}.md").write_text(md, encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()

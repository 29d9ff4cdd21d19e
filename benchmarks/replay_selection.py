"""What a replay of every Nth commit of a corpus history keeps: states, and the renames and deletions of
notes between consecutive states as git sees them (``git diff -M100% --name-status``, Markdown files).

    python benchmarks/replay_selection.py [--bundle obsidian-help.bundle] [--every 8 12 16]

The figures behind tests/conftest.py's ``REPLAY_EVERY`` (the corpus is cloned at run time, never committed).
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from common import clone


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", default="obsidian-help.bundle")
    parser.add_argument("--every", type=int, nargs="+", default=[8, 12, 16])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = clone(args.bundle, Path(tmp) / "clone")
        commits = git(repo, "rev-list", "--first-parent", "--reverse", "HEAD").split()
        print(f"{args.bundle}: {len(commits)} first-parent commits")
        for every in args.every:
            chosen = commits[every - 1::every]
            if chosen[-1] != commits[-1]:
                chosen.append(commits[-1])  # replay_history.py always replays the last one
            renames = deletions = 0
            for a, b in zip(chosen, chosen[1:]):
                for line in git(repo, "diff", "-M100%", "--name-status", a, b, "--", "*.md").splitlines():
                    renames += line.startswith("R")
                    deletions += line.startswith("D")
            print(f"every {every}: {len(chosen)} states, {renames} renames, {deletions} deletions between them")


if __name__ == "__main__":
    main()

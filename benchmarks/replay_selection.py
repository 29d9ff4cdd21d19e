"""What a replay of every Nth commit of a corpus history keeps: states, the renames and deletions of notes
between consecutive states as git sees them (``git diff -M100% --name-status``, Markdown files), and the
Markdown paths each state changes (the whole tree for the first), all of them and those in ``--folders``.

    python benchmarks/replay_selection.py [--bundle obsidian-help.bundle] [--every 8 12 16] \
        [--folders "en,zh,ja,ko,ru,ar,th,km,Release notes,Sandbox"]

The figures behind tests/conftest.py's ``REPLAY_EVERY`` and ``REPLAY_FOLDERS`` (the corpus is cloned at run
time, never committed). The commits are chosen as replay_history.py ``--every N`` chooses them.
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
    parser.add_argument("--folders", default="all", help="top folders kept (comma-separated), as REPLAY_FOLDERS")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = clone(args.bundle, Path(tmp) / "clone")
        commits = git(repo, "rev-list", "--first-parent", "--reverse", "HEAD").split()
        print(f"{args.bundle}: {len(commits)} first-parent commits")
        for every in args.every:
            chosen = commits[::every]
            if chosen[-1] != commits[-1]:
                chosen.append(commits[-1])  # replay_history.py always replays the last one
            renames = deletions = 0
            for a, b in zip(chosen, chosen[1:]):
                for line in git(repo, "diff", "-M100%", "--name-status", a, b, "--", "*.md").splitlines():
                    renames += line.startswith("R")
                    deletions += line.startswith("D")
            changed = [git(repo, "ls-tree", "-r", "-z", "--name-only", chosen[0])]
            changed += [git(repo, "diff", "-z", "--name-only", a, b) for a, b in zip(chosen, chosen[1:])]
            paths = [p for out in changed for p in out.split("\0") if p.endswith(".md")]
            kept = sum(kept_path(p, args.folders) for p in paths)
            print(f"every {every}: {len(chosen)} states, {renames} renames, {deletions} deletions between them; "
                  f"{len(paths)} changed Markdown paths, {kept} of them in the kept folders")


def kept_path(path: str, folders: str) -> bool:
    """As tests/conftest.py's ``replayed_path``: a top-level note, a dot-folder's, or one in a kept folder."""
    top, _, rest = path.partition("/")
    return folders == "all" or not rest or top.startswith(".") or top in folders.split(",")


if __name__ == "__main__":
    main()

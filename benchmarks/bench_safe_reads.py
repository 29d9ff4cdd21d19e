"""What reading notes without following symlinks costs (issue 9): ``vaultfs.read_note`` (``openat``
with ``O_NOFOLLOW`` per path component, ``fstat`` re-check) against a plain ``open().read()``.

    .venv/bin/python benchmarks/bench_safe_reads.py [VAULT] [--rounds 3] [--no-save]

VAULT defaults to a clone of the Obsidian Hub corpus (made at run time in a temp folder). Every note
``scan`` finds is read both ways, ROUNDS times; the best round of each is printed with their ratio.
Results go to benchmarks/results/safe_reads.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vaultsync.disk import vaultfs
from vaultsync.disk.folder import MAX_FILE_BYTES, scan

ROOT = Path(__file__).resolve().parent.parent
HUB = ROOT.parent / "shared" / "corpora" / "obsidian-hub.bundle"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("vault", nargs="?")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.vault
        if root is None:
            root = os.path.join(tmp, "hub")
            subprocess.run(["git", "clone", "-q", str(HUB), root], check=True)
        root = os.path.realpath(root)
        found, _ = scan(Path(root))
        rels = [o.fs_path[len(root) + 1:] for o in found.values() if getattr(o, "fs_path", None)]
        plain, safe = [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            for rel in rels:
                with open(os.path.join(root, rel), "rb") as handle:
                    handle.read()
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            for rel in rels:
                vaultfs.read_note(root, rel, MAX_FILE_BYTES)
            safe.append(time.perf_counter() - started)
    best_plain, best_safe = min(plain), min(safe)
    line = (f"{len(rels)} notes: open().read() {best_plain * 1000:.0f} ms, vaultfs.read_note {best_safe * 1000:.0f} ms "
            f"(ratio {best_safe / best_plain:.2f}, {(best_safe - best_plain) / len(rels) * 1e6:.1f} µs more per note; "
            f"best of {args.rounds} rounds, one run)")
    print(line)
    if not args.no_save:
        out = ROOT / "benchmarks" / "results" / "safe_reads.md"
        out.write_text(f"# bench_safe_reads\n\n`{' '.join(['bench_safe_reads.py', *sys.argv[1:]])}`\n\n{line}\n",
                       encoding="utf-8")


if __name__ == "__main__":
    main()

"""Parsing the Hub at its newest commit with markdown-it's own link-destination code and with
``vaultsync/parsers/destinations.py``, back to back in one process; the parsed notes must be equal.

    .venv/bin/python benchmarks/bench_destinations.py [--work DIR] [--rounds 2]

The Hub bundle (../shared/corpora/obsidian-hub.bundle, read at run time, never copied) is cloned into --work.
Prints the CPU seconds of ``parse_note`` over every note, per round and way (the store-only path of
``bench_core_path.py`` is mostly this parse).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from markdown_it import helpers

from common import clone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "vaultsync-destinations")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    hub = clone("obsidian-hub.bundle", args.work / "obsidian-hub")

    from vaultsync.disk.folder import Present, decode, scan
    from vaultsync.parsers import parse_note
    from vaultsync.parsers.engine import MD

    found, _ = scan(hub)
    notes = [(decode(obs.read()), path) for path, obs in sorted(found.items()) if isinstance(obs, Present)]
    ours = MD.helpers, MD.normalizeLink
    first = None
    print(f"{len(notes)} notes, load average {os.getloadavg()[0]:.2f}")
    for n in range(1, args.rounds + 1):
        for way in ("markdown-it", "destinations.py"):
            if way == "markdown-it":
                MD.helpers = helpers
                del MD.normalizeLink
            else:
                MD.helpers, MD.normalizeLink = ours
            tick = time.process_time()
            parsed = [parse_note(text, path) for text, path in notes]
            spent = time.process_time() - tick
            if first is None:
                first = parsed
            elif parsed != first:
                raise SystemExit(f"round {n}, {way}: the parsed notes differ")
            print(f"round {n}  {way:<16} {spent:6.2f} CPU-s")
    print("parsed notes equal both ways")


if __name__ == "__main__":
    main()

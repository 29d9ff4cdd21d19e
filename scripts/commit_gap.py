"""How long after its ``known_at`` a large batch becomes visible to a reader.

The Obsidian Help vault at one commit (``../shared/corpora/obsidian-help.bundle``, cloned into a temporary folder)
is imported as one batch while another process polls for it every millisecond. Printed (JSON): the notes, how
long the writing took, and the gap from the batch's ``known_at`` to the first poll that saw it (a reader between
the two saw a state that ``--as-of`` would not answer afterwards).

    .venv/bin/python scripts/commit_gap.py [--commit REV] [--db postgresql://...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from vaultsync import Vault
from vaultsync.times import now_micros

POLL = """
import sys, time
from vaultsync.store import open_store
from vaultsync.times import now_micros
reader = open_store(sys.argv[1], readonly=True)
vault = reader.vault("help").id
print("ready", flush=True)
for _ in range(3_600_000):
    if reader.last_batch_id(vault):
        print(now_micros())
        break
    time.sleep(0.001)
"""
"""What the poller runs: the time it first sees a batch of the vault."""

BUNDLE = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "obsidian-help.bundle"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--commit", default="HEAD", help="the commit of the bundle to import (default: its last)")
    parser.add_argument("--db", help="a PostgreSQL connection string (default: a SQLite file in the temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "help"
        subprocess.run(["git", "clone", "-q", str(args.bundle), str(root)], check=True)
        subprocess.run(["git", "-C", str(root), "checkout", "-q", args.commit], check=True)
        db = args.db or str(Path(tmp) / "vaultsync.db")
        with Vault.open(db, root=root, name="help", embedder="hash") as vault:
            poller = subprocess.Popen(  # another process: nothing of this one's delays its polls
                [sys.executable, "-c", POLL, db], stdout=subprocess.PIPE, text=True
            )
            assert poller.stdout is not None and poller.stdout.readline() == "ready\n"
            began = now_micros()
            summary = vault.sync()
            returned = now_micros()
            seen = [int(poller.communicate(timeout=60)[0])]
        assert summary.known_at is not None and seen
        print(
            json.dumps(
                {
                    "engine": "postgres" if args.db else "sqlite",
                    "notes": summary.added,
                    "writing_s": round((returned - began) / 1e6, 2),
                    "stamp_after_writing_began_s": round((summary.known_at - began) / 1e6, 3),
                    "stamp_to_visible_ms": round((seen[0] - summary.known_at) / 1e3, 2),
                }
            )
        )


if __name__ == "__main__":
    sys.exit(main())

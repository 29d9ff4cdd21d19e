"""The import's writer alone: CPU seconds of writing already parsed notes into a store, every index attached.

    .venv/bin/python benchmarks/bench_import_writer.py [--rounds 3] [--work DIR]

The Hub bundle (../shared/corpora/obsidian-hub.bundle, read at run time, never copied) is cloned, every note
read and parsed once (not timed); then, per round, a fresh database takes (1) the whole vault as one batch
and (2) a second batch in which every other note has one more line (each of those notes ends its old rows
and writes new ones). Measured in this process with ``time.process_time``: the writer's CPU, free of
parsing and of parse workers, so two checkouts compare closely even on a loaded machine. Prints one JSON
line per round.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from vaultsync.disk.folder import scan
from vaultsync.parsers import parse_note
from vaultsync.store import Store
from vaultsync.sync import Plan

REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO.parent / "shared" / "corpora" / "obsidian-hub.bundle"


def parsed_changes(store: Store, vault_id: int, root: Path) -> list:
    found, errors = scan(root)
    plan = Plan(found, store.live_state(vault_id), store.file_states(vault_id), full=True, errors=errors,
                now_ns=time.time_ns() + 10**12)
    return [(change, parse_note(change.text, change.path)) for change in plan.changes()]


def write(store: Store, vault_id: int, notes: list, known_at: int) -> float:
    started = time.process_time()
    with store.batch(vault_id, known_at=known_at, source="import") as writer:
        for change, parsed in notes:
            writer.add_revision(change, parsed)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="vs-bench-writer-"))
    work.mkdir(parents=True, exist_ok=True)
    root = work / "obsidian-hub"
    if not (root / ".git").exists():
        subprocess.run(["git", "clone", "-q", str(BUNDLE), str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "checkout", "-q", "--", "."], check=True)
    for round_ in range(1, args.rounds + 1):
        db = work / "writer.db"
        for old in work.glob("writer.db*"):
            old.unlink()
        store = Store(str(db))
        vault_id = store.ensure_vault(root.name, root)
        first = parsed_changes(store, vault_id, root)
        load = [round(x, 2) for x in os.getloadavg()]
        whole = write(store, vault_id, first, 1_000_000)
        for path in sorted(root.rglob("*.md"))[::2]:
            if ".git" not in path.parts and not any(p.startswith(".") for p in path.relative_to(root).parts):
                with open(path, "a", encoding="utf-8") as out:
                    out.write("\nOne more line.\n")
        second = parsed_changes(store, vault_id, root)
        changed = write(store, vault_id, second, 2_000_000)
        store.close()
        subprocess.run(["git", "-C", str(root), "checkout", "-q", "--", "."], check=True)
        print(json.dumps({"round": round_, "notes": len(first), "changed": len(second), "whole_cpu": round(whole, 2),
                          "changed_cpu": round(changed, 2), "load": load}), flush=True)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

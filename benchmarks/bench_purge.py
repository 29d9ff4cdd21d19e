"""Purge of one string from the whole Obsidian Hub history imported with ``import --from-git``.

Usage: ``.venv/bin/python benchmarks/bench_purge.py [--db HUB.db] [--work DIR]``

Without ``--db``, the Hub bundle (../shared/corpora/obsidian-hub.bundle, read at run time, never
copied) is cloned and imported with ``--from-git`` first (several minutes). The database is copied,
then one string is purged from the copy: a 24-character piece of a note revision in the middle of
the history, chosen at run time (the text itself is never printed or saved). A second copy is only
VACUUMed, to tell the size the purge saves from what VACUUM alone gives back. Prints and saves
wall time and sizes to benchmarks/results/purge.{json,md}.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import clone, machine, save

from vaultsync.store import Store
from vaultsync.store.read import content, revision_by_id
from vaultsync.vault import Vault

MB = 2**20


def hub_db(work: Path) -> Path:
    db = work / "hub.db"
    if not db.exists():
        repo = clone("obsidian-hub.bundle", work / "obsidian-hub")
        subprocess.run([sys.executable, "-m", "vaultsync", "--db", str(db), "import", str(repo), "--from-git",
                        "--json"], check=True, stdout=subprocess.DEVNULL)
    return db


def copy(db: Path, to: Path) -> Path:
    for suffix in ("", "-wal"):
        if Path(str(db) + suffix).exists():
            shutil.copyfile(str(db) + suffix, str(to) + suffix)
    return to


def pick_string(db: Path) -> str:
    """A 24-character piece of a mid-history revision (letters and digits around it, no newline)."""
    store = Store(db, readonly=True)
    try:
        with store.db.atomic() as con:
            ids = [r[0] for r in con.execute("SELECT id FROM notes WHERE kind = 'modified' ORDER BY id")]
            for note_id in ids[len(ids) // 2:]:
                text = content(con, note_id)
                rev = revision_by_id(con, note_id)
                middle = text[len(text) // 2:len(text) // 2 + 24]
                if rev is not None and len(middle) == 24 and "\n" not in middle and middle.strip() == middle:
                    return middle
    finally:
        store.close()
    raise SystemExit("no revision to take a string from")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="a Hub database imported with --from-git (else one is built)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/vaultsync-bench-purge"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    source = args.db or hub_db(args.work)
    target = copy(source, args.work / "purge.db")
    baseline = copy(source, args.work / "vacuum.db")
    secret = pick_string(target)

    store = Store(baseline)
    started = time.perf_counter()
    store.scrub()
    vacuum_s = time.perf_counter() - started
    vacuumed = store.size()
    store.close()

    with Vault.open(target) as vault:
        stats = vault.stats().to_json()
        before = vault._store.size()
        started = time.perf_counter()
        result = vault.purge(texts=[secret], also_current=True).to_json()
        wall = time.perf_counter() - started
        problems = vault.check()

    payload = {
        "machine": machine(), "date": time.strftime("%Y-%m-%d"), "vault": "obsidian-hub (import --from-git)",
        "revisions": stats["revisions"], "batches": stats["batches"], "string_chars": len(secret),
        "wall_s": round(wall, 2), "revisions_changed": result["revisions_changed"],
        "revisions_removed": result["revisions_removed"], "notes": result["notes"],
        "dictionary_retrained": result["dictionary_retrained"], "scrubbed": result["scrubbed"],
        "db_bytes_before": before, "db_bytes_after": result["database_bytes_after"],
        "db_bytes_vacuum_only": vacuumed, "vacuum_only_s": round(vacuum_s, 2), "check_problems": len(problems),
    }
    markdown = (
        f"# Purge benchmark: one string from the Obsidian Hub history\n\n"
        f"`.venv/bin/python benchmarks/bench_purge.py` on {payload['date']}, {machine()['cpus']} CPUs (shared).\n\n"
        f"{stats['revisions']} revisions in {stats['batches']} batches (import --from-git). One {len(secret)}-character "
        f"string from a mid-history revision, purged with --also-current.\n\n"
        f"| | value |\n|---|---:|\n"
        f"| purge wall time (rewrite, search rebuild, VACUUM, WAL truncate) | {wall:.1f} s |\n"
        f"| revisions rewritten / merged away | {result['revisions_changed']} / {result['revisions_removed']} |\n"
        f"| notes affected | {result['notes']} |\n"
        f"| dictionary retrained | {result['dictionary_retrained']} |\n"
        f"| database before (file + WAL) | {before / MB:.1f} MB |\n"
        f"| database after purge | {result['database_bytes_after'] / MB:.1f} MB |\n"
        f"| the same database VACUUMed only (no purge) | {vacuumed / MB:.1f} MB in {vacuum_s:.1f} s |\n"
        f"| check after purge | {'ok' if not problems else f'{len(problems)} problems'} |\n"
    )
    save("purge", payload, markdown)


if __name__ == "__main__":
    main()

"""Import speed and database size with the search indexes (keyword FTS5 + int8 vectors) included.

    .venv/bin/python benchmarks/bench_index.py [--work /tmp/vs-index] [--history]

Hub at HEAD: parse-alone time (read + parse every note), import without search indexes, import with
them; database size against the Markdown bytes. With ``--history``: the hub's whole git history
(``import --from-git``) the same three ways.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from common import clone, machine, save
from vaultsync.gitimport import GitHistory
from vaultsync.parsers import parse_note
from vaultsync.disk.folder import Present, scan
from vaultsync.vault import Vault


def size(db: Path) -> int:
    return sum(os.path.getsize(p) for p in (db, Path(f"{db}-wal")) if p.exists())


def dbstat(db: Path) -> dict[str, int]:
    with Vault.open(db, readonly=True) as vault:
        rows = vault._store.db.query("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
    search = sum(b for n, b in rows if n.startswith("search_") or n.startswith("sqlite_autoindex_search"))
    return {"search_index_bytes": search, "core_bytes": sum(b for _, b in rows) - search}


def parse_head(root: Path) -> float:
    started = time.perf_counter()
    observed, _ = scan(root)
    for path, obs in observed.items():
        if isinstance(obs, Present):
            parse_note(obs.read().decode("utf-8"), path)
    return time.perf_counter() - started


def parse_history(root: Path) -> float:
    history = GitHistory(root)
    started = time.perf_counter()
    parent = None
    for commit in history.commits():
        observed = history.tree(commit.sha) if parent is None else history.changes(parent, commit.sha)
        for path, obs in observed.items():
            if isinstance(obs, Present):
                parse_note(obs.read().decode("utf-8"), path)
        parent = commit.sha
    history.close()
    return time.perf_counter() - started


def import_once(db: Path, root: Path, *, indexed: bool, history: bool) -> float:
    if db.exists():
        db.unlink()
    for extra in (Path(f"{db}-wal"), Path(f"{db}-shm")):
        extra.unlink(missing_ok=True)
    started = time.perf_counter()
    with Vault.open(db, root=root, name="hub") as vault:
        if not indexed:
            vault._store.indexers.clear()
        if history:
            vault.import_git()
        else:
            vault.sync(known_at="2026-06-01")
    elapsed = time.perf_counter() - started
    with Vault.open(db, name="hub") as vault:  # checkpoint the WAL so the file size is the database
        vault._store.db.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vs-index"))
    parser.add_argument("--history", action="store_true")
    parser.add_argument("--out", default="index_size_speed", help="results file name (benchmarks/results/OUT.json)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    root = clone("obsidian-hub.bundle", args.work / "hub")
    md = sum(p.stat().st_size for p in root.rglob("*.md") if not {".git", ".github"} & set(p.parts))
    out: dict = {"markdown_bytes_head": md, "machine": machine()}
    runs = [("head", False)] + ([("history", True)] if args.history else [])
    for name, history in runs:
        parse_s = parse_history(root) if history else parse_head(root)
        core_db, full_db = args.work / f"{name}-core.db", args.work / f"{name}-indexed.db"
        core_s = import_once(core_db, root, indexed=False, history=history)
        full_s = import_once(full_db, root, indexed=True, history=history)
        out[name] = {"parse_alone_s": round(parse_s, 1), "import_core_only_s": round(core_s, 1),
                     "import_with_search_s": round(full_s, 1), "ratio_to_parse": round(full_s / parse_s, 2),
                     "db_core_only_bytes": size(core_db), "db_with_search_bytes": size(full_db), **dbstat(full_db)}
        shutil.rmtree(args.work / "unused", ignore_errors=True)
    lines = ["| | parse alone | import, core only | import with search | ratio | DB core only | DB with search | of which search |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, _ in runs:
        r = out[name]
        lines.append(f"| hub {name} | {r['parse_alone_s']} s | {r['import_core_only_s']} s | {r['import_with_search_s']} s "
                     f"| {r['ratio_to_parse']}× | {r['db_core_only_bytes'] / 1e6:.1f} MB | {r['db_with_search_bytes'] / 1e6:.1f} MB "
                     f"| {r['search_index_bytes'] / 1e6:.1f} MB |")
    text = (f"Import speed and size with the search indexes (hub Markdown at HEAD: {md / 1e6:.1f} MB; "
            f"5× is {5 * md / 1e6:.0f} MB)\n\n" + "\n".join(lines) + "\n")
    save(args.out, out, text)


if __name__ == "__main__":
    main()

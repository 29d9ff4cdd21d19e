"""Import speed, memory and database size: parse alone, a full import, the import without search indexing, a
re-import with nothing changed, and ``import --from-git`` of the whole history.

Vault: the Obsidian Hub (../shared/corpora/obsidian-hub.bundle, cloned at run time) at its newest commit; quick: the
sample vault, made a git repository of two commits for the ``--from-git`` step. Every step runs in a fresh child
process: its wall and CPU seconds (the child and the parse workers it waited for: ``os.wait4``) and peak RSS.

Targets on a 2-core machine: import <= 2x parse-only; no-change re-import < 1 s; peak memory < 300 MB; database
<= 3x the Markdown bytes after the import; <= half of the distinct file versions' bytes after ``--from-git``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import Figures
from benchmarks.inputs import child, db_bytes, git_vault, markdown_bytes, vault_for, vaultsync, workdir

MB = 1e6

PARSE_ONLY = """
import json, sys, time
from pathlib import Path
from vaultsync.parsers import parse_note
from vaultsync.disk.folder import Present, decode, scan
started = time.perf_counter()
found, errors = scan(Path(sys.argv[1]))
notes = chunks = size = 0
for path, obs in sorted(found.items()):
    if isinstance(obs, Present):
        data = obs.read()
        parsed = parse_note(decode(data), path)
        notes, chunks, size = notes + 1, chunks + len(parsed.chunks), size + len(data)
print(json.dumps({"seconds": time.perf_counter() - started, "notes": notes, "chunks": chunks, "bytes": size}))
"""

CORE_ONLY = """
import json, sys, time
from pathlib import Path
from vaultsync.disk.folder import scan
from vaultsync.store import Store
from vaultsync.sync import Plan, write_plan
started = time.perf_counter()
root, store = Path(sys.argv[1]), Store(sys.argv[2], search=False)  # the revision tables alone, unlike Vault
vault_id = store.ensure_vault(root.name, root)
found, errors = scan(root)
plan = Plan(found, store.live_state(vault_id), store.file_states(vault_id), full=True, errors=errors)
summary = write_plan(store, vault_id, root.name, plan)  # parsed in line, as before parse workers existed
store.close()
print(json.dumps({"seconds": time.perf_counter() - started, "added": summary.added}))
"""

CORE_TABLES = ("vaults", "batches", "texts", "blobs", "notes", "note_ends", "chunks", "git_commits", "file_state")


def split_bytes(db: Path) -> dict[str, Any]:
    """Bytes per table (with its indexes) from SQLite's dbstat, grouped into core store and the rest (search)."""
    import apsw

    con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        owner = {name: table for name, table in con.execute("SELECT name, tbl_name FROM sqlite_schema")}
        tables: dict[str, int] = {}
        for name, size in con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            tables[table] = tables.get(table, 0) + size
    finally:
        con.close()
    core = sum(size for table, size in tables.items() if table in CORE_TABLES or table.startswith("sqlite_"))
    return {
        "core_bytes": core,
        "other_bytes": sum(tables.values()) - core,
        "tables": dict(sorted(tables.items(), key=lambda item: -item[1])),
    }


def distinct_versions(clone: Path) -> dict[str, Any]:
    """Distinct .md blobs of the first-parent history (all paths / paths Obsidian shows) and their bytes."""
    log = subprocess.run(
        [
            "git",
            "-C",
            str(clone),
            "log",
            "--first-parent",
            "--no-renames",
            "-z",
            "--raw",
            "--no-abbrev",
            "--format=",
            "HEAD",
        ],
        capture_output=True,
        check=True,
    ).stdout
    fields = log.split(b"\0")
    shown: set[str] = set()
    every: set[str] = set()
    for meta, path in zip(fields[0::2], fields[1::2]):
        meta = meta.strip()
        if not meta.startswith(b":") or not path.endswith(b".md"):
            continue
        sha = meta.split()[3].decode()
        if set(sha) == {"0"}:
            continue
        every.add(sha)
        if not any(part.startswith(b".") for part in path.split(b"/")):
            shown.add(sha)
    check = subprocess.run(
        ["git", "-C", str(clone), "cat-file", "--batch-check=%(objectname) %(objectsize)"],
        input="\n".join(sorted(every)).encode(),
        capture_output=True,
        check=True,
    ).stdout
    sizes = {sha: int(size) for sha, size in (line.split() for line in check.decode().splitlines())}
    return {
        "blobs": len(every),
        "bytes": sum(sizes.values()),
        "shown_blobs": len(shown),
        "shown_bytes": sum(sizes[s] for s in shown),
    }


def _step(prefix: str, result: dict[str, Any]) -> Figures:
    return {
        f"{prefix}_s": result["seconds"],
        f"{prefix}_cpu_s": result["cpu_seconds"],
        f"{prefix}_peak_rss_mb": result["peak_rss_mb"],
    }


def run(quick: bool) -> Figures:
    with workdir("import") as work:
        root = git_vault(work / "notes") if quick else vault_for(quick, work)
        head_db, git_db, core_db = work / "db" / "head.db", work / "db" / "git.db", work / "db" / "core.db"
        head_db.parent.mkdir()
        figures: Figures = {"markdown_mb": round(markdown_bytes(root) / MB, 2)}
        parse = child([sys.executable, "-c", PARSE_ONLY, str(root)])
        counted = json.loads(parse["stdout"])
        figures.update(notes=counted["notes"], chunks=counted["chunks"], **_step("parse_only", parse))
        if not quick:
            time.sleep(2.5)  # let the clone's files age past the re-hash window for the no-change run
        full = child(vaultsync("--db", str(head_db), "import", str(root), "--json"))
        figures.update(
            _step("import", full),
            import_over_parse=round(full["seconds"] / max(parse["seconds"], 1e-9), 2),
            db_mb=round(db_bytes(head_db) / MB, 2),
        )
        figures["db_over_markdown"] = round(db_bytes(head_db) / max(markdown_bytes(root), 1), 2)
        split = split_bytes(head_db)
        figures.update(db_core_mb=round(split["core_bytes"] / MB, 2), db_search_mb=round(split["other_bytes"] / MB, 2))
        core = child([sys.executable, "-c", CORE_ONLY, str(root), str(core_db)])
        figures.update(_step("import_core_only", core), core_db_mb=round(db_bytes(core_db) / MB, 2))
        again = child(vaultsync("--db", str(head_db), "import", str(root), "--json"))
        figures.update(_step("reimport_no_change", again))
        versions = distinct_versions(root)
        backfill = child(vaultsync("--db", str(git_db), "import", str(root), "--from-git", "--json"))
        figures.update(
            _step("from_git", backfill),
            from_git_commits=json.loads(backfill["stdout"]).get("commits"),
            from_git_db_mb=round(db_bytes(git_db) / MB, 2),
            distinct_versions=versions["blobs"],
            from_git_db_over_versions=round(db_bytes(git_db) / max(versions["bytes"], 1), 3),
        )
    return figures

"""Import speed, memory and database size on the Obsidian Hub vault (issue 2's "Speed" targets).

    .venv/bin/python benchmarks/bench_import.py [--work DIR] [--skip-git] [--no-save] [--json FILE]

The Hub bundle (../shared/corpora/obsidian-hub.bundle, read at run time, never copied) is cloned to a
temporary folder. Every measurement runs in a fresh child process; its peak memory is that child's
maximum resident set size and its CPU time that of the child and every process it waited for (its
parse workers), both from ``os.wait4`` rusage:

1. parse only: list the vault as import does, read every note and ``parse_note`` it (no store);
2. full import of the newest commit into an empty database (``vaultsync import``), and for
   information the same batch path without the search indexers attached (library call);
3. the same import again with nothing changed;
4. ``vaultsync import --from-git`` of the whole first-parent history into another empty database.

Targets on a 2-core machine: import <= 2x parse-only; no-change re-import < 1 s; peak memory < 300 MB;
database <= 3x the Markdown bytes after (2); <= half of the distinct file versions' bytes after (4).
Results go to benchmarks/results/import.json and import.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO.parent / "shared" / "corpora" / "obsidian-hub.bundle"
RESULTS = REPO / "benchmarks" / "results"
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


def run_child(args: list[str], cwd: Path | None = None) -> dict[str, Any]:
    """Run a child process to completion: wall seconds, its own peak RSS (MB), exit status, stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{stderr[-3000:]}")
    return {"seconds": round(wall, 3), "peak_rss_mb": round(usage.ru_maxrss * 1024 / MB, 1),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3), "stdout": stdout}


def vaultsync(db: Path, *args: str) -> dict[str, Any]:
    result = run_child([sys.executable, "-m", "vaultsync", "--db", str(db), *args])
    result["summary"] = json.loads(result.pop("stdout")) if "--json" in args else None
    return result


def db_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if not p.name.endswith(".lock"))


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
    return {"core_bytes": core, "other_bytes": sum(tables.values()) - core,
            "tables": dict(sorted(tables.items(), key=lambda item: -item[1]))}


def markdown_bytes(vault: Path) -> int:
    """Bytes of the notes import reads: .md files outside dot-folders."""
    total = 0
    for folder, dirs, files in os.walk(vault):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        total += sum(os.path.getsize(os.path.join(folder, f)) for f in files
                     if f.endswith(".md") and not f.startswith("."))
    return total


def distinct_versions(clone: Path) -> dict[str, Any]:
    """Distinct .md blobs of the first-parent history (all paths / paths Obsidian shows) and their bytes."""
    log = subprocess.run(["git", "-C", str(clone), "log", "--first-parent", "--no-renames", "-z", "--raw", "--no-abbrev",
                          "--format=", "HEAD"], capture_output=True, check=True).stdout
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
    check = subprocess.run(["git", "-C", str(clone), "cat-file", "--batch-check=%(objectname) %(objectsize)"],
                           input="\n".join(sorted(every)).encode(), capture_output=True, check=True).stdout
    sizes = {sha: int(size) for sha, size in (line.split() for line in check.decode().splitlines())}
    return {"blobs": len(every), "bytes": sum(sizes.values()),
            "shown_blobs": len(shown), "shown_bytes": sum(sizes[s] for s in shown)}


def machine() -> dict[str, Any]:
    import apsw

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    return {"python": platform.python_version(), "sqlite": apsw.sqlite_lib_version(), "cpus": os.cpu_count(),
            "platform": platform.platform(), "load_average": [round(x, 2) for x in os.getloadavg()],
            "vaultsync_commit": commit, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def measure(work: Path, skip_git: bool) -> dict[str, Any]:
    clone = work / "obsidian-hub"
    if not (clone / ".git").exists():
        subprocess.run(["git", "clone", "-q", str(BUNDLE), str(clone)], check=True)
    head_db, git_db = work / "db" / "head.db", work / "db" / "git.db"
    for db in (head_db, git_db):
        for old in db.parent.glob(db.name + "*"):
            old.unlink()
    results: dict[str, Any] = {"machine": machine(), "vault": "obsidian-hub", "markdown_bytes": markdown_bytes(clone)}

    parse = run_child([sys.executable, "-c", PARSE_ONLY, str(clone)])
    parse.update(json.loads(parse.pop("stdout")))
    results["parse_only"] = parse
    print(f"parse only: {parse['notes']} notes, {parse['seconds']:.2f} s", file=sys.stderr)

    time.sleep(2.5)  # let the clone's files age past the re-hash window for the no-change run
    full = vaultsync(head_db, "import", str(clone), "--json")
    full["db_bytes"] = db_bytes(head_db)
    full["split"] = split_bytes(head_db)
    results["import"] = full
    print(f"import: {full['seconds']:.2f} s", file=sys.stderr)

    core_db = work / "db" / "core.db"
    for old in core_db.parent.glob(core_db.name + "*"):
        old.unlink()
    core = run_child([sys.executable, "-c", CORE_ONLY, str(clone), str(core_db)])
    core.update(json.loads(core.pop("stdout")))
    core["db_bytes"] = db_bytes(core_db)
    results["import_core_only"] = core
    print(f"import without search indexing: {core['seconds']:.2f} s", file=sys.stderr)

    again = vaultsync(head_db, "import", str(clone), "--json")
    results["reimport_no_change"] = again
    print(f"re-import: {again['seconds']:.2f} s", file=sys.stderr)

    results["targets"] = {
        "import_over_parse": round(full["seconds"] / parse["seconds"], 2),
        "import_over_parse_max": 2.0,
        "reimport_seconds_max": 1.0,
        "peak_rss_mb_max": 300,
        "db_over_markdown": round(full["db_bytes"] / results["markdown_bytes"], 2),
        "db_over_markdown_max": 3.0,
    }
    if not skip_git:
        versions = distinct_versions(clone)
        backfill = vaultsync(git_db, "import", str(clone), "--from-git", "--json")
        backfill["db_bytes"] = db_bytes(git_db)
        backfill["split"] = split_bytes(git_db)
        results["distinct_versions"] = versions
        results["from_git"] = backfill
        results["targets"]["git_db_over_versions"] = round(backfill["db_bytes"] / versions["bytes"], 3)
        results["targets"]["git_db_over_versions_max"] = 0.5
        print(f"--from-git: {backfill['seconds']:.2f} s", file=sys.stderr)
    return results


def table(r: dict[str, Any]) -> str:
    t = r["targets"]
    ok = lambda good: "yes" if good else "**no**"  # noqa: E731
    full, again, parse = r["import"], r["reimport_no_change"], r["parse_only"]
    rows = [
        ("parse only (read + parse_note)", f"{parse['seconds']:.2f} s", f"{parse['peak_rss_mb']:.0f} MB",
         f"{parse['notes']} notes, {parse['chunks']} chunks", ""),
        ("full import (newest commit)", f"{full['seconds']:.2f} s", f"{full['peak_rss_mb']:.0f} MB",
         f"{t['import_over_parse']}x parse (target <= 2x)",
         ok(t["import_over_parse"] <= 2 and full["peak_rss_mb"] < 300)),
        ("import without search indexing (library)", f"{r['import_core_only']['seconds']:.2f} s",
         f"{r['import_core_only']['peak_rss_mb']:.0f} MB",
         f"{r['import_core_only']['seconds'] / parse['seconds']:.2f}x parse; "
         f"database {r['import_core_only']['db_bytes'] / MB:.1f} MB", "(information)"),
        ("re-import, nothing changed", f"{again['seconds']:.2f} s", f"{again['peak_rss_mb']:.0f} MB", "target < 1 s",
         ok(again["seconds"] < 1 and again["peak_rss_mb"] < 300)),
        ("database after import", f"{full['db_bytes'] / MB:.1f} MB", "",
         f"{t['db_over_markdown']}x {r['markdown_bytes'] / MB:.1f} MB of Markdown (target <= 3x); core tables "
         f"{full['split']['core_bytes'] / MB:.1f} MB, search {full['split']['other_bytes'] / MB:.1f} MB",
         ok(t["db_over_markdown"] <= 3)),
    ]
    if "from_git" in r:
        g, v = r["from_git"], r["distinct_versions"]
        rows += [
            (f"import --from-git ({g['summary']['commits']} commits)", f"{g['seconds']:.2f} s",
             f"{g['peak_rss_mb']:.0f} MB", "", ok(g["peak_rss_mb"] < 300)),
            ("database after --from-git", f"{g['db_bytes'] / MB:.1f} MB", "",
             f"{t['git_db_over_versions']}x {v['bytes'] / MB:.1f} MB of {v['blobs']} distinct versions "
             f"(target <= 0.5x); core tables {g['split']['core_bytes'] / MB:.1f} MB, "
             f"search {g['split']['other_bytes'] / MB:.1f} MB", ok(t["git_db_over_versions"] <= 0.5)),
        ]
    cpu = {0: parse, 1: full, 2: r["import_core_only"], 3: again}
    rows = [(name, value, f"{cpu[i]['cpu_seconds']:.2f} s" if i in cpu else "", *rest)
            for i, (name, value, *rest) in enumerate(rows)]
    lines = ["| step | time / size | CPU, process tree | peak memory | note | target met |",
             "| --- | ---: | ---: | ---: | --- | --- |"]
    lines += [f"| {' | '.join(row)} |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="working folder (default: a temporary one, removed afterwards)")
    parser.add_argument("--skip-git", action="store_true", help="skip the --from-git backfill")
    parser.add_argument("--no-save", action="store_true", help="print only; do not write benchmarks/results")
    parser.add_argument("--json", type=Path, help="also write the raw results to this file")
    args = parser.parse_args()
    if not BUNDLE.exists():
        raise SystemExit(f"{BUNDLE} not found")
    work = args.work or Path(tempfile.mkdtemp(prefix="vs-bench-import-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = measure(work, args.skip_git)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    text = table(results)
    print(text)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if not args.no_save:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "import.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        m = results["machine"]
        (RESULTS / "import.md").write_text(
            f"# Import benchmark: Obsidian Hub\n\n`.venv/bin/python benchmarks/bench_import.py` on {m['date']}, "
            f"vaultsync {m['vaultsync_commit']}, Python {m['python']}, SQLite {m['sqlite']}, {m['cpus']} CPUs "
            f"(load average at start {m['load_average'][0]}).\n\n{text}\n", encoding="utf-8")


if __name__ == "__main__":
    main()

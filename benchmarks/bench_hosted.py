"""Hosted speed: the deployment of ``examples/hosted`` (tests/support/hosted.py) on the Hub's whole history, with
``search_notes`` through nginx (TLS) by clients holding OAuth access tokens from a real authorization server.

Set-up, the same for PostgreSQL and for SQLite: the Hub history imported once with ``import --from-git`` into a
SQLite file (reused from the work folder, ``$VAULTSYNC_BENCH_WORK/hosted``, default /tmp/vs-bench/hosted) and copied
once into a PostgreSQL 18 database (``vaultsync copy``, then ``VACUUM (ANALYZE)``; the cluster is kept in the work
folder's ``pg/`` and reused while its ``copied.json`` names the same history and schema, so a run after the first
only measures), four ``vaultsync serve --manifest``
processes (the example manifest, the vault ``hub`` readable by any subject) behind the example nginx site, and
oidc-provider issuing JWT access tokens. Sixteen official MCP clients each sign in (authorization code + PKCE, DCR)
and open one session (protocol 2026: stateless, so nginx spreads every request).

- **Open loop**: 10 requests/s offered in all (request k leaves at k/10 s, from client k mod 16, whatever came back
  before), for 30 s: ``search_notes`` (its default mode) over the first 100 Hub queries, now and as of the middle
  commit, and in keyword mode now; then the same offered load with common words alone (``the``, ``and``,
  ``note`` …). Latency is counted from the moment a request was due, so a queue shows.
- **Most requests/s**: the 16 clients calling back to back for 20 s (closed loop): requests/s, p50/p95, and CPU
  seconds per request in the four servers, in PostgreSQL (the postmaster, its backends and those that exited) and in
  nginx.

Quick (inside ``make test``): the sample vault as a git history of two commits, one server, two clients, 1 s per
phase. The machine's other load is recorded by the harness (load average before and after).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, summary_ms

sys.path.insert(0, str(REPO / "tests"))
COMMON_WORDS = ["the", "and", "note", "notes", "plugin", "obsidian", "how to", "a new file", "with the", "is"]
GRANTS = {"hub": {"read": ["*"]}}


def cpu_of(pids: list[int], *, with_children: bool = False) -> float:
    """CPU seconds (user + system) of these processes; ``with_children``: their live children too, and what their
    children that exited used (the postmaster's backends)."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            times = proc.cpu_times()
            total += times.user + times.system
            if with_children:
                total += times.children_user + times.children_system
                for child in proc.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        ct = child.cpu_times()
                        total += ct.user + ct.system
        except psutil.Error:
            pass
    return total


async def sign_in(urls: list[str], count: int, verify: Any) -> tuple[contextlib.AsyncExitStack, list[Any]]:
    """``count`` official clients, each through the OAuth flow as its own subject, client i on ``urls[i % n]``."""
    from mcp import Client
    from support.oidc import Browser, oauth_client

    stack = contextlib.AsyncExitStack()
    sessions = []
    for i in range(count):
        browser = Browser(f"reader{i:02d}", verify=verify)
        transport = oauth_client(urls[i % len(urls)], browser, verify=verify, client_name=f"bench client {i}")
        sessions.append(await stack.enter_async_context(Client(transport)))
    return stack, sessions


async def call(session: Any, query: str, as_of: str | None, mode: str | None = None) -> None:
    args: dict[str, Any] = {"query": query}
    if as_of is not None:
        args["as_of"] = as_of
    if mode is not None:
        args["mode"] = mode
    result = await session.call_tool("search_notes", args)
    assert not result.is_error, result.content


async def open_loop(
    sessions: list[Any], queries: list[str], rate: float, seconds: float, as_of: str | None, mode: str | None = None
) -> dict:
    """``rate`` requests/s offered for ``seconds``: request k due at k/rate, from session k mod n; each latency from
    its due time to its answer."""
    took: list[float] = []
    failed = 0
    start = time.perf_counter()

    async def one(k: int, due: float) -> None:
        nonlocal failed
        try:
            await call(sessions[k % len(sessions)], queries[k % len(queries)], as_of, mode)
            took.append((time.perf_counter() - due) * 1000.0)
        except Exception:
            failed += 1

    tasks = []
    for k in range(int(rate * seconds)):
        due = start + k / rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        tasks.append(asyncio.create_task(one(k, due)))
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - start
    return {"offered_per_s": rate, "answered_per_s": round(len(took) / wall, 2), "failed": failed, **summary_ms(took)}


async def closed_loop(sessions: list[Any], queries: list[str], seconds: float, pids: dict[str, list[int]]) -> dict:
    """Every session calling back to back for ``seconds``: requests/s, latency and CPU per request by role."""
    took: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def one(i: int) -> None:
        k = i
        while time.perf_counter() < stop_at:
            begun = time.perf_counter()
            await call(sessions[i], queries[k % len(queries)], None)
            took.append((time.perf_counter() - begun) * 1000.0)
            k += len(sessions)

    before = {role: cpu_of(p, with_children=role != "servers") for role, p in pids.items()}
    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(len(sessions))))
    wall = time.perf_counter() - start
    used = {role: cpu_of(p, with_children=role != "servers") - before[role] for role, p in pids.items()}
    done = max(len(took), 1)
    per = {f"cpu_ms_per_request_{role}": round(1000.0 * s / done, 2) for role, s in used.items()}
    return {"requests_per_s": round(len(took) / wall, 1), **summary_ms(took), **per}


async def drive(deployment: Any, sizes: dict[str, Any], queries: list[str], past: str, pids: dict) -> dict[str, Any]:
    verify = deployment.ca.context()
    stack, sessions = await sign_in([deployment.url("hub")], sizes["clients"], verify)
    async with stack:
        for i, session in enumerate(sessions):  # warm every server's caches a little, outside the figures
            await call(session, queries[i % len(queries)], None)
        rate, seconds = sizes["rate"], sizes["seconds"]
        out = {
            "now": await open_loop(sessions, queries, rate, seconds, None),
            "past": await open_loop(sessions, queries, rate, seconds, past),
            "now_keyword": await open_loop(sessions, queries, rate, seconds, None, "keyword"),
            "common_words": await open_loop(sessions, COMMON_WORDS, rate, seconds, None),
            "most": await closed_loop(sessions, queries, sizes["saturate_s"], pids),
        }
    return out


def copy_inputs(sqlite_db: Path) -> dict[str, Any]:
    """What a kept PostgreSQL copy was made from: the SQLite store's history (its batches, revisions, notes and last
    batch: the servers that read it may checkpoint its file, so not the file's size or time) and the schema this
    vaultsync writes; a copy made from other inputs is made again."""
    from vaultsync.store.pg.schema import MIGRATIONS
    from vaultsync.vault import Vault

    with Vault.open(str(sqlite_db), name="hub", readonly=True) as vault:
        stats = vault.stats().to_json()
    return {
        "sqlite": str(sqlite_db),
        **{key: stats[key] for key in ("batches", "revisions", "notes", "first_batch", "last_batch")},
        "pg_schema": len(MIGRATIONS),
    }


def postgres_copy(work: Path, sqlite_db: Path, quick: bool) -> tuple[Any, str]:
    """A PostgreSQL server holding the Hub history (copied from ``sqlite_db`` once; for full runs the cluster is kept in
    ``work/pg`` and reused while ``work/pg/copied.json`` says it was copied whole from the same inputs: stop it with
    ``keep=True``) and its connection string."""
    import pgserver  # tests/support/pgserver.py
    import psycopg

    options = ("-c", f"shared_buffers={'32MB' if quick else '256MB'}", "-c", "max_wal_size=256MB")
    if quick:
        server = pgserver.PgServer.start(options=options)
        dsn = server.fresh_database("hub")
    else:
        folder, inputs = work / "pg", copy_inputs(sqlite_db)
        marker = folder / "copied.json"
        if marker.exists() and (folder / "data" / "PG_VERSION").exists() and json.loads(marker.read_text()) == inputs:
            server = pgserver.PgServer.start(folder, data=folder / "data", options=options)
            print(f"reusing the PostgreSQL copy in {folder}", file=sys.stderr, flush=True)
            return server, server.dsn("hub")
        shutil.rmtree(folder, ignore_errors=True)  # none, another input's, or a copy that never finished
        folder.mkdir(parents=True)
        pgserver._give(folder)
        server = pgserver.PgServer.start(folder, options=options)
        dsn = server.dsn("hub")
        with psycopg.connect(server.dsn("postgres"), autocommit=True) as con:
            con.execute("CREATE DATABASE hub TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'")
    vaultsync = Path(sys.executable).parent / "vaultsync"
    begun = time.perf_counter()
    subprocess.run([str(vaultsync), "copy", str(sqlite_db), dsn], check=True, capture_output=True, text=True)
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("VACUUM (ANALYZE)")
        con.execute("CHECKPOINT")
    if not quick:
        marker.write_text(json.dumps(inputs, indent=1) + "\n")
        took = time.perf_counter() - begun
        print(f"copied the Hub history into PostgreSQL in {took:.0f} s ({folder})", file=sys.stderr, flush=True)
    return server, dsn


def run(quick: bool) -> dict[str, Any]:
    """The harness's entry (see the module's text): PostgreSQL and SQLite, four servers, 16 clients, 10 requests/s
    offered; quick: the sample vault, one server, two clients, 1 s per phase."""
    from benchmarks.harness import flatten
    from benchmarks.inputs import QUICK_QUERIES, Unavailable, bench_work, git_vault, history_db, hub_queries, workdir

    if importlib.util.find_spec("psycopg") is None or importlib.util.find_spec("psutil") is None:
        raise Unavailable("the hosted benchmark needs the postgres extra (pip install -e '.[postgres]') and psutil")
    sys.path.insert(0, str(REPO / "tests" / "support"))
    from support.oidc import issuer_missing
    from support.tls_proxy import nginx_binary

    if (reason := issuer_missing()) or (reason := None if nginx_binary() else "nginx not found (make deps)"):
        raise Unavailable(f"the hosted benchmark needs its authorization server and nginx: {reason}")
    from support.hosted import Deployment
    from support.oidc import start_issuer
    from support.tls_proxy import LocalCA

    from vaultsync.vault import Vault

    with workdir("hosted") as tmp:
        if quick:
            root = git_vault(tmp / "hub")
            sqlite_db = tmp / "hub.db"
            with Vault.open(sqlite_db, root=root, name="hub") as vault:
                vault.import_git()
            queries = QUICK_QUERIES[:5]
            sizes = {"servers": 1, "clients": 2, "rate": 10.0, "seconds": 1.0, "saturate_s": 1.0}
            work = tmp
        else:
            work = bench_work("hosted")
            root, sqlite_db, _ = history_db(work, "hub")
            queries = hub_queries(100)
            sizes = {"servers": 4, "clients": 16, "rate": 10.0, "seconds": 30.0, "saturate_s": 20.0}
        with Vault.open(str(sqlite_db), name="hub", readonly=True) as vault:
            times = [known_at for known_at, _ in vault.timeline()]
        past = datetime.datetime.fromtimestamp(times[len(times) // 2] / 1e6, tz=datetime.UTC).isoformat()
        pg, dsn = postgres_copy(work, sqlite_db, quick)
        results: dict[str, Any] = {"servers": sizes["servers"], "clients": sizes["clients"], "queries": len(queries)}
        ca = LocalCA.create(tmp / "tls")
        issuer = start_issuer(tmp / "issuer.log")
        try:
            for engine, db in (("postgres", dsn), ("sqlite", str(sqlite_db))):
                with Deployment.start(
                    tmp / engine, db, {"hub": root}, GRANTS, servers=sizes["servers"], watch=False, ca=ca, issuer=issuer
                ) as deployment:
                    pids = {
                        "servers": [p.pid for p, _ in deployment.servers],
                        "nginx": [deployment.proxy.proc.pid],
                        **({"postgres": [pg.process.pid]} if engine == "postgres" else {}),
                    }
                    results[engine] = asyncio.run(drive(deployment, sizes, queries, past, pids))
                print(f"{engine}: {results[engine]}", file=sys.stderr, flush=True)
        finally:
            issuer.stop()
            pg.stop(keep=not quick)  # a full run keeps its copy of the Hub history for the next
    results["load_average_end"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return flatten(results)

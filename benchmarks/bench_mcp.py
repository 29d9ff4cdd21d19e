"""search_notes round-trip latency through the MCP server over stdio, now and at past dates.

    .venv/bin/python benchmarks/bench_mcp.py [--work /tmp/vs-bench-mcp] [--queries 100] [--corpus hub help] [--audit]

Each corpus (a git bundle in ../shared/corpora, read at run time) is cloned and its whole first-parent
history imported, one batch per commit at its committer time (the same states replay_history.py
replays). Then ``vaultsync serve`` runs as a real stdio subprocess and the official Python client
calls ``search_notes`` once per query and date; the time is the client-side round trip (JSON-RPC
over pipes, argument validation, the as-of search, result serialisation). Queries: the hub's
labelled retrieval queries; for help, note titles at HEAD (a fixed random sample).
Targets: p50 <= 50 ms now, <= 250 ms at a past date.

``--audit`` measures instead the cost of the hardened mode's audit log (and receipts, which a keystore
turns on): a plain server and one started with a manifest holding ``audit_log_path`` and
``keystore_path`` run side by side, calls alternating between them, ``search_notes`` now (2026-07-28
era, hybrid). Target: under 10% more at p50.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from common import history_db
from vaultsync.times import format_time
from vaultsync.vault import Vault

TARGET_NOW_MS, TARGET_PAST_MS = 50.0, 250.0
TARGET_AUDIT_INCREASE = 0.10
REPO = Path(__file__).resolve().parents[1]
CORPORA = REPO.parent / "shared" / "corpora"
RESULTS = REPO / "benchmarks" / "results"


def summary_ms(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    k = (len(ordered) - 1) * 0.95
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    p95 = ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)
    return {"n": len(values), "p50_ms": round(statistics.median(values), 2), "p95_ms": round(p95, 2)}


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def save(name: str, payload: dict[str, Any], markdown: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (RESULTS / f"{name}.md").write_text(markdown, encoding="utf-8")
    print(markdown)


def queries(name: str, db: Path, count: int) -> list[str]:
    rng = random.Random(5)
    if name == "hub":
        rows = [json.loads(line) for line in (CORPORA / "retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()]
        picked = [r["query"] for r in rows]
    else:
        with Vault.open(db, name=name, readonly=True) as vault:
            picked = sorted({r.title for r in vault.ls() if r.title})
    rng.shuffle(picked)
    return picked[:count]


def past_dates(info: dict[str, Any]) -> list[str]:
    """Three cutoffs at 25, 50 and 75 % of the history's span."""
    from vaultsync.times import parse_time

    first, last = parse_time(info["first_batch"]), parse_time(info["last_batch"])
    return [format_time(first + (last - first) * k // 4) for k in (1, 2, 3)]


async def measure(db: Path, root: Path, name: str, items: list[str], dates: list[str | None], era: str,
                  modes: tuple[str, ...]) -> dict[str, Any]:
    """Round trips through a real stdio server: {mode: {date: figures}}. Each call is preceded by the
    same search in-process through ``Vault.search`` (same moment, same load), so the difference of
    the two is what MCP and the pipe add."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "vaultsync", "--db", str(db), "serve", str(root)])
    out: dict[str, Any] = {}
    with Vault.open(db, name=name, readonly=True) as vault:
        async with Client(params, mode=era) as client:
            for query in items[:5]:  # warm caches and the embedder on both sides
                vault.search(query)
                await client.call_tool("search_notes", {"query": query})
            for mode in modes:
                for date in dates:
                    times, base, empty = [], [], 0
                    for query in items:
                        args: dict[str, Any] = {"query": query, "mode": mode}
                        if date is not None:
                            args["as_of"] = date
                        started = time.perf_counter()
                        vault.search(query, as_of=date, mode=mode)
                        base.append((time.perf_counter() - started) * 1000)
                        started = time.perf_counter()
                        result = await client.call_tool("search_notes", args)
                        times.append((time.perf_counter() - started) * 1000)
                        if result.is_error:
                            raise RuntimeError(result.content[0].text)
                        empty += not result.structured_content["hits"]
                    out.setdefault(mode, {})[date or "now"] = {
                        **summary_ms(times), "empty_results": empty, "direct": summary_ms(base),
                        "overhead_p50_ms": round(statistics.median(t - b for t, b in zip(times, base)), 2)}
    return out


def hardened(db: Path, root: Path, work: Path) -> tuple[StdioServerParameters, Path]:
    """A server through a manifest with an audit log and a keystore (a new log each run); the log's path."""
    import secrets

    folder = work / f"hardened-{int(time.time() * 1000)}"
    folder.mkdir(mode=0o700, parents=True)
    keystore = folder / "keys.toml"
    keystore.write_text(f'key_id = "bench"\nkey_hex = "{secrets.token_hex(32)}"\n', encoding="utf-8")
    keystore.chmod(0o600)
    log = folder / "audit.jsonl"
    manifest = folder / "manifest.toml"
    manifest.write_text(f"db_path = {json.dumps(str(db))}\naudit_log_path = {json.dumps(str(log))}\n"
                        f"keystore_path = {json.dumps(str(keystore))}\n", encoding="utf-8")
    manifest.chmod(0o600)
    return StdioServerParameters(command=sys.executable, args=["-m", "vaultsync", "serve", str(root), "--manifest",
                                                               str(manifest)]), log


async def measure_audit(db: Path, root: Path, items: list[str], work: Path) -> dict[str, Any]:
    """search_notes now through a plain server and an audited one, calls alternating: {"off", "on", ...}."""
    plain = StdioServerParameters(command=sys.executable, args=["-m", "vaultsync", "--db", str(db), "serve", str(root)])
    audited, log = hardened(db, root, work)
    times: dict[str, list[float]] = {"off": [], "on": []}
    async with Client(plain) as off, Client(audited) as on:
        clients = {"off": off, "on": on}
        for query in items[:5]:
            for client in clients.values():
                await client.call_tool("search_notes", {"query": query})
        for i, query in enumerate(items):
            for which in (("off", "on") if i % 2 == 0 else ("on", "off")):
                started = time.perf_counter()
                result = await clients[which].call_tool("search_notes", {"query": query})
                times[which].append((time.perf_counter() - started) * 1000)
                if result.is_error:
                    raise RuntimeError(result.content[0].text)
    records = len(log.read_text(encoding="utf-8").splitlines())
    off_p50, on_p50 = statistics.median(times["off"]), statistics.median(times["on"])
    return {"off": summary_ms(times["off"]), "on": summary_ms(times["on"]), "audit_records": records,
            "p50_increase": round(on_p50 / off_p50 - 1, 4)}


def main_audit(args: argparse.Namespace) -> None:
    payload: dict[str, Any] = {"machine": machine(), "queries": args.queries, "corpora": {}}
    lines = ["# search_notes over MCP stdio: the hardened mode's audit log and receipts, on vs off", "",
             f"Command: `.venv/bin/python benchmarks/bench_mcp.py --audit --queries {args.queries} --corpus "
             f"{' '.join(args.corpus)}`. A plain `vaultsync serve` and one started with a manifest holding "
             "`audit_log_path` and `keystore_path` (every call hash-chained, HMAC-signed, fsynced, its head moved "
             "in the store; receipts on every hit), side by side, calls alternating; `search_notes` now, "
             f"hybrid, 2026-07-28 era, after 5 warm-up calls each. Target: p50 under "
             f"{TARGET_AUDIT_INCREASE:.0%} more.", "",
             "| corpus | off p50 ms | on p50 ms | increase | off p95 ms | on p95 ms | records | target |",
             "|---|---|---|---|---|---|---|---|"]
    for name in args.corpus:
        root, db, info = history_db(args.work, name)
        items = queries(name, db, args.queries)
        fig = anyio.run(measure_audit, db, root, items, args.work)
        payload["corpora"][name] = {"history": info, "audit": fig}
        verdict = "met" if fig["p50_increase"] < TARGET_AUDIT_INCREASE else "MISSED"
        lines.append(f"| {name} ({info['notes']} notes) | {fig['off']['p50_ms']} | {fig['on']['p50_ms']} | "
                     f"{fig['p50_increase']:+.1%} | {fig['off']['p95_ms']} | {fig['on']['p95_ms']} | "
                     f"{fig['audit_records']} | {verdict} |")
    lines += ["", f"Machine: {payload['machine']}", ""]
    save("bench_mcp_audit" + ("" if len(args.corpus) > 1 else f"_{args.corpus[0]}"), payload, "\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vs-bench-mcp"))
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--corpus", nargs="+", default=["hub", "help"], choices=["hub", "help"])
    parser.add_argument("--audit", action="store_true", help="audit log and receipts on vs off (see above)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.audit:
        main_audit(args)
        return
    payload: dict[str, Any] = {"machine": machine(), "queries_per_date": args.queries, "corpora": {}}
    lines = ["# search_notes over MCP stdio: round-trip latency", "",
             f"Command: `.venv/bin/python benchmarks/bench_mcp.py --queries {args.queries} --corpus {' '.join(args.corpus)}`. "
             f"Client: official `mcp` Python client, a real `vaultsync serve` subprocess; {args.queries} queries per "
             f"date, each called once after 5 warm-up calls. Targets: p50 <= {TARGET_NOW_MS:g} ms now, "
             f"<= {TARGET_PAST_MS:g} ms at a past date.", "",
             "`direct p50` is the same query run in-process through `Vault.search` just before each call "
             "(no MCP, same moment); `overhead` is the median of the per-call differences: what the MCP layer, "
             "the JSON-RPC pipe and the client's schema validation add.", "",
             "| corpus | era | mode | as of | p50 ms | p95 ms | direct p50 ms | overhead ms | empty | target |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    modes = ("hybrid", "keyword")
    for name in args.corpus:
        root, db, info = history_db(args.work, name)
        items = queries(name, db, args.queries)
        dates: list[str | None] = [None, *past_dates(info)]
        results = {"2026-07-28": anyio.run(measure, db, root, name, items, dates, "2026-07-28", modes),
                   "legacy": anyio.run(measure, db, root, name, items, dates, "legacy", ("hybrid",))}
        payload["corpora"][name] = {"history": info, "latency": results}
        for era, per_mode in results.items():
            for mode, per_date in per_mode.items():
                for date, fig in per_date.items():
                    target = TARGET_NOW_MS if date == "now" else TARGET_PAST_MS
                    verdict = "met" if fig["p50_ms"] <= target else "MISSED"
                    lines.append(f"| {name} ({info['notes']} notes, {info['batches']} batches) | {era} | {mode} | "
                                 f"{date} | {fig['p50_ms']} | {fig['p95_ms']} | {fig['direct']['p50_ms']} | "
                                 f"{fig['overhead_p50_ms']} | {fig['empty_results']}/{fig['n']} | {verdict} |")
    lines += ["", f"Machine: {payload['machine']}", ""]
    save("bench_mcp" + ("" if len(args.corpus) > 1 else f"_{args.corpus[0]}"), payload, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""search_notes round-trip latency through the MCP server over stdio, now and at past dates; and (``mcp_audit``)
what the hardened mode's audit log and receipts add.

Each corpus (hub and help, git bundles in ../shared/corpora read at run time) is cloned and its whole first-parent
history imported, one batch per commit at its committer time. Then ``vaultsync serve`` runs as a real stdio
subprocess and the official Python client calls ``search_notes`` once per query and date; the time is the
client-side round trip. Each call is preceded by the same search in-process (``Vault.search``): the difference is
what MCP and the pipe add. Queries: the hub's labelled retrieval queries; for help, note titles at HEAD.
Targets: p50 <= 50 ms now, <= 250 ms at a past date. ``mcp_audit``: a plain server and one started with a manifest
holding ``audit_log_path`` and ``keystore_path``, calls alternating; target under 10% more at p50.
Quick: the sample vault with two batches, 5 queries, one past date, one corpus.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from benchmarks.harness import Figures
from benchmarks.inputs import QUICK_QUERIES, bench_work, corpus, history_db, quick_history_db, workdir
from vaultsync.times import format_time
from vaultsync.vault import Vault

TARGET_NOW_MS, TARGET_PAST_MS = 50.0, 250.0
TARGET_AUDIT_INCREASE = 0.10


def summary_ms(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    k = (len(ordered) - 1) * 0.95
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    p95 = ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)
    return {"n": len(values), "p50_ms": round(statistics.median(values), 2), "p95_ms": round(p95, 2)}


def queries(name: str, db: Path, count: int) -> list[str]:
    rng = random.Random(5)
    if name == "hub":
        rows = [json.loads(line) for line in corpus("retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()]
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


async def measure(
    db: Path, root: Path, name: str, items: list[str], dates: list[str | None], era: str, modes: tuple[str, ...]
) -> dict[str, Any]:
    """Round trips through a real stdio server: {mode: {date: figures}}. Each call is preceded by the
    same search in-process through ``Vault.search`` (same moment, same load), so the difference of
    the two is what MCP and the pipe add."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "vaultsync", "--db", str(db), "serve", str(root)]
    )
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
                        answer = result.structured_content or {}
                        empty += not (answer.get("hits") or answer.get("notes"))  # flat hits, or grouped by note
                    out.setdefault(mode, {})[date or "now"] = {
                        **summary_ms(times),
                        "empty_results": empty,
                        "direct": summary_ms(base),
                        "overhead_p50_ms": round(statistics.median(t - b for t, b in zip(times, base)), 2),
                    }
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
    manifest.write_text(
        f"db_path = {json.dumps(str(db))}\naudit_log_path = {json.dumps(str(log))}\n"
        f"keystore_path = {json.dumps(str(keystore))}\n",
        encoding="utf-8",
    )
    manifest.chmod(0o600)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "vaultsync", "serve", str(root), "--manifest", str(manifest)]
    ), log


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
            for which in ("off", "on") if i % 2 == 0 else ("on", "off"):
                started = time.perf_counter()
                result = await clients[which].call_tool("search_notes", {"query": query})
                times[which].append((time.perf_counter() - started) * 1000)
                if result.is_error:
                    raise RuntimeError(result.content[0].text)
    records = len(log.read_text(encoding="utf-8").splitlines())
    off_p50, on_p50 = statistics.median(times["off"]), statistics.median(times["on"])
    return {
        "off": summary_ms(times["off"]),
        "on": summary_ms(times["on"]),
        "audit_records": records,
        "p50_increase": round(on_p50 / off_p50 - 1, 4),
    }


def _corpora(quick: bool, work: Path) -> list[tuple[str, Path, Path, dict[str, Any], list[str]]]:
    if quick:
        root, db, info = quick_history_db(work)
        return [("notes", root, db, info, QUICK_QUERIES[:5])]
    out = []
    for name in ("hub", "help"):
        root, db, info = history_db(bench_work("mcp"), name)
        out.append((name, root, db, info, queries(name, db, 60)))
    return out


def run(quick: bool) -> Figures:
    figures: Figures = {}
    with workdir("mcp") as work:
        for name, root, db, info, items in _corpora(quick, work):
            dates: list[str | None] = [None, info["first_batch"]] if quick else [None, *past_dates(info)]
            result = anyio.run(
                measure, db, root, name, items, dates, "2026-07-28", ("hybrid",) if quick else ("hybrid", "keyword")
            )
            figures[f"{name}_notes"], figures[f"{name}_batches"] = info["notes"], info["batches"]
            for mode, per_date in result.items():
                for k, (date, fig) in enumerate(per_date.items()):
                    key = f"{name}_{mode}_" + ("now" if date == "now" else f"past{k}")
                    figures[f"{key}_p50_ms"], figures[f"{key}_p95_ms"] = fig["p50_ms"], fig["p95_ms"]
                    figures[f"{key}_direct_p50_ms"] = fig["direct"]["p50_ms"]
                    figures[f"{key}_overhead_p50_ms"] = fig["overhead_p50_ms"]
                    figures[f"{key}_empty"] = fig["empty_results"]
    return figures


def run_audit(quick: bool) -> Figures:
    figures: Figures = {}
    with workdir("mcp-audit") as work:
        for name, root, db, _info, items in _corpora(quick, work):
            fig = anyio.run(measure_audit, db, root, items, work)
            figures.update(
                {
                    f"{name}_off_p50_ms": fig["off"]["p50_ms"],
                    f"{name}_on_p50_ms": fig["on"]["p50_ms"],
                    f"{name}_off_p95_ms": fig["off"]["p95_ms"],
                    f"{name}_on_p95_ms": fig["on"]["p95_ms"],
                    f"{name}_p50_increase": fig["p50_increase"],
                    f"{name}_audit_records": fig["audit_records"],
                }
            )
    return figures

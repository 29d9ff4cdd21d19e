"""Every benchmark the harness runs: name -> (module, what it measures).

Each entry is a module whose ``run(quick: bool) -> dict`` returns the benchmark's named figures (or
``module:function`` for another function of that form).

A new benchmark is a module ``benchmarks/bench_NAME.py`` with that function, and one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

BENCHMARKS: dict[str, tuple[str, str]] = {
    "startup": ("benchmarks.bench_startup", "CLI start-up: vaultsync's own import time and `--help` wall time"),
    "safe_reads": ("benchmarks.bench_safe_reads", "reading notes without following symlinks against a plain read"),
    "import": (
        "benchmarks.bench_import",
        "import speed, memory and database size: parse alone, import, re-import with nothing changed, --from-git",
    ),
    "semantic": (
        "benchmarks.bench_semantic",
        "the semantic extra: installed size, model load, embedding throughput per thread setting, query latency",
    ),
    "fill_vectors": (
        "benchmarks.bench_fill_vectors",
        "filling MiniLM vectors, old code against new in one run: chunks per CPU-second on Help and Hub history "
        "texts, peak memory, the vectors compared (500 texts of each), the Hub's time to complete estimated",
    ),
    "model_peak": (
        "benchmarks.bench_model_peak",
        "MiniLM's fp32 work per CPU-second against a single-threaded numpy fp32 matmul on the same core: how much "
        "any change keeping the vectors equal could still gain",
    ),
    "import_semantic": (
        "benchmarks.bench_import_semantic",
        "a full import with the semantic extra: wall, CPU, peak memory of the process tree, database size",
    ),
    "scale": (
        "benchmarks.bench_scale",
        "ten and twenty times the Hub: import, re-import, watch, polling fallback and search at scale",
    ),
    "scale_search": (
        "benchmarks.bench_scale:run_search",
        "search at scale alone, now and at a past cutoff, on histories of 1x, 10x, 20x the Hub",
    ),
    "search": (
        "benchmarks.bench_search",
        "search latency p50/p95, keyword and default mode, now and at a past "
        "cutoff, beside the simple correct approach",
    ),
    "leakage": (
        "benchmarks.bench_leakage",
        "how often a search as of a past moment differs from the truth then, beside other ways to index a history",
    ),
    "postgres": (
        "benchmarks.bench_postgres",
        "SQLite and PostgreSQL side by side: fill, size, search p50/p95 now "
        "and past, the same answers, search_notes throughput with 1, 2, 4 HTTP servers",
    ),
    "copy": (
        "benchmarks.bench_copy",
        "`vaultsync copy` of a replayed Help history, SQLite to PostgreSQL and back: wall, CPU of the copy and of "
        "PostgreSQL, database size, WAL written, and whether the copies answer as the source",
    ),
    "hosted": (
        "benchmarks.bench_hosted",
        "the hosted deployment behind nginx with OAuth clients: search_notes p50/p95 under 10 requests/s offered, "
        "now, past and common words, then the most requests/s and CPU per request, PostgreSQL beside SQLite",
    ),
    "purge": (
        "benchmarks.bench_purge",
        "purging a string, a common line or everything before a moment from a history, and search speed on it",
    ),
    "retention": (
        "benchmarks.bench_retention",
        "a retention policy on a prefix of the Help history: database size before and after, what its dry run "
        "said it would free beside what it freed, and every kept moment byte-exact against git archive of its commit",
    ),
    "quality": (
        "benchmarks.bench_quality",
        "retrieval quality: recall@10, MRR@10, success@1 per query set and mode, beside a plain FTS5 baseline",
    ),
    "quality_minilm": (
        "benchmarks.bench_quality:run_minilm",
        "retrieval quality on a store of MiniLM vectors (the semantic extra), the default mode by words alone",
    ),
    "quality_minilm_fused": (
        "benchmarks.bench_quality:run_minilm_fused",
        "retrieval quality on a store of MiniLM vectors fused into the default mode, as shipped",
    ),
    "questions": (
        "benchmarks.bench_questions",
        "everyday questions beside known-item, remembered and link/alias sets: @1/@3/@10/MRR per mode, words "
        "alone and MiniLM fused, on the Help and the Hub; search latency; import, then until vectors are complete",
    ),
    "absent": (
        "benchmarks.bench_absent",
        "words found nowhere: hits the default mode shows for 50 random absent words per vault (0 shown as matches), "
        "the nearest chunk's similarity behind the semantic model's floor, and the everyday questions it must keep",
    ),
    "models": (
        "benchmarks.bench_models",
        "which embedding model: vector-only quality on the everyday questions, embedding speed, install size",
    ),
    "watch": ("benchmarks.bench_watch", "the watcher: start-up, one edit until readable, idle CPU and memory, a burst"),
    "watch_delay": (
        "benchmarks.bench_watch_delay",
        "a save until readable while the semantic model fills a backlog, the watcher at nice 10, calm and under a "
        "bounded CPU load, old code beside new",
    ),
    "mcp": ("benchmarks.bench_mcp", "search_notes round trip through a real stdio MCP server, now and in the past"),
    "mcp_audit": (
        "benchmarks.bench_mcp:run_audit",
        "what the hardened mode's audit log and receipts add to search_notes over stdio",
    ),
    "answer_sizes": (
        "benchmarks.bench_answer_sizes",
        "what each MCP tool's answer costs an assistant: characters "
        "and o200k_base tokens of the text block, the structured copy and the whole JSON-RPC line",
    ),
    "reader_idle": ("benchmarks.bench_reader_idle", "what idle reader servers cost: CPU, memory, inotify watches"),
    "ui": ("benchmarks.bench_ui", "`vaultsync ui` server time per view: tree, note, diff, backlinks, search"),
    "attachments": (
        "benchmarks.bench_attachments",
        "attachments: database growth against bytes on disk under 2,000 images re-saved over 5 batches, import time "
        "and peak memory; a 1 GiB file recorded in bounded memory; a Markdown-only vault before and after",
    ),
    "attachments_pdf": (
        "benchmarks.bench_attachments:run_pdfs",
        "PDFs' text: 200 PDFs of 10 pages imported by the code before PDF text and by this checkout in one run: "
        "wall, CPU, peak memory, database size, a last page's word found",
    ),
    "stress_import_kill": (
        "benchmarks.stress_import_kill",
        "a 2,500-note import batch killed by SIGKILL inside its write, 22 notes read one by one after it: "
        "rounds where every read shows all of the batch or none",
    ),
}


def names() -> list[str]:
    return list(BENCHMARKS)


def describe(name: str) -> str:
    return BENCHMARKS[name][1]


def load(name: str) -> Callable[[bool], dict[str, Any]]:
    """The benchmark's ``run`` function (its module imported only now)."""
    if name not in BENCHMARKS:
        raise SystemExit(f"no benchmark named {name!r}; known: {', '.join(BENCHMARKS)}")
    module, _, function = BENCHMARKS[name][0].partition(":")
    return getattr(importlib.import_module(module), function or "run")

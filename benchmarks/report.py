"""Markdown from the recorded results: one table per benchmark for the docs' performance page.

``render(name)`` reads ``benchmarks/results/NAME.jsonl`` and returns a section: what the benchmark measures, then a
table whose columns are its latest full runs (quick runs only check that a benchmark still runs; they are shown
only when there is no full run) and whose rows are the command, commit, date, machine, load average, the
harness's own measures (wall, CPU of the process tree, peak memory) and every figure the benchmark returned.
``python -m benchmarks report [NAME…] [--out FILE]`` prints them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks import registry
from benchmarks.harness import RESULTS, entries

RUNS = 3
"""How many of the latest runs a table shows, newest first."""


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_cell(v) for v in value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def _machine(entry: dict[str, Any]) -> str:
    m = entry.get("machine") or {}
    if isinstance(m, str):
        return m
    parts = [
        f"{m['cpus']} CPUs" if m.get("cpus") else "",
        f"Python {m['python']}" if m.get("python") else "",
        f"SQLite {m['sqlite']}" if m.get("sqlite") else "",
    ]
    return ", ".join(p for p in parts if p)


def _load(entry: dict[str, Any]) -> str:
    load = entry.get("load_average") or {}
    if isinstance(load, list):
        return _cell(load)
    before, after = load.get("before") or [], load.get("after") or []
    if not before and not after:
        return ""
    if before and after:
        return f"{before[0]} → {after[0]}"
    return str((before or after)[0])


def render(name: str, results: Path | None = None, runs: int = RUNS) -> str:
    """A markdown section for one benchmark: its description and a table of its latest recorded runs."""
    recorded = entries(name, results or RESULTS)
    title = f"## {name}\n\n"
    if name in registry.BENCHMARKS:
        title += f"Measures {registry.describe(name)}.\n\n"
    full = [e for e in recorded if not e.get("quick")]
    shown = list(reversed(full or recorded))[:runs]
    if not shown:
        return title + f"No recorded run: `python -m benchmarks run {name}`.\n"
    header = ["", *(f"run {i + 1}" for i in range(len(shown)))]
    rows: list[list[str]] = [
        ["command", *(f"`{e.get('command', '')}`" for e in shown)],
        ["commit", *(_cell(e.get("commit")) for e in shown)],
        ["date", *(_cell(e.get("date")) for e in shown)],
        ["machine", *(_machine(e) for e in shown)],
        ["load average (1 min, before → after)", *(_load(e) for e in shown)],
        ["wall s", *(_cell(e.get("wall_s")) for e in shown)],
        ["CPU s (process tree)", *(_cell(e.get("cpu_s")) for e in shown)],
        ["peak memory MB", *(_cell(e.get("peak_rss_mb")) for e in shown)],
    ]
    keys: list[str] = []
    for entry in shown:
        keys += [k for k in entry.get("figures", {}) if k not in keys]
    rows += [[key, *(_cell(e.get("figures", {}).get(key)) for e in shown)] for key in keys]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * len(shown)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    notes = [f"run {i + 1}: {e['note']}" for i, e in enumerate(shown) if e.get("note")]
    tail = ("\n\n" + "\n".join(f"- {n}" for n in notes)) if notes else ""
    quick = "" if full else "\n\nOnly quick runs (the sample vault) are recorded: these figures check that it runs."
    return title + "\n".join(lines) + tail + quick + "\n"


def render_all(names: list[str] | None = None, results: Path | None = None) -> str:
    """Every named benchmark's section (default: the registered ones, then any other results file)."""
    folder = results or RESULTS
    if names is None:
        names = registry.names()
        names += sorted(p.stem for p in folder.glob("*.jsonl") if p.stem not in names)
    return "# Benchmark results\n\n" + "\n".join(render(name, folder) for name in names)

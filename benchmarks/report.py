"""Markdown from the recorded results: the one renderer of ``benchmarks/results/*.jsonl`` into tables.

Two views of the same lines, with one way to read them, write a number, name a machine and draw a table:

- ``render(name)``: one benchmark's section, a table whose columns are its latest full runs (quick runs only check
  that a benchmark still runs; they are shown only when there is no full run) and whose rows are the command,
  commit, date, machine, load average, the harness's own measures (wall, CPU of the process tree, peak memory) and
  every figure the benchmark returned. ``python -m benchmarks report [NAME…] [--out FILE]`` prints them all.
- ``page(intro, areas, runs, others)``: the documentation's performance page (``scripts/docgen_perf.py`` turns the
  latest full runs into ``Run`` tables, by area, and lists the rest): every figure with its command, commit, date
  and machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import registry
from benchmarks.harness import RESULTS, entries

RUNS = 3
"""How many of the latest runs a table shows, newest first."""


# ---------------------------------------------------------------- one way to write a value


def num(value: Any, unit: str = "") -> str:
    """A figure as the tables show it: thousands separated, three decimals below 10, one above; its unit after."""
    if isinstance(value, float):
        text = f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 10 else f"{value:,.1f}".removesuffix(".0")
    elif isinstance(value, int) and not isinstance(value, bool):
        text = f"{value:,}"
    else:
        text = str(value)
    return f"{text} {unit}".strip() if unit and unit != "%" else f"{text}{unit}"


def cell(value: Any) -> str:
    """A table cell: a number as ``num`` writes it, a list one value after another, nothing for ``None``, and
    text with its ``|`` escaped and on one line."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value)
    text = value if isinstance(value, str) else num(value)
    return text.replace("|", "\\|").replace("\n", " ")


def day(text: str) -> str:
    return text[:10]


def machine_text(m: Any, *, sqlite: bool = False) -> str:
    """``Linux x86_64, 2 CPUs, Python 3.11.7`` from a machine record (a dict or a string); ``sqlite``: with the
    SQLite version when recorded."""
    if not m:
        return "not recorded"
    if isinstance(m, str):
        return m
    platform = str(m.get("platform", ""))
    system = platform.split("-")[0] if platform else ""
    arch = next((a for a in ("x86_64", "aarch64", "arm64", "AMD64") if a in platform), "")
    parts = [" ".join(p for p in (system, arch) if p)]
    if m.get("cpus"):
        parts.append(f"{m['cpus']} CPUs")
    if m.get("python"):
        parts.append(f"Python {m['python']}")
    if sqlite and m.get("sqlite"):
        parts.append(f"SQLite {m['sqlite']}")
    return ", ".join(p for p in parts if p) or "not recorded"


def table(header: list[str], rows: list[list[str]], *, numeric: bool = False) -> list[str]:
    """A Markdown table's lines; ``numeric``: every column but the first aligned right."""
    rule = "|---|" + ("---:|" if numeric else "---|") * (len(header) - 1)
    return ["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(row) + " |" for row in rows)]


# ---------------------------------------------------------------- one way to read the lines


def lines(results: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every recorded line of every results file, file by file (by name), oldest line first."""
    for path in sorted(results.glob("*.jsonl")):
        for raw in path.read_text(encoding="utf-8").splitlines():
            if raw.strip():
                yield path, json.loads(raw)


def latest_full(results: Path) -> dict[str, dict[str, Any]]:
    """The latest full (not quick) run recorded in each results file, by the file's stem, with ``_file``."""
    latest: dict[str, dict[str, Any]] = {}
    for path, line in lines(results):
        if "figures" in line and not line.get("quick"):
            latest[path.stem] = {**line, "_file": path.name}
    return latest


# ---------------------------------------------------------------- a benchmark's runs side by side


def _load(entry: dict[str, Any]) -> str:
    load = entry.get("load_average") or {}
    if isinstance(load, list):
        return cell(load)
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
    rows: list[list[str]] = [
        ["command", *(f"`{e.get('command', '')}`" for e in shown)],
        ["commit", *(cell(e.get("commit")) for e in shown)],
        ["date", *(cell(e.get("date")) for e in shown)],
        ["machine", *(machine_text(e.get("machine"), sqlite=True) for e in shown)],
        ["load average (1 min, before → after)", *(_load(e) for e in shown)],
        ["wall s", *(cell(e.get("wall_s")) for e in shown)],
        ["CPU s (process tree)", *(cell(e.get("cpu_s")) for e in shown)],
        ["peak memory MB", *(cell(e.get("peak_rss_mb")) for e in shown)],
    ]
    keys: list[str] = []
    for entry in shown:
        keys += [k for k in entry.get("figures", {}) if k not in keys]
    rows += [[key, *(cell(e.get("figures", {}).get(key)) for e in shown)] for key in keys]
    body = table(["", *(f"run {i + 1}" for i in range(len(shown)))], rows, numeric=True)
    notes = [f"run {i + 1}: {e['note']}" for i, e in enumerate(shown) if e.get("note")]
    tail = ("\n\n" + "\n".join(f"- {n}" for n in notes)) if notes else ""
    quick = "" if full else "\n\nOnly quick runs (the sample vault) are recorded: these figures check that it runs."
    return title + "\n".join(body) + tail + quick + "\n"


def render_all(names: list[str] | None = None, results: Path | None = None) -> str:
    """Every named benchmark's section (default: the registered ones, then any other results file)."""
    folder = results or RESULTS
    if names is None:
        names = registry.names()
        names += sorted(p.stem for p in folder.glob("*.jsonl") if p.stem not in names)
    return "# Benchmark results\n\n" + "\n".join(render(name, folder) for name in names)


# ---------------------------------------------------------------- the performance page


@dataclass
class Run:
    """Figures measured by one command at one commit on one date on one machine: a table of the page."""

    area: str
    title: str
    command: str
    commit: str
    date: str
    machine: str
    source: str
    setting: str = ""
    figures: list[tuple[str, str]] = field(default_factory=list)


def figure_runs(results: Path) -> list[Run]:
    """The lines that hold one figure each (``area``, ``title``, ``figure``, ``value``, ``unit``…), grouped by run
    (area, title, command, commit, date, machine, setting). ``name`` or ``metric`` may stand for ``figure``,
    ``benchmark`` for ``area``, ``argv`` for ``command``; ``machine`` may be a string."""
    runs: dict[tuple[str, ...], Run] = {}
    for path, line in lines(results):
        if "figures" in line:  # a whole run (the harness's form): see latest_full
            continue
        command = line.get("command") or line.get("argv") or "not recorded"
        if isinstance(command, list):
            command = " ".join(command)
        area = line.get("area") or line.get("benchmark") or "Other"
        key = (
            str(area),
            str(line.get("title") or line.get("benchmark") or str(command).split()[-1]),
            str(command),
            str(line.get("commit") or "not recorded")[:10],
            day(str(line.get("date") or "not recorded")),
            machine_text(line.get("machine")),
            str(line.get("setting", "")),
        )
        if key not in runs:
            area, title, command, commit, date, machine, setting = key
            runs[key] = Run(area, title, command, commit, date, machine, path.name, setting)
        name = line.get("figure") or line.get("name") or line.get("metric") or "?"
        runs[key].figures.append((str(name), num(line.get("value"), str(line.get("unit", "")))))
    return list(runs.values())


def page(intro: str, areas: list[str], runs: list[Run], others: list[dict[str, Any]]) -> str:
    """The performance page: ``intro``, then each area's runs as tables (``areas`` first, in order, then any other
    area by name), then one row for each run in ``others`` (those no table is made from)."""
    out = [intro]
    for area in areas + sorted({r.area for r in runs} - set(areas)):
        mine = [r for r in runs if r.area == area]
        if not mine:
            continue
        out += [f"## {area}", ""]
        for run in mine:
            out += [f"### {run.title}", ""]
            if run.setting:
                out += [run.setting[0].upper() + run.setting[1:] + ".", ""]
            out += table(["figure", "value"], [[cell(name), cell(value)] for name, value in run.figures])
            out += [
                "",
                f"Command: `{run.command}`  ",
                f"Commit: `{run.commit}` · date: {run.date} · "
                f"machine: {run.machine} · results: `benchmarks/results/{run.source}`",
                "",
            ]
    if others:
        out += [
            "## Other results",
            "",
            "These benchmarks' latest runs are recorded too; `python -m benchmarks report` shows their figures.",
            "",
        ]
        out += table(
            ["benchmark", "command", "commit", "date", "machine", "figures"],
            [
                [
                    str(line.get("benchmark", "?")),
                    f"`{str(line.get('command', '')).strip()}`",
                    f"`{str(line.get('commit', ''))[:10]}`",
                    day(str(line.get("date", ""))),
                    machine_text(line.get("machine")),
                    str(len(line.get("figures") or {})),
                ]
                for line in sorted(others, key=lambda o: o.get("benchmark", ""))
            ],
        )
        out += [""]
    return "\n".join(out).rstrip() + "\n"

"""Every registered benchmark still runs: each one's ``--quick`` form on the sample vault, through the harness.

Nothing here judges a speed: a benchmark's figures are recorded, never asserted on. What is checked is that each
benchmark runs to the end and returns named figures, that the harness records what every result needs, that the
results folder holds only JSON lines under stable names, and that the report renders them.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the benchmarks package lives beside vaultsync/, not inside it

from benchmarks import registry  # noqa: E402
from benchmarks.harness import RESULTS, entries, measure, record  # noqa: E402
from benchmarks.report import render  # noqa: E402

ENTRY_KEYS = {
    "benchmark",
    "command",
    "quick",
    "date",
    "commit",
    "machine",
    "load_average",
    "wall_s",
    "cpu_s",
    "peak_rss_mb",
    "figures",
}


def _figure_ok(value: object) -> bool:
    if isinstance(value, float):
        return not math.isnan(value)
    return value is None or isinstance(value, (int, str, bool))


ON_POSTGRES = {"postgres", "copy", "hosted"}
"""The benchmarks whose quick run starts a PostgreSQL server (tests/support/pgserver.py)."""


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.pg) if n in ON_POSTGRES else n for n in registry.names()]
)
def test_quick_run_returns_its_figures(name: str, tmp_path: Path) -> None:
    entry = measure(name, registry.load(name), quick=True)
    assert set(entry) == ENTRY_KEYS
    assert entry["benchmark"] == name and entry["quick"] is True
    figures = entry["figures"]
    assert figures, f"{name} returned no figures"
    bad = {k: v for k, v in figures.items() if not isinstance(k, str) or not _figure_ok(v)}
    assert not bad, f"{name}: figures must be named numbers or short strings: {bad}"
    assert entry["wall_s"] >= 0 and entry["cpu_s"] >= 0 and entry["peak_rss_mb"] > 0
    path = record(entry, tmp_path)
    assert path == tmp_path / f"{name}.jsonl"
    assert entries(name, tmp_path) == [json.loads(json.dumps(entry))]
    table = render(name, tmp_path)
    assert f"## {name}" in table and "`python -m benchmarks run " in table
    for key in figures:
        assert f"| {key} |" in table


def test_the_cli_runs_records_and_reports(tmp_path: Path) -> None:
    """``python -m benchmarks run NAME --quick`` appends one JSON line per run; ``report`` renders them."""
    run = [sys.executable, "-m", "benchmarks", "run", "startup", "--quick", "--results", str(tmp_path)]
    for _ in range(2):
        subprocess.run(run, cwd=REPO, check=True, capture_output=True, text=True)
    lines = (tmp_path / "startup.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and all(json.loads(line)["figures"]["runs"] == 2 for line in lines)
    listed = subprocess.run(
        [sys.executable, "-m", "benchmarks", "list"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    assert [line.split()[0] for line in listed.splitlines()] == registry.names()
    unknown = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "no-such-benchmark"], cwd=REPO, capture_output=True, text=True
    )
    assert unknown.returncode != 0 and "Traceback" not in unknown.stderr
    assert "no benchmark named 'no-such-benchmark'" in unknown.stderr


def test_results_are_json_lines_under_stable_names() -> None:
    """No result file is named after a work branch: only ``NAME.jsonl``, one entry per line, each naming its
    benchmark; the registered benchmarks' files render."""
    files = sorted(p for p in RESULTS.iterdir() if not p.name.startswith("."))
    assert all(p.suffix == ".jsonl" for p in files), [p.name for p in files if p.suffix != ".jsonl"]
    for path in files:
        rows = entries(path.stem)
        assert rows, path
        for row in rows:
            assert row["benchmark"] == path.stem and "figures" in row and "date" in row and "commit" in row
        if path.stem in registry.BENCHMARKS:
            assert render(path.stem).startswith(f"## {path.stem}")


def test_an_old_json_result_is_adopted_as_a_json_line(tmp_path: Path) -> None:
    """What the scripts saved before the harness (nested JSON) becomes an entry: flattened figures, the payload kept."""
    from benchmarks.harness import adopt

    old = {
        "machine": {"python": "3.11.7", "cpus": 2, "load_average": [1.5, 2.0, 2.1]},
        "queries": 60,
        "latency": {"keyword_now": {"n": 60, "p50_ms": 2.1}},
        "rows": [{"case": "one-note", "wall_s": 3.5}],
    }
    path = tmp_path / "search_speed_someone.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    adopt(path, "search", "python benchmarks/bench_search.py", results=tmp_path)
    (entry,) = entries("search", tmp_path)
    assert entry["figures"] == {
        "queries": 60,
        "latency.keyword_now.n": 60,
        "latency.keyword_now.p50_ms": 2.1,
        "rows.one-note.wall_s": 3.5,
    }
    assert entry["detail"] == old and entry["load_average"]["before"] == [1.5, 2.0, 2.1]
    assert entry["command"] == "python benchmarks/bench_search.py" and "search_speed_someone.json" in entry["note"]
    assert "| latency.keyword_now.p50_ms | 2.1 |" in render("search", tmp_path)


def test_the_numpy_mpnet_buckets_and_reads_safetensors(tmp_path: Path) -> None:
    """``benchmarks/mpnet.py``'s relative position buckets (MPNet's, as T5's bidirectional ones) and its reader of
    the .safetensors format, on values worked out by hand and a file written here (the model itself is not needed)."""
    import struct

    import numpy as np

    from benchmarks.mpnet import buckets, safetensors

    b = buckets(300)
    # rows are queries, columns keys: a key before the query counts up from 0, after it from 16; 8 exact distances
    # each way, then logarithmic buckets up to 15 / 31 (reached at 128 and beyond)
    assert b[0, 0] == 0 and b[5, 4] == 1 and b[4, 5] == 17 and b[10, 3] == 7 and b[3, 10] == 23
    assert b[8, 0] == 8 and b[0, 8] == 24 and b[200, 0] == 15 and b[0, 200] == 31 and b[0, 299] == 31
    assert b[40, 0] == 8 + int(np.log(40 / 8) / np.log(128 / 8) * 8)
    tensor = np.arange(6, dtype=np.float32).reshape(2, 3)
    header = json.dumps({"t": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}).encode()
    path = tmp_path / "m.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + tensor.tobytes())
    assert np.array_equal(safetensors(path)["t"], tensor)


def test_the_report_and_the_performance_page_render_alike(tmp_path: Path) -> None:
    """One renderer (``benchmarks/report.py``): the report and the docs' page write a machine and a number the same
    way, and the page's script neither reads the results nor draws a table itself."""
    sys.path.insert(0, str(REPO / "scripts"))
    import docgen_perf

    machine = {"platform": "Linux-6.1-x86_64-with-glibc2.36", "cpus": 2, "python": "3.11.7"}
    run = {"benchmark": "planted", "command": "python -m benchmarks run planted", "quick": False}
    run |= {"date": "2026-12-04T10:00:00Z", "commit": "abcdef1", "machine": machine, "figures": {"seconds": 23.087}}
    (tmp_path / "planted.jsonl").write_text(json.dumps(run) + "\n", encoding="utf-8")
    figure = {"area": "Search", "title": "A figure", "figure": "seconds", "value": 23.087, "unit": "s"}
    figure |= {"command": "python x.py", "commit": "abcdef1", "date": "2026-12-04", "machine": machine}
    (tmp_path / "figure.jsonl").write_text(json.dumps(figure) + "\n", encoding="utf-8")

    report, page = render("planted", tmp_path), docgen_perf.render(tmp_path)
    machine_seen = "Linux x86_64, 2 CPUs, Python 3.11.7"
    assert f"| machine | {machine_seen} |" in report
    assert "| planted | `python -m benchmarks run planted` | `abcdef1` | 2026-12-04 | " + machine_seen + " |" in page
    assert "| seconds | 23.1 |" in report and "| seconds | 23.1 s |" in page
    script = (REPO / "scripts" / "docgen_perf.py").read_text(encoding="utf-8")
    assert "json.loads" not in script and "|---" not in script and "def num" not in script

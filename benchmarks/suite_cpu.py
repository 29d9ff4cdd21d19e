"""Where the test suite spends CPU: a pytest plugin that records each test's CPU seconds (this process and the
children it waited for) and wall seconds, and a summary by module.

    PYTHONPATH=benchmarks SUITE_CPU_OUT=/tmp/suite-cpu.jsonl make test PYTEST_ARGS="-p suite_cpu"
    .venv/bin/python benchmarks/suite_cpu.py /tmp/suite-cpu.jsonl [--top 40]

CPU seconds do not grow with the machine's load the way wall seconds do, so two runs on a shared machine
compare fairly. Not counted: processes a test leaves running past its end (the tests' shared PostgreSQL
server) and children never waited for.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import time
from collections.abc import Iterator
from typing import Any


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


try:
    import pytest
except ImportError:  # summarising needs no pytest
    pytest = None  # type: ignore[assignment]

OUT = os.path.abspath(os.environ.get("SUITE_CPU_OUT", "suite-cpu.jsonl"))
"""Read once, when the plugin loads: some tests empty the environment or change directory while they run."""

if pytest is not None:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: Any, nextitem: Any) -> Iterator[None]:
        own, children, started = *_cpu(), time.time()
        yield
        own_after, children_after = _cpu()
        row = {
            "id": item.nodeid,
            "self": own_after - own,
            "children": children_after - children,
            "wall": time.time() - started,
            "start": started,
            "pid": os.getpid(),
        }
        with open(OUT, "a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.records, encoding="utf-8")]
    modules: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for row in rows:
        totals = modules[row["id"].split("::")[0]]
        totals[0] += row["self"]
        totals[1] += row["children"]
        totals[2] += row["wall"]
    cpu = sum(own + children for own, children, _ in modules.values())
    print(
        f"{len(rows)} tests, {cpu:.0f} CPU-s (this process {sum(m[0] for m in modules.values()):.0f}, "
        f"children {sum(m[1] for m in modules.values()):.0f})"
    )
    workers: dict[int, list[float]] = collections.defaultdict(lambda: [float("inf"), 0.0, 0.0])
    for row in rows:  # per worker process: first start, last end, busy wall seconds
        span = workers[row.get("pid", 0)]
        span[0] = min(span[0], row.get("start", 0.0))
        span[1] = max(span[1], row.get("start", 0.0) + row["wall"])
        span[2] += row["wall"]
    if all(row.get("start") for row in rows):
        first = min(span[0] for span in workers.values())
        for pid, (start, end, busy) in sorted(workers.items(), key=lambda kv: kv[1][1]):
            print(f"worker {pid}: tests from {start - first:.0f} s to {end - first:.0f} s, busy {busy:.0f} s")
    print()
    print("| CPU-s | own | children | wall-s | module |\n|---|---|---|---|---|")
    for name, (own, children, wall) in sorted(modules.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[: args.top]:
        print(f"| {own + children:.1f} | {own:.1f} | {children:.1f} | {wall:.1f} | {name} |")


if __name__ == "__main__":
    main()

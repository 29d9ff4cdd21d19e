"""``python -m benchmarks list | run NAME… [--quick] [--all] [--no-save] | report [NAME…] [--out FILE] |
adopt FILE.json NAME``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks import registry
from benchmarks.harness import measure, record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description="vaultsync's benchmarks")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the registered benchmarks and what each measures")
    run = sub.add_parser("run", help="run benchmarks; each result is appended to benchmarks/results/NAME.jsonl")
    run.add_argument("names", nargs="*", metavar="NAME")
    run.add_argument("--all", action="store_true", help="every registered benchmark")
    run.add_argument("--quick", action="store_true", help="tiny inputs (the sample vault): checks it runs")
    run.add_argument("--no-save", action="store_true", help="print the result only")
    run.add_argument("--results", type=Path, help="folder for the JSON lines (default benchmarks/results)")
    report = sub.add_parser("report", help="markdown tables from the recorded results")
    report.add_argument("names", nargs="*", metavar="NAME")
    report.add_argument("--out", type=Path, help="write to this file instead of printing")
    adopt = sub.add_parser("adopt", help="append a result an old script saved as JSON to NAME's JSON lines")
    adopt.add_argument("file", type=Path)
    adopt.add_argument("name", metavar="NAME")
    adopt.add_argument(
        "--command", dest="made_by", help="the command that produced it (default: the file's argv, if any)"
    )
    args = parser.parse_args(argv)

    if args.command == "list":
        width = max(map(len, registry.names()))
        for name in registry.names():
            print(f"{name:<{width}}  {registry.describe(name)}")
        return 0
    if args.command == "report":
        from benchmarks.report import render_all

        text = render_all(args.names or None)
        if args.out:
            args.out.write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
        return 0
    if args.command == "adopt":
        from benchmarks.harness import adopt as adopt_file

        print(f"appended to {adopt_file(args.file, args.name, args.made_by)}")
        return 0
    names = registry.names() if args.all else args.names
    if not names:
        parser.error("run: name a benchmark (python -m benchmarks list) or pass --all")
    for name in names:
        fn = registry.load(name)
        print(f"running {name}{' (quick)' if args.quick else ''}", file=sys.stderr)
        entry = measure(name, fn, quick=args.quick)
        print(json.dumps(entry, ensure_ascii=False))
        if not args.no_save:
            print(f"appended to {record(entry, args.results)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

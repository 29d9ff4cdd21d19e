"""Regenerate the documentation pages that come from the code and the benchmark results (``make docs-gen``).

    .venv/bin/python scripts/docgen.py                    # rewrite every generated page
    .venv/bin/python scripts/docgen.py --check            # exit 1, naming each page that differs
    .venv/bin/python scripts/docgen.py cli mcp            # only some pages
    .venv/bin/python scripts/docgen.py performance --results DIR   # the performance page from another folder

Pages: ``cli`` (docs/reference/cli.md, from the click commands), ``mcp`` (docs/reference/mcp-tools.md, from
tools/list), ``performance`` (docs/performance.md, from benchmarks/results/), ``architecture`` (the package map
of docs/architecture.md, from the modules' docstrings), ``bundle`` (bundle/manifest.json's tool list, from the tool
registry). ``tests/test_docs.py``, ``tests/test_docs_architecture.py`` and ``tests/server/test_tool_registry.py``
compare each page with what its generator writes now.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import docgen_architecture  # noqa: E402
import docgen_bundle  # noqa: E402
import docgen_cli  # noqa: E402
import docgen_mcp  # noqa: E402
import docgen_perf  # noqa: E402


def pages(results: Path | None = None) -> dict[str, tuple[str, Callable[[], str]]]:
    return {
        "cli": (docgen_cli.PAGE, docgen_cli.render),
        "mcp": (docgen_mcp.PAGE, docgen_mcp.render),
        "performance": (docgen_perf.PAGE, lambda: docgen_perf.render(results or REPO / docgen_perf.RESULTS)),
        "architecture": (docgen_architecture.PAGE, docgen_architecture.render),
        "bundle": (docgen_bundle.PAGE, docgen_bundle.render),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", nargs="*", help="cli, mcp, performance, architecture or bundle (default: all)")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    parser.add_argument("--results", type=Path, help="benchmark results folder (default benchmarks/results)")
    args = parser.parse_args(argv)
    unknown = set(args.which) - set(pages())
    if unknown:
        parser.error(f"unknown page {', '.join(sorted(unknown))}: choose from {', '.join(pages())}")
    stale = []
    for name, (page, render) in pages(args.results).items():
        if args.which and name not in args.which:
            continue
        text = render()
        path = REPO / page
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(page)
        elif not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {page}")
        else:
            print(f"unchanged {page}")
    for page in stale:
        print(f"{page} differs from what scripts/docgen.py writes now: run `make docs-gen`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The documentation: generated pages equal what their generators write now, and the site builds strictly.

- The command reference (docs/reference/cli.md) equals ``scripts/docgen_cli.py``'s page, and every ``--help``
  text on it is what ``vaultsync COMMAND --help`` prints in a real subprocess.
- The MCP tool reference (docs/reference/mcp-tools.md) equals the page written from ``tools/list`` as the
  official client receives it (and the session's real answers).
- The performance page equals the page written from benchmarks/results/.
- ``mkdocs build --strict`` succeeds with no warning, and two pages open in Debian's chromium (headless,
  driven by Playwright): getting started and the tool reference. ``VAULTSYNC_WRITE_SCREENSHOTS=1`` writes
  their screenshots to docs/img/ (kept in the repository: the pages as a browser shows them); otherwise to a
  temp folder.

After changing a command, a tool or a results file: ``make docs-gen`` rewrites the three pages.
"""

from __future__ import annotations

import difflib
import functools
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import browser  # noqa: F401 (fixture)
from support.repo import REPO

from vaultsync.server import registry

sys.path.insert(0, str(REPO / "scripts"))

import docgen_cli  # noqa: E402
import docgen_mcp  # noqa: E402
import docgen_perf  # noqa: E402

FIX = "run `make docs-gen` (scripts/docgen.py) and commit the page"


def same_page(page: str, generated: str) -> None:
    """``page`` on disk equals ``generated``; on a difference, the first lines of a unified diff."""
    written = (REPO / page).read_text(encoding="utf-8")
    if written != generated:
        diff = "".join(
            list(
                difflib.unified_diff(written.splitlines(True), generated.splitlines(True), page, "generated now", n=1)
            )[:40]
        )
        pytest.fail(f"{page} differs from what its generator writes now ({FIX}):\n{diff}")


def test_command_reference_is_generated_from_the_commands() -> None:
    same_page(docgen_cli.PAGE, docgen_cli.render())


@pytest.mark.slow
def test_command_reference_matches_help_in_subprocesses() -> None:
    """Every ``--help`` on the page is what the installed program prints (real processes, 80 columns)."""
    page = (REPO / docgen_cli.PAGE).read_text(encoding="utf-8")
    env = {**os.environ, "COLUMNS": str(docgen_cli.WIDTH), "LINES": "24"}
    helps = docgen_cli.helps()
    assert {("import",), ("serve",), ("search",), ("audit", "verify")} <= set(helps)
    procs = {
        argv: subprocess.Popen(
            [sys.executable, "-m", "vaultsync", *argv, "--help"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for argv in helps
    }
    for argv, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"vaultsync {' '.join(argv)} --help: {err}"
        printed = out.rstrip("\n")
        assert printed == helps[argv], f"vaultsync {' '.join(argv)} --help differs from the generator's text"
        block = "\n".join(f"    {line}".rstrip() for line in printed.splitlines())
        assert block in page, f"the page does not show `vaultsync {' '.join(argv)} --help` as printed ({FIX})"


def test_command_reference_names_every_option() -> None:
    """A planted option appears on the page the generator writes (the comparison above can fail)."""
    import click

    from vaultsync.cli import cli

    command = cli.get_command(click.Context(cli), "ls")
    assert command is not None
    planted = click.Option(["--planted-option"], help="Planted by the test.")
    command.params.append(planted)
    try:
        page = docgen_cli.render()
    finally:
        command.params.remove(planted)
    assert "`--planted-option TEXT` | Planted by the test." in page
    assert page != (REPO / docgen_cli.PAGE).read_text(encoding="utf-8")


@functools.cache
def mcp_page() -> str:
    return docgen_mcp.render()


def test_tool_reference_is_generated_from_tools_list() -> None:
    same_page(docgen_mcp.PAGE, mcp_page())


def test_tool_reference_shows_each_tool_as_listed() -> None:
    page = mcp_page()
    for tool in [s.name for s in registry.TOOLS if s.needs != "apps"]:  # every tool but the view's own
        assert f"### `{tool}`" in page, tool
    assert "`note://{+path}`" in page
    assert "`attachment://{revision}/{+path}`" in page
    # the session's answers are the tools' own: the January search finds nothing, today's finds the decision
    january, today = page.split('"tool": "search_notes"')[1:3]
    assert "Decision, February" not in january and "Decision, February" in today


def test_performance_page_is_generated_from_the_results() -> None:
    same_page(docgen_perf.PAGE, docgen_perf.render(REPO / docgen_perf.RESULTS))


def test_performance_page_reads_harness_lines(tmp_path: Path) -> None:
    """A JSON-lines result (the harness's form) becomes a table with its command, commit, date and machine."""
    (tmp_path / "bench.jsonl").write_text(
        '{"area": "Search", "title": "A planted run", "figure": "keyword now, p50", "value": 2.5, "unit": "ms", '
        '"command": "python benchmarks/bench_x.py --n 3", "commit": "abcdef1234", "date": "2026-12-04T10:00:00Z", '
        '"machine": {"platform": "Linux-6.1-x86_64-with-glibc2.36", "cpus": 2, "python": "3.11.7"}}\n',
        encoding="utf-8",
    )
    page = docgen_perf.render(tmp_path)
    assert "### A planted run" in page and "| keyword now, p50 | 2.5 ms |" in page
    assert "Command: `python benchmarks/bench_x.py --n 3`" in page
    assert "Commit: `abcdef1234` · date: 2026-12-04 · machine: Linux x86_64, 2 CPUs, Python 3.11.7" in page


# ---------------------------------------------------------------- the site


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mkdocs build --strict`` into a temp folder: exit status 0 and not one warning."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{log}"
    assert "WARNING" not in log, log
    return out


@pytest.mark.slow  # mkdocs build: left out of make check, run by make test
def test_site_builds_strictly_with_every_page(site: Path) -> None:
    for page in (
        "getting-started",
        "concepts",
        "reference/cli",
        "reference/mcp-tools",
        "reference/python-api",
        "performance",
        "security",
        "architecture",
        "changelog",
    ):
        assert (site / page / "index.html").exists(), page
    api = (site / "reference" / "python-api" / "index.html").read_text(encoding="utf-8")
    assert "vaultsync.vault.Vault.search" in api and "as_of" in api  # mkdocstrings rendered the docstrings


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.browser
@pytest.mark.parametrize(
    ("page", "heading", "shot"),
    [
        ("getting-started/", "Getting started", "docs-getting-started.png"),
        ("reference/mcp-tools/#search_notes", "MCP tool reference", "docs-mcp-tools.png"),
    ],
)
def test_pages_open_in_chromium(browser: Any, served: str, page: str, heading: str, shot: str, tmp_path: Path) -> None:
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    outside: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("request", lambda r: outside.append(r.url) if not r.url.startswith(served) else None)
    tab.goto(f"{served}/{page}")
    tab.wait_for_load_state("networkidle")
    assert tab.locator("article h1").first.inner_text().strip().removesuffix("¶") == heading
    assert tab.locator("nav.md-nav--primary").count() > 0  # Material's navigation rendered
    if "mcp-tools" in page:
        assert tab.locator("h3#search_notes").count() == 1
        assert tab.locator("article table").count() > 10
    assert errors == [], errors
    assert outside == [], outside  # nothing from elsewhere: no web fonts, no CDN
    target = REPO / "docs" / "img" / shot if os.environ.get("VAULTSYNC_WRITE_SCREENSHOTS") else tmp_path / shot
    target.parent.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(target))
    assert target.stat().st_size > 10_000
    tab.close()


# ---------------------------------------------------------------- written for the reader

PROSE = [
    "README.md",
    "CHANGELOG.md",
    "CONTRIBUTING.md",
    "SECURITY.md",
    *(
        str(p.relative_to(REPO))
        for p in sorted((REPO / "docs").glob("*.md"))
        if p.name not in ("performance.md", "performance-notes.md", "compatibility.md")
    ),
]
"""The pages written by hand (the generated ones name commits on purpose: where each figure was measured)."""


def prose(text: str) -> str:
    """``text`` without its fenced code blocks."""
    kept, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def test_readme_is_short() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move detail into docs/"
    assert "make demo" in "\n".join(lines[:45]) and "make test" in "\n".join(lines[:45])


NOT_FOR_USERS = {
    "an issue number": r"\bissue \d+",
    "a load average": r"load average",
    "the shared machine": r"\bshared\b[^.]{0,40}\bmachine\b|\bmachine\b[^.]{0,20}\bshared\b",
    "a commit hash": r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b",
}
"""What the hand-written pages never say: how the project was built, or the state of the machine it was measured on."""
COMMITS_NAMED = {"docs/performance-notes.md"}
"""Pages that name commits on purpose (where each figure was measured)."""


@pytest.mark.parametrize("page", [*PROSE, *sorted(COMMITS_NAMED)])
def test_pages_speak_to_users(page: str) -> None:
    """No word about how the project was built: issue numbers, load averages, the shared machine, commit hashes in
    prose (except where a page names the commit a figure was measured at)."""
    import re

    text = prose((REPO / page).read_text(encoding="utf-8"))
    for what, pattern in NOT_FOR_USERS.items():
        if what == "a commit hash" and page in COMMITS_NAMED:
            continue
        found = re.search(pattern, text, flags=re.IGNORECASE)
        assert found is None, f"{page} mentions {what}: {found.group(0)!r}"

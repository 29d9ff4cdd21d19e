"""The test tiers: ``make check`` leaves out exactly the tiers, and a test whose need shows but whose tier mark is
missing fails (tests/support/tiers.py), at collection or when it asks for PostgreSQL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.tiers import TIERS

REPO = Path(__file__).resolve().parents[1]
USAGE_ERROR = 4
"""pytest's exit status for a usage error (a collection hook refusing the tests)."""

CONFTEST = f"""
import sys
sys.path.insert(0, {str(REPO / "tests")!r})
import pytest
from support.tiers import check_marked, pytest_runtest_protocol


def pytest_collection_modifyitems(items):
    check_marked(items)


@pytest.fixture
def browser():
    return None
"""


def _pytest(folder: Path, tests: str, *args: str) -> subprocess.CompletedProcess[str]:
    (folder / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (folder / "test_it.py").write_text("import pytest\nfrom support import pgserver\n\n" + tests, encoding="utf-8")
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n" + "".join(f"    {t}: t\n" for t in TIERS))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(folder)],
        cwd=folder,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},  # none of the plugins is needed: a faster start
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_make_check_leaves_out_exactly_the_tiers_pyproject_declares() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    check = re.search(r"^CHECK_MARKERS := (.*)$", makefile, re.MULTILINE)
    assert check is not None and check.group(1) == " and ".join(f"not {tier}" for tier in TIERS)
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert {line.split(":")[0] for line in declared["markers"]} >= set(TIERS)


@pytest.mark.slow
def test_a_test_taking_a_tiers_fixture_or_parameter_without_its_mark_fails_collection(tmp_path: Path) -> None:
    unmarked = (
        "def test_page(browser):\n    pass\n\n\n"
        '@pytest.mark.parametrize("engine", ["sqlite", "postgres"])\ndef test_engine(engine):\n    pass\n'
    )
    done = _pytest(tmp_path, unmarked, "--collect-only")
    assert done.returncode == USAGE_ERROR, done.stdout + done.stderr
    assert "test_it.py::test_page (needs browser)" in done.stderr
    assert "test_it.py::test_engine[postgres] (needs pg)" in done.stderr
    assert "test_engine[sqlite]" not in done.stderr

    marked = (
        "@pytest.mark.browser\ndef test_page(browser):\n    pass\n\n\n"
        '@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.pg)])\n'
        "def test_engine(engine):\n    pass\n"
    )
    done = _pytest(tmp_path, marked, "--collect-only")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 tests collected" in done.stdout


def test_a_test_not_marked_pg_that_asks_for_postgresql_fails_and_never_starts_it(tmp_path: Path) -> None:
    tests = (
        "def test_unmarked():\n    pgserver.shared()\n\n\n"
        "def test_unmarked_start():\n    pgserver.PgServer.start()\n\n\n"
        "@pytest.mark.pg\ndef test_marked():\n    pgserver._allowed()\n"
    )
    done = _pytest(tmp_path, tests, "-rf")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 failed, 1 passed" in done.stdout
    for name in ("test_unmarked", "test_unmarked_start"):
        assert f"NotMarked: test_it.py::{name} uses PostgreSQL but is not marked pg" in done.stdout
    assert "vaultsync-pg-" not in done.stdout + done.stderr

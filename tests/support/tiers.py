"""The test tiers: the markers ``make check`` leaves out, and the checks that keep them where the tests are.

A tier mark is written where the test is: ``@pytest.mark.pg`` on the function, ``pytestmark`` for a whole module,
or ``pytest.param("postgres", marks=pytest.mark.pg)`` on the one parameter that needs it. Nothing adds a mark by
name; tests/conftest.py runs the two checks below, which fail a test whose need shows and whose mark is missing:

- at collection (``check_marked``): a test taking a fixture of ``NEEDS`` without that tier's mark, or
  parametrized with "postgres" without ``pg``;
- while a test runs (``pytest_runtest_protocol``): a test not marked ``pg`` that asks tests/support/pgserver.py for
  a server (started here, in a benchmark or by any other path) fails with ``pgserver.NotMarked``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from support.pgserver import UNMARKED_ENV

TIERS = ("corpus", "pg", "browser", "client", "slow")
"""The markers ``make check`` leaves out (pyproject.toml says what each means; the Makefile's ``CHECK_MARKERS``)."""

NEEDS = {
    "corpus": {"help_corpus", "help_clone", "help_replayed", "help_backfilled", "planted_history", "planted_db"},
    "browser": {"browser"},  # Debian's chromium through Playwright
    "client": {"matrix", "unpacked"},  # other MCP SDKs (Node.js, mcp 1.x in .venv-sdk1) and the bundle's official CLI
}
"""The tier each fixture needs: a test taking one must carry the tier's mark (checked at collection). ``pg`` is
checked by parameter (a parametrization "postgres") at collection and, for every other way in, when the test runs:
tests/support/pgserver.py refuses to start or hand out a server to a test not marked ``pg``."""


def missing_tiers(item: pytest.Item) -> set[str]:
    """The tiers ``item`` visibly needs (``NEEDS``, a "postgres" parameter) and is not marked with."""
    fixtures = set(getattr(item, "fixturenames", ()))
    needed = {tier for tier, names in NEEDS.items() if fixtures & names}
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "postgres" in callspec.params.values():
        needed.add("pg")
    return needed - {mark.name for mark in item.iter_markers()}


def check_marked(items: list[pytest.Item]) -> None:
    """A usage error naming every test that lacks a tier mark it visibly needs (``missing_tiers``)."""
    unmarked = [f"{item.nodeid} (needs {', '.join(sorted(m))})" for item in items if (m := missing_tiers(item))]
    if unmarked:
        raise pytest.UsageError(
            "tests not marked with the tiers they need (mark the test, its module's pytestmark or the parameter; "
            "see CONTRIBUTING.md, Tests):\n  " + "\n  ".join(unmarked)
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """While a test not marked ``pg`` runs (its setup, call and teardown), tests/support/pgserver.py refuses to start
    or hand out a PostgreSQL server (``UNMARKED_ENV``), failing the test with a line that says to mark it."""
    if item.get_closest_marker("pg") is None:
        os.environ[UNMARKED_ENV] = item.nodeid
    try:
        return (yield)
    finally:
        os.environ.pop(UNMARKED_ENV, None)

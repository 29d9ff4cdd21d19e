"""Debian's chromium driven by Playwright (never Playwright's own downloaded browsers), for the tests of pages:
the web page (tests/ui/), the note-history MCP App (tests/server/test_history_app_browser.py) and the docs site
(tests/test_docs.py). ``browser`` is a module-scoped fixture: import it into the test module that takes it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless chromium, once per test module (skipped without chromium or Playwright)."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (make deps installs it when run as root: apt-get install chromium)")
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()

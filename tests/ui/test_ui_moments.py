"""Moments at the edges of the history, and a search in flight, in Debian's chromium (as tests/ui/test_ui.py drives
it): before the first batch every pane says so, a date after now brings the timeline to now, and a search says it is
searching until its answer (hits, or "no matches") is drawn."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from support.browser import browser  # noqa: F401 (fixture)
from support.cli import run_cli
from support.ui_page import (  # noqa: F401 (fixtures)
    History,
    Server,
    Watched,
    load_demo,
    open_page,
    page,
    server,
    wait_until,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FIRST = "2025-01-06 09:00:00 UTC"
"""The demo history's first commit (``examples/demo.py``), as the page writes a moment."""


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """The demo's dated history of three commits, imported with ``import --from-git``."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    demo = load_demo()
    work = tmp_path_factory.mktemp("ui-moments")
    vault, db = work / "vault", work / "db" / "vaultsync.db"
    demo.build_history(vault)
    run_cli("import", str(vault), "--from-git", db=db, check=True)
    return History.of(vault, db)


def choose(tab: Any, moment: str) -> None:
    tab.fill("#moment-input", moment)
    tab.click("#go")


def test_a_moment_before_the_history_says_so_in_every_pane(page: Watched, server: Server) -> None:
    tab = open_page(page, server)
    tab.click("#tab-changes")  # its window starts at the batch before the moment shown
    wait_until(tab, "document.querySelector('#changes').dataset.state === 'ready'")
    choose(tab, "2024-12-01")
    wait_until(tab, "document.querySelector('#tree').dataset.at !== 'now'")
    wait_until(tab, "document.querySelector('#changes-info').textContent.includes('before the first')")
    before = f"before the first recorded moment ({FIRST})"
    assert before in tab.locator("#changes-info").text_content()
    assert before in tab.locator("#moment-label").text_content()
    assert before in tab.locator("#tree-count").text_content()
    assert tab.locator("#changes li").count() == 0
    assert tab.locator("#error").text_content() == "", "no error: a moment before the history is a state"
    choose(tab, "2025-03-20")  # back inside the history: the window follows the moment again
    wait_until(tab, "document.querySelector('#changes-info').textContent.includes('2025-03-20')")
    wait_until(tab, "document.querySelector('#changes').dataset.state === 'ready'")
    assert tab.locator("#changes li").count() > 0
    assert tab.locator("#error").text_content() == ""
    assert not page.dialogs and not page.errors and not page.foreign


def test_a_date_after_now_brings_the_timeline_to_now(page: Watched, server: Server) -> None:
    tab = open_page(page, server)  # the timeline shows the history's batches, early in 2025, not now
    assert "(now)" not in tab.locator("#axis-end").text_content()
    choose(tab, "2999-01-01")
    wait_until(tab, "document.querySelector('#moment-label').textContent === 'as of now'")
    assert tab.locator("#axis-end").text_content().endswith("(now)"), "the timeline followed to now"
    assert tab.locator("#cursor").is_visible()
    assert tab.evaluate("document.querySelector('#timeline').getAttribute('aria-valuetext')") == "now"


def test_a_search_says_it_is_searching_then_its_answer(page: Watched, server: Server) -> None:
    held: list[Any] = []
    tab = open_page(page, server)
    tab.route("**/api/search?*", lambda route: held.append(route))  # the answer held back, as a slow first search is
    tab.fill("#search-input", "beacons")
    wait_until(tab, "document.querySelector('#search-info').textContent === 'searching…'")
    assert tab.locator("#search-results").get_attribute("data-state") == "searching"
    for _ in range(100):  # the request reaches the route while the page is polled
        if held:
            break
        tab.wait_for_timeout(50)
    assert held, "the search was asked"
    assert tab.locator("#search-info").text_content() == "searching…", "still searching while the answer is due"
    held.pop().continue_()
    tab.unroute("**/api/search?*")
    wait_until(tab, "document.querySelector('#search-results').dataset.state === 'ready'")
    assert tab.locator("#search-results li").count() > 0
    assert "hit" in tab.locator("#search-info").text_content()
    tab.fill("#search-input", "zqxjkvw")
    wait_until(tab, "document.querySelector('#search-info').textContent.startsWith('no matches as of')")
    assert tab.locator("#search-results li").count() == 0
    assert not page.dialogs and not page.errors and not page.foreign

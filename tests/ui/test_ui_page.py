"""The page as a person sees it, in Debian's chromium (as tests/ui/test_ui.py drives it): Obsidian's syntax
rendered, revisions told apart, labels whole, diff columns aligned, no sideways scrolling, and every tree,
backlink, search and change entry a real link to the page's own address (new tab, bookmark, Back)."""

from __future__ import annotations

import json
import re
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
    wait_note,
    wait_until,
)

from vaultsync.times import parse_time

TASKS = "Tasks.md"
TASKS_TEXT = (
    "# Tasks\n\n- [ ] buy milk\n- [x] call Ana #errand\n\nSome ==highlighted **words**== here. ^block-1\n\n"
    "#project/alpha and #todo, but not a == b.\n"
)
SECOND = ["2025-05-01T10:00:00.25Z", "2025-05-01T10:00:00.75Z"]
ATLAS = "Projects/Atlas/Atlas Overview.md"

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """The demo's dated history, then a note with Obsidian's syntax, edited twice within one second."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    demo = load_demo()
    work = tmp_path_factory.mktemp("ui-page")
    vault, db = work / "vault", work / "db" / "vaultsync.db"
    demo.build_history(vault)
    (vault / TASKS).write_text(TASKS_TEXT, encoding="utf-8")
    long_name = "Reading/" + "A_very_long_note_name_without_any_place_to_break_it_" * 3 + "zeppelin.md"
    (vault / long_name).write_text("# Long\n\n" + "y" * 200 + " zeppelin\n", encoding="utf-8")
    demo.git(vault, "add", "-A")
    demo.git(vault, "commit", "-q", "-m", "tasks", when="2025-04-07T09:00:00Z")
    run_cli("import", str(vault), "--from-git", db=db, check=True)
    for n, moment in enumerate(SECOND):
        with (vault / TASKS).open("a", encoding="utf-8") as f:
            f.write(f"\nedit {n}\n")
        run_cli("import", str(vault), "--known-at", moment, db=db, check=True)
    return History.of(vault, db)


def show(tab: Any, path: str, at: str = "now") -> None:
    tab.evaluate("h => { location.hash = h; }", f"#note={path}" if at == "now" else f"#at={at}&note={path}")
    wait_note(tab, path, at)


def test_obsidian_syntax_is_rendered_and_the_source_kept(page: Any, server: Server) -> None:
    tab = open_page(page, server)
    show(tab, TASKS)
    body = tab.locator("#note-body")
    boxes = body.locator("input[type=checkbox]")
    assert boxes.count() == 2
    assert [boxes.nth(i).is_checked() for i in range(2)] == [False, True]
    assert all(boxes.nth(i).is_disabled() for i in range(2))
    assert body.locator("mark").text_content() == "highlighted words"
    assert body.locator("mark strong").text_content() == "words"
    assert body.locator(".block-id").text_content() == "^block-1"
    assert tab.eval_on_selector_all("#note-body .tag", "e => e.map(x => x.textContent)") == [
        "#errand",
        "#project/alpha",
        "#todo",
    ]
    text = body.text_content()
    assert "==" not in text.replace("a == b", "") and "[ ]" not in text and "[x]" not in text
    assert tab.locator("#note-source").text_content().startswith(TASKS_TEXT)
    assert not page.dialogs and not page.errors and not page.foreign


def test_revisions_of_one_second_are_told_apart(page: Any, server: Server, history: History) -> None:
    tab = open_page(page, server)
    show(tab, TASKS)
    rows = tab.eval_on_selector_all("#revisions tbody tr", "rows => rows.map(r => r.innerText.trim())")
    assert len(rows) == 3 and len(set(rows)) == 3, rows
    shown = tab.eval_on_selector_all("#revisions tbody tr td.rev", "e => e.map(x => x.textContent)")
    listed = json.loads(run_cli("history", TASKS, "--json", db=history.db, check=True).stdout)
    assert shown == [r["id"] for r in listed]  # the ids history prints, one a revision
    times = tab.eval_on_selector_all("#revisions a.jump", "e => e.map(x => x.textContent)")
    assert times[1:] == ["2025-05-01 10:00:00.250 UTC", "2025-05-01 10:00:00.750 UTC"], times


def test_labels_and_the_moment_box_are_whole(page: Any, server: Server) -> None:
    tab = open_page(page, server)
    for edge in ("#axis-start", "#axis-end"):
        label = tab.locator(edge).text_content()
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC( \(now\))?", label), label
    fits = tab.evaluate("""() => {
        const input = document.querySelector('#moment-input'), style = getComputedStyle(input);
        const g = document.createElement('canvas').getContext('2d');
        g.font = `${style.fontSize} ${style.fontFamily}`;
        const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
        return [g.measureText(input.placeholder).width, room]; }""")
    assert fits[0] <= fits[1], fits


def test_side_by_side_columns_stay_aligned(page: Any, server: Server) -> None:
    tab = open_page(page, server)
    show(tab, ATLAS)
    wait_until(tab, "document.querySelector('#diff').dataset.pair !== undefined")
    tab.click("#diff-side")
    while tab.locator("#diff button.fold").count():
        tab.locator("#diff button.fold").first.click()
    tops = tab.evaluate("""() => {
        const l = [...document.querySelectorAll('#diff pre.left > .row')];
        const r = [...document.querySelectorAll('#diff pre.right > .row')];
        return [l.length, r.length, l.map((x, i) => [Math.round(x.getBoundingClientRect().top),
                                                   Math.round(r[i].getBoundingClientRect().top)])]; }""")
    assert tops[0] == tops[1] and tops[0] >= 2
    assert all(a == b for a, b in tops[2]), tops[2]
    changed = tab.eval_on_selector_all("#diff pre.right > .row.changed ins", "e => e.length")
    assert changed >= 1


def test_the_search_panel_never_scrolls_sideways(page: Any, server: Server) -> None:
    tab = open_page(page, server)
    tab.fill("#search-input", "zeppelin")
    tab.press("#search-input", "Enter")
    wait_until(tab, "document.querySelectorAll('#search-results > li').length === 1")
    assert tab.locator("#search-results a[data-path*='A_very_long_note_name']").count() == 1
    widths = tab.evaluate(
        "() => { const p = document.querySelector('#side-panel'); return [p.scrollWidth, p.clientWidth]; }"
    )
    assert widths[0] <= widths[1], widths


def test_search_says_no_matches_and_refuses_a_query_without_words(page: Any, server: Server) -> None:
    """A word found nowhere: "no matches" above an empty list. A query of spaces, wildcards or punctuation: the
    server's one-line refusal, in the search pane and the page's error line, gone at the next answered query."""
    tab = open_page(page, server)
    info = "document.querySelector('#search-info').textContent"
    tab.fill("#search-input", "qwzxvk")
    tab.press("#search-input", "Enter")
    wait_until(tab, f"{info}.startsWith('no matches as of ')")
    assert tab.locator("#search-results > li").count() == 0
    for query in ("*", "   ", "?!"):
        tab.fill("#search-input", "zeppelin")
        tab.press("#search-input", "Enter")
        wait_until(tab, "document.querySelectorAll('#search-results > li').length === 1")
        assert tab.locator("#error").text_content() == ""
        tab.fill("#search-input", query)
        tab.press("#search-input", "Enter")
        wait_until(tab, f"{info}.startsWith('the query has no words to search for')")
        assert tab.locator("#error").text_content() == tab.evaluate(info)
        assert tab.locator("#search-results > li").count() == 0
    assert not page.dialogs and not page.foreign


def test_entries_are_links_to_the_page_itself(page: Any, server: Server, browser: Any, history: History) -> None:
    tab = open_page(page, server)
    moment = "2025-03-20"
    micros = parse_time(moment)
    tab.fill("#moment-input", moment)
    tab.press("#moment-input", "Enter")
    wait_until(tab, f"document.querySelector('#tree').dataset.at === '{micros}'")
    # tree entries: real addresses of the note as of the moment
    hrefs = tab.eval_on_selector_all("#tree a.note-link", "e => e.map(x => x.getAttribute('href'))")
    assert hrefs and all(h.startswith("#") and f"at={micros}" in h and "note=" in h for h in hrefs)
    home = tab.locator("#tree a.note-link[data-path='Home.md']")
    home.click()
    wait_note(tab, "Home.md", micros)
    # backlinks and links in the note body are addresses too; following one and going Back returns here
    backlinks = tab.eval_on_selector_all("#backlinks a", "e => e.map(x => x.getAttribute('href'))")
    assert all(h.startswith("#") and "note=" in h for h in backlinks)
    body_links = tab.locator("#note-body a.wikilink[data-path]")
    assert body_links.count() >= 1
    target = body_links.first.get_attribute("data-path")
    body_links.first.click()
    wait_note(tab, target, micros)
    tab.go_back()
    wait_note(tab, "Home.md", micros)
    tab.go_forward()
    wait_note(tab, target, micros)
    # a bookmark (or a new tab) of that address opens the same note as of the same moment
    other = browser.new_context(viewport={"width": 1360, "height": 860}).new_page()
    try:
        other.goto(server.url + tab.evaluate("location.hash"))
        wait_until(other, "document.body.dataset.ready === '1'")
        wait_note(other, target, micros)
    finally:
        other.context.close()
    # every change opens its own diff, as its own address
    tab.click("#tab-changes")
    tab.fill("#since-input", "2025-01-20")
    tab.press("#since-input", "Enter")
    wait_until(tab, "document.querySelector('#changes').dataset.state === 'ready'")
    entries = tab.eval_on_selector_all(
        "#changes > li", "e => e.map(x => [x.dataset.path, x.dataset.kind, x.dataset.from])"
    )
    assert len(entries) >= 3
    since = parse_time("2025-01-20")
    for i, (path, _kind, was) in enumerate(entries):
        link = tab.locator("#changes > li a.change").nth(i)
        href = link.get_attribute("href")
        assert href.startswith("#") and "note=" in href and f"since={since}" in href
        link.click()
        pair = f"{was or path}@{since}|{path}@{micros}"
        wait_until(tab, "p => document.querySelector('#diff').dataset.pair === p", pair)
    assert not page.dialogs and not page.errors and not page.foreign

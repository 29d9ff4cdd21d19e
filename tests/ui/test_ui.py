"""``vaultsync ui`` in a real browser: Debian's chromium driven by Playwright, against a real server process.

The vault is the sample vault's dated git history (``examples/demo.py``'s three commits, plus a fourth
that replaces two words and adds a hostile note), imported with ``import --from-git``. The oracle for
every view is the command line: the tree must equal ``ls --as-of``, an opened note ``read --as-of``,
search results ``search --as-of``; the diff must mark exactly the words the test itself changed.

The page's guard (token, Host, Origin) is checked with plain HTTP requests, browser or not. The
screenshots the README and docs/web-page.md show are taken here; ``VAULTSYNC_WRITE_SCREENSHOTS=1`` writes them to docs/.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from support.browser import browser  # noqa: F401 (fixture)
from support.cli import invoke, run_cli
from support.repo import REPO
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

MOMENTS = ["2025-01-20", "2025-02-10", "2025-03-20"]
"""Between the history's commits (2025-01-06, 02-03, 03-03, 04-07): three different vaults."""
EDITED = "Projects/Atlas/Atlas Overview.md"
ONBOARDING = "Team/Onboarding.md"
POLICY = "Team/Remote Work Policy.md"
REPLACED, REPLACEMENT = "lighthouse beacons", "mesh radio relays"
DELETED = "Recipes/Team Lunch Chili.md"
RENAMED_AGAIN = "Archive/Inbox 2025-01.md"
HOSTILE_NAME = "Hostile <img src=x onerror=alert('name')>.md"
HOSTILE = """---
title: "<script>alert('fm')</script>"
x: "<img src=x onerror=alert('fm2')>"
---
# Hostile <script>alert('h1')</script>

<script>alert("script")</script>

<img src=x onerror="alert('img')">

<svg onload="alert('svg')"><script>alert('svg-script')</script></svg>

[click me](javascript:alert('link')) [case](JaVaScRiPt:alert('case')) [ent](&#106;avascript:alert('ent'))

[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) ![svg](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)

<a href="javascript:alert('a')" onmouseover="alert('hover')">hover me</a> <iframe src="javascript:alert('frame')"></iframe>

[[javascript:alert('wiki')]] [[x" onmouseover="alert('attr')]] ![remote](http://example.com/x.png)

<div style="background:url(javascript:alert('css'))">styled</div>
"""  # noqa: E501 - the hostile note's lines are kept whole

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """The demo's dated history of notes/, plus a fourth commit: two words replaced, a hostile note added, a
    note deleted, the renamed inbox renamed again."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    demo = load_demo()
    work = tmp_path_factory.mktemp("ui")
    vault = work / "vault"
    demo.build_history(vault)
    edited = vault / EDITED
    text = edited.read_text(encoding="utf-8")
    assert text.count(REPLACED) == 1
    edited.write_text(text.replace(REPLACED, REPLACEMENT), encoding="utf-8")
    (vault / HOSTILE_NAME).write_text(HOSTILE, encoding="utf-8")
    (vault / DELETED).unlink()
    (vault / "Archive").mkdir()
    demo.git(vault, "mv", demo.RENAMED[1], RENAMED_AGAIN)  # Inbox.md -> Inbox (January).md -> Archive/...
    demo.git(vault, "add", "-A")
    demo.git(vault, "commit", "-q", "-m", "Words replaced; a hostile note", when="2025-04-07T09:00:00Z")
    db = work / "db" / "vaultsync.db"
    run_cli("import", str(vault), "--from-git", db=db, check=True)
    return History.of(vault, db)


def go_to(tab: Any, moment: str) -> int:
    """Type a moment into the date box, as a person would, and wait until the tree shows it."""
    micros = parse_time(moment)
    tab.fill("#moment-input", moment)
    tab.press("#moment-input", "Enter")
    wait_until(tab, f"document.querySelector('#tree').dataset.at === '{micros}'")
    return micros


def open_note(tab: Any, path: str, micros: int | str) -> None:
    """Open a note from the tree (unfolding its folders) and wait until it shows as of ``micros``."""
    for i in range(1, path.count("/") + 1):
        folder = "/".join(path.split("/")[:i])
        details = tab.locator(f"#tree details[data-folder={json.dumps(folder)}]")
        if details.get_attribute("open") is None:
            details.locator(":scope > summary").click()
    tab.locator(f"#tree a.note-link[data-path={json.dumps(path)}]").click()
    wait_note(tab, path, micros)


def source(tab: Any) -> str:
    return tab.locator("#note-source").text_content()


def cli_json(db: Path, *args: str) -> Any:
    done = invoke(*args, "--json", db=db, check=True)
    return json.loads(done.stdout)


def screenshot(tab: Any, name: str, tmp_path: Path, **kwargs: Any) -> None:
    target = REPO / "docs" / name if os.environ.get("VAULTSYNC_WRITE_SCREENSHOTS") else tmp_path / name
    tab.screenshot(path=str(target), **kwargs)
    assert target.stat().st_size > 1000


# ---------------------------------------------------------------------------------------------- the browser


@pytest.mark.browser
def test_three_moments_tree_note_links_and_search_equal_the_cli(
    page: Watched, server: Server, history: History, tmp_path: Path
) -> None:
    tab = open_page(page, server)
    shown_trees, hit_counts = [], []
    for moment in MOMENTS:
        micros = go_to(tab, moment)
        # the tree is `ls --as-of`, marks aside; notes added later are hidden unless asked for
        listed = sorted(r["path"] for r in cli_json(history.db, "ls", "--as-of", moment))
        tree = sorted(tab.eval_on_selector_all("#tree a.note-link:not(.ghost)", "els => els.map(e => e.dataset.path)"))
        assert tree == listed
        shown_trees.append(tree)
        counts = tab.eval_on_selector_all("#tree details[data-folder='Team'] > summary .count", "e => e[0].textContent")
        assert int(counts) == sum(1 for p in listed if p.startswith("Team/"))
        # the note as of the moment is `read --as-of`, byte for byte (the Source view shows the exact text)
        open_note(tab, EDITED, micros)
        assert source(tab) == invoke("read", EDITED, "--as-of", moment, db=history.db, check=True).stdout
        # links resolve as of the moment: the policy note exists from February on, and opens as it was then
        open_note(tab, ONBOARDING, micros)
        policy_read = invoke("read", POLICY, "--as-of", moment, db=history.db)
        policy_links = tab.locator(f"#note-body a.wikilink[data-path={json.dumps(POLICY)}]")
        if policy_read.returncode != 0:
            assert policy_links.count() == 0
            assert tab.locator("#note-body .dangling").count() >= 2  # the Markdown link and the embed
        else:
            assert policy_links.count() == 2
            policy_links.first.click()
            wait_note(tab, POLICY, micros)
            assert source(tab) == policy_read.stdout
            assert tab.locator("#moment-label").text_content() == f"as of {moment} 00:00:00 UTC"
        # search at the moment is `search --as-of` (default mode): the same hits, in order, matches marked
        tab.fill("#search-input", "beacons")
        tab.press("#search-input", "Enter")
        expected = cli_json(history.db, "search", "beacons", "--as-of", moment, "--limit", "20")["hits"]
        wait_until(
            tab,
            f"document.querySelectorAll('#search-results > li').length === {len(expected)} && "
            f"document.querySelector('#search-info').textContent.includes('{moment}')",
        )
        shown = tab.eval_on_selector_all("#search-results > li", "els => els.map(e => e.dataset.path)")
        assert shown == [h["path"] for h in expected]
        snippets = tab.eval_on_selector_all("#search-results .snippet", "els => els.map(e => e.textContent)")
        assert snippets == [h["snippet"].replace("**", "") for h in expected]
        marked = tab.eval_on_selector_all("#search-results .snippet mark", "els => els.map(e => e.textContent)")
        assert marked == [m for h in expected for m in h["snippet"].split("**")[1::2]]
        hit_counts.append(len(expected))
        if moment == MOMENTS[1]:
            screenshot(tab, "ui-search.png", tmp_path)
    assert len({tuple(t) for t in shown_trees}) == 3  # three different vaults
    assert hit_counts[0] == 0 and hit_counts[1] > 0  # the decision appeared in February
    assert not page.dialogs and not page.errors and not page.foreign


@pytest.mark.browser
def test_a_diff_between_two_revisions_marks_exactly_the_changed_words(
    page: Watched, server: Server, history: History, tmp_path: Path
) -> None:
    demo = load_demo()
    tab = open_page(page, server)
    open_note(tab, EDITED, "now")
    revisions = cli_json(history.db, "history", EDITED)
    assert tab.locator("#revisions tbody tr").count() == len(revisions) == 4

    def compare(a: int, b: int) -> tuple[list[str], list[str]]:
        tab.locator("input[name='rev-a']").nth(a).check()
        tab.locator("input[name='rev-b']").nth(b).check()
        pair = "|".join(f"{r['path']}@{parse_time(r['known_at'])}" for r in (revisions[a], revisions[b]))
        wait_until(tab, "p => document.querySelector('#diff').dataset.pair === p", pair)
        removed = " ".join(tab.eval_on_selector_all("#diff del", "els => els.map(e => e.textContent)")).split()
        added = " ".join(tab.eval_on_selector_all("#diff ins", "els => els.map(e => e.textContent)")).split()
        return removed, added

    # February appended the decision; April replaced two of its words
    assert compare(0, 1) == ([], demo.DECISION.split())
    assert compare(2, 3) == (REPLACED.split(), REPLACEMENT.split())
    assert compare(3, 2) == (REPLACEMENT.split(), REPLACED.split())
    # side by side: the removed words on the left, the added ones on the right, the rest on both sides
    tab.click("#diff-side")
    assert tab.locator("#diff button.fold").count() >= 2  # long unchanged stretches are folded...
    while tab.locator("#diff button.fold").count():
        tab.locator("#diff button.fold").first.click()  # ...and unfold to the exact text
    left = tab.locator("#diff pre.left").text_content()
    right = tab.locator("#diff pre.right").text_content()
    assert left == invoke("read", EDITED, "--as-of", "2025-04-07T09:00:00Z", db=history.db, check=True).stdout
    assert right == invoke("read", EDITED, "--as-of", "2025-03-03T09:00:00Z", db=history.db, check=True).stdout
    assert tab.eval_on_selector_all("#diff pre.left del", "e => e.map(x => x.textContent)") == [REPLACEMENT]
    tab.click("#diff-inline")
    compare(2, 3)
    tab.evaluate("document.querySelector('#revisions-box').scrollIntoView()")
    screenshot(tab, "ui-note-diff.png", tmp_path)
    assert not page.dialogs and not page.errors and not page.foreign


HOLD_FIRST_CHANGES = """() => {
  // the browser's fetch, wrapped: the first /api/changes answer waits for window.releaseChanges();
  // window.changesHandled counts answers the page's code has finished with (a task after its await)
  const real = window.fetch;
  let asked = 0;
  window.releaseChanges = null;
  window.changesHandled = 0;
  window.fetch = async (url, init) => {
    const response = await real(url, init);
    if (!String(url).startsWith("/api/changes")) return response;
    const first = ++asked === 1;
    const text = await response.text();
    if (first) await new Promise((release) => { window.releaseChanges = release; });
    const answer = new Response(text, {status: response.status, headers: response.headers});
    const json = answer.json.bind(answer);
    answer.json = async () => {
      const body = await json();
      setTimeout(() => { window.changesHandled += 1; }, 0);
      return body;
    };
    return answer;
  };
}"""


def changes_shown(tab: Any) -> list[list[str]]:
    return tab.eval_on_selector_all(
        "#changes > li", "els => els.map(e => [e.dataset.kind, e.dataset.path, e.dataset.from])"
    )


@pytest.mark.browser
def test_changes_between_two_moments_equal_the_cli_and_open_their_diff(
    page: Watched, server: Server, history: History
) -> None:
    demo = load_demo()
    tab = open_page(page, server)
    until = go_to(tab, MOMENTS[2])
    tab.click("#tab-changes")  # asks for the window since the batch before the moment...
    tab.fill("#since-input", MOMENTS[0])
    tab.press("#since-input", "Enter")  # ...and this for the wider one; the page shows the one asked for last
    expected = cli_json(history.db, "changes", "--since", MOMENTS[0], "--until", MOMENTS[2])
    wait_until(
        tab,
        "w => { const list = document.querySelector('#changes'); "
        "return list.dataset.state === 'ready' && list.dataset.window === w; }",
        f"{parse_time(MOMENTS[0])}|{until}",
    )
    assert tab.locator("#changes-info").text_content().startswith(f"{MOMENTS[0]} 00:00:00 UTC → {MOMENTS[2]} ")
    assert changes_shown(tab) == [[c["kind"], c["path"], c["renamed_from"] or ""] for c in expected]
    assert {c["kind"] for c in expected} == {"created", "modified", "renamed"}
    # the edited note's diff over the window: both of the demo's additions, nothing removed
    tab.locator(f"#changes > li[data-path={json.dumps(EDITED)}] a.change").first.click()
    pair = f"{EDITED}@{parse_time(MOMENTS[0])}|{EDITED}@{parse_time(MOMENTS[2])}"
    wait_until(tab, "p => document.querySelector('#diff').dataset.pair === p", pair)
    added = " ".join(tab.eval_on_selector_all("#diff ins", "els => els.map(e => e.textContent)")).split()
    assert tab.locator("#diff del").count() == 0
    assert added == demo.DECISION.split() + "Beacons go to two crews first; the rest follow in April.".split()
    assert not page.dialogs and not page.errors and not page.foreign


@pytest.mark.browser
def test_a_late_answer_for_an_older_window_never_replaces_the_changes_list(
    page: Watched, server: Server, history: History
) -> None:
    """Opening the tab asks for one window, typing a "since" for another: whichever answer comes last,
    the list and its header show the window asked for last."""
    tab = open_page(page, server)
    since, until = parse_time(MOMENTS[0]), go_to(tab, MOMENTS[2])
    tab.evaluate(HOLD_FIRST_CHANGES)
    tab.click("#tab-changes")  # asks for the changes since the batch before the moment: held
    wait_until(tab, "window.releaseChanges !== null")
    tab.fill("#since-input", MOMENTS[0])
    tab.press("#since-input", "Enter")  # asks for the wider window: answered at once
    wait_until(tab, "window.changesHandled === 1")
    expected = [
        [c["kind"], c["path"], c["renamed_from"] or ""]
        for c in cli_json(history.db, "changes", "--since", MOMENTS[0], "--until", MOMENTS[2])
    ]
    assert {kind for kind, _, _ in expected} == {"created", "modified", "renamed"}  # more than the held window's
    assert changes_shown(tab) == expected
    tab.evaluate("window.releaseChanges()")  # the older window's answer arrives last
    wait_until(tab, "window.changesHandled === 2")
    assert changes_shown(tab) == expected
    assert tab.locator("#changes-info").text_content().startswith(f"{MOMENTS[0]} 00:00:00 UTC → {MOMENTS[2]} ")
    assert tab.get_attribute("#changes", "data-window") == f"{since}|{until}"
    assert tab.get_attribute("#changes", "data-state") == "ready"
    assert not page.dialogs and not page.errors and not page.foreign


@pytest.mark.browser
def test_the_timeline_by_keyboard_alone(page: Watched, server: Server, history: History, tmp_path: Path) -> None:
    tab = open_page(page, server)
    batches = [parse_time(c[0]) for c in load_demo().COMMITS] + [parse_time("2025-04-07T09:00:00Z")]
    for _ in range(5):  # the strip is the first stop of the Tab key
        if tab.evaluate("document.activeElement.id") == "timeline":
            break
        tab.keyboard.press("Tab")
    assert tab.evaluate("document.activeElement.id") == "timeline"

    def moment() -> str:
        return tab.get_attribute("#timeline", "aria-valuetext")

    def tree_at(expected: str) -> None:
        wait_until(tab, f"document.querySelector('#tree').dataset.at === '{expected}'")

    tab.keyboard.press("Home")
    tree_at(str(batches[0]))
    assert moment() == "2025-01-06T09:00:00Z"
    count = len(cli_json(history.db, "ls", "--as-of", "2025-01-06T09:00:00Z"))
    assert tab.locator("#tree a.note-link:not(.ghost)").count() == count
    for expected in batches[1:]:
        tab.keyboard.press("ArrowRight")
        tree_at(str(expected))
    tab.keyboard.press("ArrowRight")  # past the last batch: now
    tree_at("now")
    assert moment() == "now"
    tab.keyboard.press("ArrowLeft")
    tree_at(str(batches[-1]))
    tab.keyboard.press("End")
    tree_at("now")
    assert tab.locator("#axis-end").text_content().endswith("(now)"), "the strip follows to now"
    tab.keyboard.press("0")  # back to the batches
    before = tab.locator("#axis-start").text_content()
    tab.keyboard.press("+")
    assert tab.locator("#axis-start").text_content() != before  # zoomed in around the moment
    tab.keyboard.press("0")
    assert tab.locator("#axis-start").text_content() == before
    # a typed date, by keyboard too: Tab to the date box, type, Enter
    while tab.evaluate("document.activeElement.id") != "moment-input":
        tab.keyboard.press("Tab")
    tab.keyboard.type("2025-02-10")
    tab.keyboard.press("Enter")
    tree_at(str(parse_time("2025-02-10")))
    screenshot(tab, "ui-timeline.png", tmp_path, clip={"x": 0, "y": 0, "width": 1360, "height": 150})
    tab.keyboard.type("x")  # appended to the box: not a time, refused with a message, moment kept
    tab.keyboard.press("Enter")
    assert "invalid time" in tab.locator("#error").text_content()
    assert moment() == "2025-02-10T00:00:00Z"
    assert not page.dialogs and not page.foreign


@pytest.mark.browser
def test_a_hostile_note_runs_nothing(page: Watched, server: Server, history: History) -> None:
    tab = open_page(page, server)
    tab.evaluate("window.pwned = 0")
    open_note(tab, HOSTILE_NAME, "now")
    assert tab.locator("#tree a.note-link.active").text_content() == HOSTILE_NAME[:-3]  # the name, as text
    assert tab.locator("#note-title").text_content() == "Hostile <script>alert('h1')</script>"
    assert "<script>alert('fm')</script>" in tab.locator("#frontmatter").text_content()
    for link in tab.locator("#note-body a").all():  # click everything there is to click, hover over it
        link.hover()
        link.click()
    tab.locator("#note-body").hover()
    tab.click("#show-source")
    assert source(tab) == (history.vault / HOSTILE_NAME).read_text(encoding="utf-8")
    tab.click("#show-rendered")
    tab.wait_for_timeout(300)
    found = tab.evaluate("""() => {
        const all = [...document.querySelectorAll('*')];
        return {
            scripts: document.querySelectorAll('script').length,
            handlers: all.filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
            styled: document.querySelectorAll('#note-body [style]').length,
            embedded: document.querySelectorAll(
                '#note-body svg, #note-body iframe, #note-body img, #note-body object').length,
            js: [...document.querySelectorAll('[href], [src]')].filter(e =>
                /^\\s*(javascript|data|vbscript):/i.test(e.getAttribute('href') || e.getAttribute('src') || '')).length,
        };
    }""")
    assert found == {"scripts": 1, "handlers": 0, "styled": 0, "embedded": 0, "js": 0}  # the page's own script
    assert page.dialogs == []
    assert page.errors == []
    assert page.foreign == []  # nothing a note names was fetched (the remote image included)
    assert tab.evaluate("window.pwned") == 0


# ---------------------------------------------------------------------------------------------- the views


def test_tree_marks_agree_with_git(history: History) -> None:
    """The tree's marks relative to now, against git's own account (``git diff -M --name-status`` from the
    commit in force at each moment to HEAD): modified, renamed (to the path now, across two renames),
    deleted; and the notes added since."""
    from vaultsync.ui import Explorer
    from vaultsync.vault import Vault

    with Vault.open(history.db, readonly=True) as vault:
        explorer = Explorer(vault)
        for moment in MOMENTS:
            micros = parse_time(moment)
            sha = [c for c, when in history.commits if parse_time(when) <= micros][-1]
            git = subprocess.run(
                ["git", "-C", str(history.vault), "diff", "-M", "--name-status", "-z", sha, "HEAD"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split("\0")
            expected: dict[str, Any] = {}
            added = set()
            i = 0
            while i < len(git) - 1:
                status = git[i]
                if status.startswith("R"):
                    expected[git[i + 1]] = ("renamed", git[i + 2])
                    i += 3
                    continue
                if status == "A":
                    added.add(git[i + 1])
                else:
                    expected[git[i + 1]] = ({"M": "modified", "D": "deleted"}[status], None)
                i += 2
            assert vault.listing(moment) == [(r.path, r.title, r.content_hash) for r in vault.ls(moment)]
            tree = explorer.tree(moment)
            marks = {n["path"]: (n["mark"], n.get("now")) for n in tree["notes"] if "mark" in n}
            assert marks == {p: m for p, m in expected.items() if p.endswith(".md")}
            assert set(tree["added_since"]) == {p for p in added if p.endswith(".md")}
            assert sorted(n["path"] for n in tree["notes"]) == sorted(
                r["path"] for r in cli_json(history.db, "ls", "--as-of", moment)
            )
            assert tree["folders"][""] == len(tree["notes"])
            assert tree["folders"]["Team"] == sum(1 for n in tree["notes"] if n["path"].startswith("Team/"))
        assert ("renamed", RENAMED_AGAIN) in marks.values() and ("deleted", None) in marks.values()
        timeline = explorer.timeline()
        assert [b[0] for b in timeline["batches"]] == [parse_time(when) for _, when in history.commits]
        assert timeline["validity"] is True  # the sample vault's policy notes declare valid_from


# ---------------------------------------------------------------------------------------------- the door


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    text: str


def request(
    server: Server,
    path: str,
    params: dict[str, str] | None = None,
    method: str = "GET",
    headers: dict[str, str] | None = None,
) -> Answer:
    """One plain HTTP request, with whatever Host header the test chooses (a browser could not send some)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.putrequest(method, path + (f"?{urlencode(params)}" if params is not None else ""), skip_host=True)
        given = {"host": f"127.0.0.1:{server.port}", **(headers or {})}
        for name, value in given.items():
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        return Answer(
            response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode("utf-8")
        )
    finally:
        conn.close()


def test_requests_without_the_token_or_from_elsewhere_are_refused(server: Server) -> None:
    token = {"token": server.token}
    api = "/api/timeline"
    ok = request(server, api, token)
    assert ok.status == 200 and json.loads(ok.text)["batches"]
    assert "script-src 'self'" in ok.headers["content-security-policy"]
    assert ok.headers["referrer-policy"] == "no-referrer"
    assert request(server, api, headers={"x-vaultsync-token": server.token}).status == 200
    assert request(server, api, token, headers={"host": f"localhost:{server.port}"}).status == 200
    assert request(server, api, token, headers={"origin": server.base}).status == 200
    refused = [
        request(server, api),  # no token
        request(server, api, {"token": server.token[:-1]}),  # a wrong one
        request(server, api, {"token": ""}),
        request(server, "/", {"token": "x" + server.token}),
        request(server, "/static/ui.js"),  # assets need it too
        request(server, api, token, headers={"host": "evil.example"}),  # DNS rebinding
        request(server, api, token, headers={"host": f"evil.example:{server.port}"}),
        request(server, api, token, headers={"host": f"127.0.0.1:{server.port + 1}"}),
        request(server, api, token, headers={"origin": "http://evil.example"}),  # another site's page
        request(server, api, token, headers={"origin": "null"}),
        request(server, api, token, headers={"sec-fetch-site": "cross-site"}),
        request(server, api, token, method="POST"),  # read-only
    ]
    assert [r.status for r in refused] == [401, 401, 401, 401, 401, 403, 403, 403, 403, 403, 403, 405]
    for r in refused:
        assert server.token not in r.text and "vault" not in json.loads(r.text)
        assert "script-src 'self'" in r.headers["content-security-policy"]
    assert request(server, "/api/note", {**token, "path": "Nope.md"}).status == 404
    assert request(server, "/api/tree", {**token, "at": "yesterday"}).status == 400


def test_the_server_listens_on_loopback_only(server: Server) -> None:
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        pytest.skip("no /proc/net/tcp to read listening sockets from (not Linux)")
    listening = []
    for table in tables:
        for line in table.read_text().splitlines()[1:] if table.exists() else []:
            local, state = line.split()[1], line.split()[3]
            address, port = local.rsplit(":", 1)
            if state == "0A" and int(port, 16) == server.port:  # 0A: LISTEN
                listening.append(address)
    assert listening == ["0100007F"]  # 127.0.0.1, and nothing else (no 0.0.0.0, no IPv6 any)


@pytest.mark.browser
def test_deleted_lists_what_the_command_lists_and_opens_each_as_it_was(
    page: Watched, server: Server, history: History
) -> None:
    tab = open_page(page, server)
    tab.click("#tab-deleted")
    wait_until(tab, "document.querySelector('#deleted').dataset.state === 'ready'")
    expected = cli_json(history.db, "deleted")[::-1]  # the page shows the latest deletion first
    assert DELETED in [d["path"] for d in expected]
    shown = tab.eval_on_selector_all("#deleted > li", "els => els.map(e => e.dataset.path)")
    assert shown == [d["path"] for d in expected]
    commands = tab.eval_on_selector_all("#deleted code.restore", "els => els.map(e => e.textContent)")
    assert commands == [d["restore"] for d in expected]
    item = tab.locator(f"#deleted > li[data-path={json.dumps(DELETED)}]")
    before = next(d for d in expected if d["path"] == DELETED)["restore"].split("--as-of ")[1]
    item.locator("a.change").click()
    wait_note(tab, DELETED, parse_time(before))
    text = invoke("read", DELETED, "--as-of", before, db=history.db, check=True).stdout
    tab.click("#show-source")
    assert tab.locator("#note-source").text_content() == text
    go_to(tab, MOMENTS[2])  # before the deletion
    then = [d["path"] for d in cli_json(history.db, "deleted", "--until", MOMENTS[2])[::-1]]
    assert DELETED not in then
    wait_until(
        tab,
        "n => { const list = document.querySelector('#deleted'); "
        "return list.dataset.state === 'ready' && list.children.length === n; }",
        len(then),
    )
    assert tab.eval_on_selector_all("#deleted > li", "els => els.map(e => e.dataset.path)") == then
    assert not then or "still gone" in tab.locator("#deleted-info").text_content()
    assert not page.dialogs and not page.errors and not page.foreign


@pytest.mark.browser
def test_a_revision_id_or_a_time_to_the_nanosecond_typed_as_the_moment(
    page: Watched, server: Server, history: History
) -> None:
    tab = open_page(page, server)
    batch = cli_json(history.db, "changes", "--since", "2025-01-01", "--until", MOMENTS[1])[-1]
    tab.fill("#moment-input", batch["id"])  # an id as changes prints it: the moment of that batch
    tab.press("#moment-input", "Enter")
    wait_until(tab, f"document.querySelector('#tree').dataset.at === '{parse_time(batch['known_at'])}'")
    listed = sorted(r["path"] for r in cli_json(history.db, "ls", "--as-of", batch["id"]))
    assert sorted(tab.eval_on_selector_all("#tree a.note-link:not(.ghost)", "els => els.map(e => e.dataset.path)")) == (
        listed
    )
    nanos = batch["known_at"].replace("Z", ".999999999Z")  # cut to .999999, never rounded to the next second
    tab.fill("#moment-input", nanos)
    tab.press("#moment-input", "Enter")
    wait_until(tab, f"document.querySelector('#tree').dataset.at === '{parse_time(batch['known_at']) + 999_999}'")
    assert not page.dialogs and not page.errors and not page.foreign

"""The note-history MCP App in headless Chromium, inside a test host speaking the MCP Apps host protocol.

Two hosts: ``@modelcontextprotocol/ext-apps``'s own ``AppBridge`` (``ext_apps_host.py``, when the package
is installed in tests/js/inspector), and the minimal host side of the protocol written here: it puts the app
resource's HTML, read from the server with the official MCP client, in a sandboxed iframe
(``allow-scripts`` only: an opaque origin), answers ``ui/initialize``, sends the real ``note_history``
answer as ``ui/notifications/tool-input`` / ``tool-result``, and forwards the view's ``tools/call``
requests to the real server (a Playwright binding into the same official client).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from support import ext_apps_host
from support.browser import browser  # noqa: F401 (fixture)
from support.history_app_helpers import HOSTILE, NOTE, TEXTS, AppsSupport, make_four_revisions
from support.repo import REPO

from vaultsync import Vault
from vaultsync.server import ServeConfig, build_server
from vaultsync.server.apps import APP_URI

pytestmark = pytest.mark.browser

HOST_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>test host</title>
<style>body{margin:0;font:13px system-ui} iframe{border:0;width:100%;height:640px;display:block}</style></head>
<body><iframe id="app" sandbox="allow-scripts" title="note history"></iframe>
<script>
window.hostLog = [];
const frame = document.getElementById("app");
const post = (message) => frame.contentWindow.postMessage(message, "*");
window.startApp = (html, args, result) => {
  window.addEventListener("message", async (event) => {
    if (event.source !== frame.contentWindow) return;
    const m = event.data;
    window.hostLog.push(m.method || "response");
    if (m.method === "ui/initialize") {
      post({jsonrpc: "2.0", id: m.id, result: {protocolVersion: m.params.protocolVersion,
            hostInfo: {name: "vaultsync-test-host", version: "1"}, hostCapabilities: {serverTools: {}},
            hostContext: {theme: "light", displayMode: "inline"}}});
    } else if (m.method === "ui/notifications/initialized") {
      post({jsonrpc: "2.0", method: "ui/notifications/tool-input", params: {arguments: args}});
      post({jsonrpc: "2.0", method: "ui/notifications/tool-result", params: result});
    } else if (m.method === "tools/call") {
      const answer = JSON.parse(await window.forwardTool(JSON.stringify(m.params)));
      post(answer.error ? {jsonrpc: "2.0", id: m.id, error: answer.error} : {jsonrpc: "2.0", id: m.id, result: answer});
    } else if (m.id !== undefined && m.method) {
      post({jsonrpc: "2.0", id: m.id, result: {}});
    }
  });
  frame.srcdoc = html;
};
</script></body></html>"""


class Bridge:
    """The official MCP client (declaring MCP Apps) on its own event loop, for the host page to call."""

    def __init__(self, server: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready, self.stop = threading.Event(), asyncio.Event()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._run(server),), daemon=True)
        self.thread.start()
        assert self.ready.wait(30), "the MCP client did not connect"

    async def _run(self, server: Any) -> None:
        self.stop = asyncio.Event()
        async with Client(server, extensions=[AppsSupport()]) as client:
            self.client = client
            self.ready.set()
            await self.stop.wait()

    def do(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def forward(self, params: str) -> str:
        call = json.loads(params)
        try:
            result = self.do(self.client.call_tool(call["name"], call.get("arguments") or {}))
        except MCPError as exc:
            return json.dumps({"error": {"code": exc.error.code, "message": exc.error.message}})
        return json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[Vault]:
    make_four_revisions(tmp_path / "vault", tmp_path / "db" / "v.db")
    with Vault.open(tmp_path / "db" / "v.db", root=tmp_path / "vault") as opened:
        yield opened


class Hosted:
    def __init__(self, browser: Any, vault: Vault, path: str, allow_writes: bool, host: str) -> None:
        self.bridge = Bridge(build_server(ServeConfig.of(vault, allow_writes=allow_writes)))
        self.context = browser.new_context(viewport={"width": 1100, "height": 680})
        self.tab = self.context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.tab.on("pageerror", lambda e: self.errors.append(str(e)))
        self.tab.on("dialog", lambda d: (self.errors.append("dialog: " + d.message), d.dismiss()))
        self.tab.on("request", lambda r: self.requests.append(r.url) if r.frame.parent_frame is not None else None)
        self.tab.expose_function("forwardTool", self.bridge.forward)
        if host == "ext-apps":
            ext_apps_host.serve(self.tab)
        else:
            self.tab.set_content(HOST_PAGE)
        html = self.bridge.do(self.bridge.client.read_resource(APP_URI)).contents[0].text
        answer = json.loads(self.bridge.forward(json.dumps({"name": "note_history", "arguments": {"path": path}})))
        self.tab.evaluate(
            "([html, args, result]) => window.startApp(html, args, result)", [html, {"path": path}, answer]
        )
        self.app = self.tab.frame_locator("#app")
        self.tab.wait_for_function("window.hostLog.includes('ui/notifications/initialized')")  # the view runs

    def _view(self) -> Any:
        """The view's frame, or None while the browser has not yet reported it at its srcdoc address."""
        return next((f for f in self.tab.frames if f.url == "about:srcdoc"), None)

    @property
    def frame(self) -> Any:
        view = self._view()
        assert view is not None, "the view's frame never appeared"
        return view

    def until(self, expression: str, timeout_s: float = 20) -> None:
        """Poll inside the view (whose CSP forbids the string evaluation ``wait_for_function`` uses), from the
        moment its frame is reported (the host may hear the view before the browser lists its frame)."""
        for _ in range(int(timeout_s / 0.05)):
            view = self._view()
            if view is not None and view.evaluate(expression):
                return
            self.tab.wait_for_timeout(50)
        status = self.frame.evaluate("document.getElementById('status').textContent")
        raise AssertionError(
            f"still false after {timeout_s} s: {expression} (status: {status!r}, errors: {self.errors})"
        )

    def close(self) -> None:
        self.context.close()
        self.bridge.close()


@pytest.fixture
def hosted(browser: Any, vault: Vault, request: pytest.FixtureRequest) -> Iterator[Any]:
    opened: list[Hosted] = []

    def host(path: str = NOTE, allow_writes: bool = True, host: str = HOSTS[0]) -> Hosted:
        opened.append(Hosted(browser, vault, path, allow_writes, host))
        return opened[-1]

    yield host
    for h in opened:
        h.close()


HOSTS = ["ext-apps", "minimal"] if ext_apps_host.installed() else ["minimal"]
TIMELINE = "document.querySelectorAll('#timeline li').length"
DIFF_READY = "document.querySelector('#diff').childNodes.length > 0"


@pytest.mark.parametrize("host", HOSTS)
def test_timeline_diff_and_a_restore_that_lands_as_a_new_revision(hosted: Any, host: str) -> None:
    h = hosted(host=host)
    h.until(f"{TIMELINE} === 4 && {DIFF_READY}")
    assert "ui/notifications/initialized" in h.tab.evaluate("window.hostLog")
    kinds = h.frame.evaluate("[...document.querySelectorAll('#timeline .kind')].map(e => e.textContent)")
    assert kinds == ["created", "modified", "modified", "modified"]
    # the latest revision is shown, diffed against the one before; no restore of what is already there
    assert "Friday" in h.frame.evaluate("document.getElementById('note').textContent")
    assert h.frame.evaluate("[...document.querySelectorAll('#diff del')].map(e => e.textContent)") == [
        "Tuesday",
        " Ana and",
    ]
    assert h.frame.evaluate("[...document.querySelectorAll('#diff ins')].map(e => e.textContent)") == [
        "Friday",
        "very ",
    ]
    assert h.frame.evaluate("document.getElementById('restore').hidden") is True
    # the first revision: its text, its diff against itself empty of changes, and a restore offered
    h.app.locator("#timeline li").nth(1).locator("button").click()
    h.until("document.getElementById('note').textContent.includes('Tuesday')")
    h.until("[...document.querySelectorAll('#diff ins')].some(e => e.textContent.includes('Tuesday'))")
    if os.environ.get("VAULTSYNC_WRITE_SCREENSHOTS") and host == HOSTS[0]:
        h.tab.screenshot(
            path=str(REPO / "docs" / "img" / "app-note-history.png"),
            clip={"x": 0, "y": 0, "width": 1100, "height": 360},
        )
    h.app.locator("#timeline li").nth(0).locator("button").click()
    h.until("document.getElementById('note').textContent.includes('Monday')")
    assert h.frame.evaluate("document.getElementById('restore').hidden") is False
    h.app.locator("#restore").click()
    h.until(f"{TIMELINE} === 5 && document.getElementById('status').textContent.startsWith('restored')")
    h.until("document.querySelector('#timeline li.picked') === document.querySelector('#timeline li:last-child')")
    assert "Monday" in h.frame.evaluate("document.getElementById('note').textContent")
    history = h.bridge.do(h.bridge.client.call_tool("note_history", {"path": NOTE})).structured_content
    assert len(history["revisions"]) == 5
    shown = h.frame.evaluate("[...document.querySelectorAll('#timeline .rev')].map(e => e.textContent)")
    assert shown == [r["id"] for r in history["revisions"]]  # the ids note_history gives, one a revision
    current = h.bridge.do(h.bridge.client.call_tool("read_note", {"path": NOTE})).structured_content
    assert current["content"] == TEXTS[0]
    assert h.errors == []
    assert h.requests == []  # the view asked nothing of the network


def test_a_hostile_note_is_inert(hosted: Any) -> None:
    h = hosted(HOSTILE)
    h.until(f"{TIMELINE} === 2 && {DIFF_READY}")
    h.app.locator("#timeline li").nth(0).locator("button").click()
    h.until("document.getElementById('note').textContent.includes('Hostile')")
    for link in h.app.locator("#note a").all():
        link.click()
    h.tab.wait_for_timeout(200)
    assert h.frame.evaluate("window.__pwned") is None and h.tab.evaluate("window.__pwned") is None
    note = h.frame.evaluate("""(() => { const n = document.getElementById('note');
        return {scripts: n.querySelectorAll('script, img, svg, iframe').length,
                handlers: [...n.querySelectorAll('*')]
                    .filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
                hrefs: [...n.querySelectorAll('a')].map(a => a.getAttribute('href')), text: n.textContent}; })()""")
    assert note["scripts"] == 0 and note["handlers"] == 0
    assert not any(h and h.lower().startswith("javascript") for h in note["hrefs"])
    assert "<script>" in note["text"]  # shown as text
    # and behind the renderer, the view's CSP: an inline script or handler injected anyway does not run
    injected = h.frame.evaluate("""(() => { const n = document.getElementById('note');
        const s = document.createElement('script'); s.textContent = 'window.__pwned = 6'; n.append(s);
        n.insertAdjacentHTML('beforeend', '<img src="data:," onerror="window.__pwned = 7">');
        return [window.origin, window.__pwned]; })()""")
    h.tab.wait_for_timeout(200)
    assert injected == ["null", None] and h.frame.evaluate("window.__pwned") is None
    assert h.errors == []


def test_a_read_only_server_shows_no_restore_button(hosted: Any) -> None:
    h = hosted(allow_writes=False)
    h.until(f"{TIMELINE} === 4 && {DIFF_READY}")
    h.app.locator("#timeline li").nth(0).locator("button").click()
    h.until("document.getElementById('note').textContent.includes('Monday')")
    assert h.frame.evaluate("document.getElementById('restore').hidden") is True
    assert h.errors == []


def test_a_restore_over_a_newer_revision_is_refused(hosted: Any) -> None:
    """The view restores with expected_revision: a change it has not seen makes the restore a refusal."""
    h = hosted()
    h.until(f"{TIMELINE} === 4 && {DIFF_READY}")
    h.bridge.do(
        h.bridge.client.call_tool("append_to_note", {"path": NOTE, "text": "\nA change the view has not seen.\n"})
    )
    h.app.locator("#timeline li").nth(0).locator("button").click()
    h.until("document.getElementById('note').textContent.includes('Monday')")
    h.app.locator("#restore").click()
    h.until("document.getElementById('status').className === 'error'")
    assert "revision" in h.frame.evaluate("document.getElementById('status').textContent")
    current = h.bridge.do(h.bridge.client.call_tool("read_note", {"path": NOTE})).structured_content
    assert current["content"].endswith("A change the view has not seen.\n")  # nothing was restored
    history = h.bridge.do(h.bridge.client.call_tool("note_history", {"path": NOTE})).structured_content
    assert len(history["revisions"]) == 5

"""``vaultsync ui`` as a browser sees it (tests/ui/test_ui.py, test_ui_page.py): the demo's dated history, the
page's server in a real process (``ui_process``; ``server`` is its module-scoped fixture over the test module's
own ``history`` fixture), a fresh page that records what it should never do (``page``), and waits inside it."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.repo import REPO


def load_demo() -> Any:
    """examples/demo.py as a module (its ``build_history``, ``git``, ``COMMITS``, ``RENAMED``)."""
    spec = importlib.util.spec_from_file_location("vaultsync_demo", REPO / "examples" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class History:
    vault: Path
    db: Path
    commits: list[tuple[str, str]]
    """(sha, committer time), oldest first."""

    @classmethod
    def of(cls, vault: Path, db: Path) -> History:
        """The vault's first-parent git history, as imported into ``db``."""
        commits = subprocess.run(
            ["git", "-C", str(vault), "log", "--first-parent", "--reverse", "--format=%H %cI"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        return cls(vault, db, [tuple(line.split()) for line in commits if line])  # type: ignore[misc]


@dataclass
class Server:
    url: str
    base: str
    port: int
    token: str


@contextlib.contextmanager
def ui_process(db: str | Path) -> Iterator[Server]:
    """``vaultsync ui --no-browser`` in a real process, on its random port; its printed URL read from stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "--db", str(db), "ui", "--no-browser"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:(\d+))/\?token=(\S+)", line)
        assert found, f"no URL in {line!r}"
        base, port, token = found.group(1), int(found.group(2)), found.group(3)
        log: list[str] = []
        threading.Thread(target=lambda: log.extend(proc.stderr or ()), daemon=True).start()  # never let it block
        yield Server(f"{base}/?token={token}", base, port, token)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(history: History) -> Iterator[Server]:
    """The page's server over the test module's ``history`` (``ui_process``)."""
    with ui_process(history.db) as started:
        yield started


@dataclass
class Watched:
    page: Any
    dialogs: list[str]
    errors: list[str]
    foreign: list[str]


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Watched]:
    """A fresh page that records every dialog, console error, page error and request leaving the server."""
    context = browser.new_context(viewport={"width": 1360, "height": 860})
    tab = context.new_page()
    watched = Watched(tab, [], [], [])

    def on_dialog(dialog: Any) -> None:
        watched.dialogs.append(dialog.message)
        dialog.dismiss()

    tab.on("dialog", on_dialog)
    tab.on("console", lambda m: watched.errors.append(m.text) if m.type in ("error", "warning") else None)
    tab.on("pageerror", lambda e: watched.errors.append(str(e)))
    tab.on("request", lambda r: watched.foreign.append(r.url) if not r.url.startswith(server.base + "/") else None)
    yield watched
    context.close()


def open_page(watched: Watched, server: Server, fragment: str = "") -> Any:
    tab = watched.page
    tab.goto(server.url + fragment)
    wait_until(tab, "document.body.dataset.ready === '1'")
    return tab


def wait_until(tab: Any, expression: str, arg: Any = None, timeout_s: float = 20) -> None:
    """Poll a JavaScript expression until it is true (Playwright's ``wait_for_function`` evaluates strings
    inside the page, which the page's Content-Security-Policy forbids; ``evaluate`` is not affected)."""
    for _ in range(int(timeout_s / 0.05)):
        if tab.evaluate(expression, arg):
            return
        tab.wait_for_timeout(50)
    shown = tab.evaluate(
        "[document.querySelector('#tree').dataset.at, document.querySelector('#error').textContent, location.hash]"
    )
    raise AssertionError(f"still false after {timeout_s} s: {expression} (tree at, error, hash: {shown})")


def wait_note(tab: Any, path: str, micros: int | str) -> None:
    wait_until(
        tab,
        "([p, at]) => { const n = document.querySelector('#note'); "
        "return !n.hidden && n.dataset.path === p && n.dataset.at === at; }",
        [path, str(micros)],
    )


# ---------------------------------------------------------------- the page's server in this process, and its API

UI_TOKEN = "t" * 32
"""The token the in-process page's server is built with (``in_process``), sent by ``fetch``."""


@contextlib.contextmanager
def in_process(vault: Any, token: str = UI_TOKEN) -> Iterator[int]:
    """The page's server for ``vault`` (opened read-only; closed after) on a free loopback port of this process,
    uvicorn on a thread: yields the port."""
    import socket

    import uvicorn

    from vaultsync.ui.app import build_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(build_app(vault, token, port), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="ui-server")
    thread.start()
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        vault.close()


def fetch(port: int, route: str, params: Any = (), token: str = UI_TOKEN) -> tuple[int, list[tuple[str, str]], bytes]:
    """GET ``route`` with ``params`` (a dict or (name, value) pairs) and the page's token: the status, the headers
    as sent (names in lower case, repeats kept) and the body."""
    import http.client
    from urllib.parse import urlencode

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", f"{route}?{urlencode(params)}", headers={"X-Vaultsync-Token": token})
        response = conn.getresponse()
        return response.status, [(k.lower(), v) for k, v in response.getheaders()], response.read()
    finally:
        conn.close()


@dataclass(frozen=True)
class PageApi:
    """The page's JSON API on ``port`` (``in_process``)."""

    port: int

    def get(self, route: str, params: Any = ()) -> tuple[int, dict[str, Any]]:
        """The status and the decoded JSON answer of ``route``."""
        import json

        status, _, body = fetch(self.port, route, params)
        return status, json.loads(body)

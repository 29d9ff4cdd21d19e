"""A test host built on ``@modelcontextprotocol/ext-apps``'s own host side (``AppBridge`` and
``PostMessageTransport``), loaded by Chromium as ES modules straight from ``node_modules`` (the one the
MCP Inspector brings, tests/js/inspector) through an import map: no bundler, nothing from the network."""

from __future__ import annotations

import json
import mimetypes
import re
from typing import Any

from support.repo import REPO

MODULES = REPO / "tests" / "js" / "inspector" / "node_modules"
ORIGIN = "http://host.test"
ENTRY = "@modelcontextprotocol/ext-apps/app-bridge"
_IMPORT = re.compile(r"""(?:from|import)\s*["']([^"'./][^"']*)["']""")

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>ext-apps test host</title>
<style>body{margin:0;font:13px system-ui} iframe{border:0;width:100%;height:640px;display:block}</style>
<script type="importmap">IMPORTS</script>
<script type="module">
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
window.hostLog = [];
window.startApp = async (html, args, result) => {
  const frame = document.getElementById("app");
  const bridge = new AppBridge(null, {name: "vaultsync-test-host", version: "1"}, {serverTools: {}, openLinks: {}},
                               {hostContext: {theme: "light", displayMode: "inline"}});
  bridge.oncalltool = async (params) => {
    window.hostLog.push("tools/call");
    const answer = JSON.parse(await window.forwardTool(JSON.stringify(params)));
    if (answer.error) throw new Error(answer.error.message);
    return answer;
  };
  bridge.oninitialized = async () => {
    window.hostLog.push("ui/notifications/initialized");
    await bridge.sendToolInput({arguments: args});
    await bridge.sendToolResult(result);
  };
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  frame.srcdoc = html;
};
window.hostReady = true;
</script></head>
<body><iframe id="app" sandbox="allow-scripts" title="note history"></iframe></body></html>"""


def installed() -> bool:
    return (MODULES / "@modelcontextprotocol" / "ext-apps" / "package.json").exists()


def _resolve(spec: str) -> str:
    """A bare specifier as the browser-facing file its package exports (``browser``, ``import``, ``default``)."""
    parts = spec.split("/")
    name = "/".join(parts[:2]) if spec.startswith("@") else parts[0]
    sub = "." + spec[len(name) :]
    package = json.loads((MODULES / name / "package.json").read_text(encoding="utf-8"))
    exports = package.get("exports")
    entry = exports.get(sub) if isinstance(exports, dict) and sub in exports else (exports if sub == "." else None)

    def pick(e: Any) -> str | None:
        if isinstance(e, str):
            return e
        for key in ("browser", "import", "default"):
            if isinstance(e, dict) and key in e:
                return pick(e[key])
        return None

    chosen = (pick(entry) if entry is not None else None) or package.get("module") or package["main"]
    return str((MODULES / name / chosen).resolve().relative_to(MODULES.resolve()))


def import_map() -> dict[str, str]:
    """Every bare specifier reachable from the bridge, mapped to its file under ``ORIGIN/nm/``."""
    imports: dict[str, str] = {}
    todo, seen = [ENTRY], set()
    while todo:
        spec = todo.pop()
        if spec in imports:
            continue
        imports[spec] = f"{ORIGIN}/nm/{_resolve(spec)}"
        files = [MODULES / _resolve(spec)]
        while files:
            path = files.pop()
            if path in seen:
                continue
            seen.add(path)
            text = path.read_text(encoding="utf-8")
            todo += _IMPORT.findall(text)
            files += [
                (path.parent / rel).resolve() for rel in re.findall(r"""(?:from|import)\s*["'](\.[^"']+)["']""", text)
            ]
    return imports


def serve(tab: Any) -> None:
    """Route ``ORIGIN`` to the host page and the modules; open the page."""
    page = PAGE.replace("IMPORTS", json.dumps({"imports": import_map()}))

    def answer(route: Any) -> None:
        url = route.request.url
        if url == f"{ORIGIN}/host.html":
            route.fulfill(status=200, content_type="text/html", body=page)
            return
        rel = url.removeprefix(f"{ORIGIN}/nm/")
        path = (MODULES / rel).resolve()
        if not url.startswith(f"{ORIGIN}/nm/") or MODULES.resolve() not in path.parents or not path.is_file():
            route.fulfill(status=404, body="")
            return
        kind = "text/javascript" if path.suffix in (".js", ".mjs", ".cjs") else mimetypes.guess_type(path.name)[0]
        route.fulfill(status=200, content_type=kind or "application/octet-stream", body=path.read_bytes())

    tab.route(f"{ORIGIN}/**", answer)
    tab.goto(f"{ORIGIN}/host.html")
    tab.wait_for_function("window.hostReady === true")

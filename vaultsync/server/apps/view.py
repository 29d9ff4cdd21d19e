"""The view's one HTML document: its script and style inline, allowed by hash in a strict CSP.

The policy allows nothing from anywhere (``default-src 'none'``) but the document's own script and
style, named by their SHA-256: a note's text reaches the view only as the server's safe HTML
(``vaultsync.ui.render``), and even an inline script or event handler that got through would not run.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib import resources


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def policy(script: str, style: str) -> str:
    return (
        "default-src 'none'; script-src "
        + _sha256(script)
        + "; style-src "
        + _sha256(style)
        + "; img-src 'none'; font-src 'none'; connect-src 'none'; frame-src 'none'; object-src 'none'; "
        "base-uri 'none'; form-action 'none'"
    )


@cache
def view_html() -> str:
    script, style = _asset("view.js"), _asset("view.css")
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{policy(script, style)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Note history · vaultsync</title>
<style>{style}</style>
</head>
<body>
<header><strong id="title">Note history</strong> <span id="path"></span> <span id="status" role="status"></span></header>
<main>
  <nav aria-label="Revisions"><ol id="timeline"></ol></nav>
  <section id="shown">
    <div id="actions"><span id="shown-label"></span> <button id="restore" type="button" hidden>Restore this revision</button></div>
    <article id="note" class="note"></article>
    <div id="compare">
      <label>From <select id="diff-a"></select></label>
      <label>to <select id="diff-b"></select></label>
      <span id="diff-counts"></span>
    </div>
    <pre id="diff" class="diff"></pre>
  </section>
</main>
<script>{script}</script>
</body>
</html>
"""

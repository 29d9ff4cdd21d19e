"""Write the ``tools`` list of bundle/manifest.json from the tool registry (``vaultsync.server.registry``).

The bundle's server is the plain one: its tools are those every server offers, in ``tools/list`` order, each with
its registry ``summary``; a write tool says that it exists only when writes are allowed. The rest of the manifest
is kept as written. ``tests/server/test_tool_registry.py`` regenerates it in memory and compares.

    .venv/bin/python scripts/docgen.py bundle     # rewrite it (make docs-gen rewrites every generated page)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from vaultsync.server.registry import TOOLS

PAGE = "bundle/manifest.json"
REPO = Path(__file__).resolve().parents[1]
TOOLS_LIST = re.compile(r'^  "tools": \[\n.*?^  \],?\n', re.MULTILINE | re.DOTALL)
WRITES_NOTE = " (only when writes are allowed)"


def render(manifest: Path = REPO / PAGE) -> str:
    """The manifest's text with its ``tools`` list made from the registry, one tool a line."""
    text = manifest.read_text(encoding="utf-8")
    rows = [
        json.dumps({"name": t.name, "description": t.summary + (WRITES_NOTE if t.writes else "")}, ensure_ascii=False)
        for t in TOOLS
        if t.needs is None
    ]
    listed = '  "tools": [\n' + ",\n".join(f"    {row}" for row in rows) + "\n  ],\n"
    made, found = TOOLS_LIST.subn(lambda _: listed, text, count=1)
    if not found:
        raise ValueError(f'{PAGE} has no "tools": [...] list at the top level to rewrite')
    json.loads(made)  # still a JSON document
    return made

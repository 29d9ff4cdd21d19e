"""Shared by the note-history app tests: a vault whose note has four revisions, a hostile note, and a
client that declares (or does not declare) the MCP Apps extension."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp.client.extension import ClientExtension
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from vaultsync import Vault

NOTE = "Projects/Atlas.md"
TEXTS = [
    "# Atlas\n\nKickoff on Monday with Ana.\n",
    "# Atlas\n\nKickoff on Tuesday with Ana and Bo.\n",
    "# Atlas\n\nKickoff on Tuesday with Ana and Bo.\n\n## Risks\n\nThe budget is tight.\n",
    "# Atlas\n\nKickoff on Friday with Bo.\n\n## Risks\n\nThe budget is very tight.\n",
]
TIMES = ["2024-01-01", "2024-02-01", "2024-03-01", "2024-04-01"]
HOSTILE = "Hostile.md"
HOSTILE_TEXT = (
    '# Hostile <script>window.__pwned = 1</script>\n\n<img src=x onerror="window.__pwned = 2">\n\n'
    '[click](javascript:window.__pwned=3) <svg onload="window.__pwned = 4"></svg>\n\n'
    '<iframe src="javascript:parent.__pwned=5"></iframe>\n'
)


def make_four_revisions(root: Path, db: Path) -> None:
    """``NOTE`` written four times (one batch each), ``HOSTILE`` twice (at the first and last batch)."""
    root.mkdir(parents=True)
    (root / "Projects").mkdir()
    with Vault.open(db, root=root) as vault:
        for i, (text, when) in enumerate(zip(TEXTS, TIMES, strict=True)):
            (root / NOTE).write_text(text, encoding="utf-8")
            if i in (0, 3):
                (root / HOSTILE).write_text(HOSTILE_TEXT + ("\nagain\n" if i else ""), encoding="utf-8")
            vault.sync(known_at=when)


class AppsSupport(ClientExtension):
    """The MCP Apps extension as a host declares it: the app MIME type in its settings."""

    identifier = EXTENSION_ID

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": [APP_MIME_TYPE]}

"""The page shows a note's embedded image as it was at the page's moment: the note's HTML names the file (never a
src from the note), and ``/api/file`` serves its bytes then as data of its own type, sandboxed, never SVG or HTML."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.ui_page import fetch, in_process

from vaultsync import Vault
from vaultsync.times import parse_time

FIRST, SECOND = b"\x89PNG\r\n\x1a\nfirst", b"\x89PNG\r\n\x1a\nsecond"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'


def get(port: int, route: str, params: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    status, headers, body = fetch(port, route, params)
    assert [name for name, _ in headers].count("content-security-policy") == 1
    return status, dict(headers), body


@pytest.fixture
def port(tmp_path: Path) -> Iterator[int]:
    root, db = tmp_path / "vault", tmp_path / "vaultsync.db"
    (root / "Files").mkdir(parents=True)
    (root / "Note.md").write_text("# Note\n\n![[diagram.png|the plan]]\n\n![logo](Files/logo.svg)\n", encoding="utf-8")
    (root / "Files" / "diagram.png").write_bytes(FIRST)
    (root / "Files" / "logo.svg").write_bytes(SVG)
    with Vault.open(db, root=root) as writer:
        writer.sync(known_at="2025-01-01")
        (root / "Files" / "diagram.png").write_bytes(SECOND)
        writer.sync(known_at="2025-02-01")
        (root / "Files" / "diagram.png").unlink()
        writer.sync(known_at="2025-03-01")
    with in_process(Vault.open(db, readonly=True)) as number:
        yield number


def test_an_embedded_image_is_served_as_it_was_then_as_sandboxed_data(port: int) -> None:
    for day, body in (("2025-01-15", FIRST), ("2025-02-15", SECOND)):
        at = str(parse_time(day))
        status, _, note = get(port, "/api/note", {"path": "Note.md", "at": at})
        html = json.loads(note)["html"]
        assert '<img class="embed" alt="the plan" data-file="Files/diagram.png">' in html, html
        assert "<svg" not in html and 'data-file="Files/logo.svg"' not in html, "an SVG is never shown"
        status, headers, data = get(port, "/api/file", {"path": "Files/diagram.png", "at": at})
        assert (status, data, headers["content-type"]) == (200, body, "image/png")
        assert headers["content-security-policy"] == "default-src 'none'; sandbox"
        assert headers["x-content-type-options"] == "nosniff"
    status, _, _ = get(port, "/api/file", {"path": "Files/diagram.png"})
    assert status == 404, "deleted since: nothing now"
    html = json.loads(get(port, "/api/note", {"path": "Note.md"})[2])["html"]
    assert "<img" not in html and "dangling" in html


def test_svg_and_notes_are_never_served_as_files(port: int) -> None:
    for path in ("Files/logo.svg", "Note.md"):
        status, headers, data = get(port, "/api/file", {"path": path, "at": str(parse_time("2025-01-15"))})
        assert status == 415 and headers["content-type"] == "application/json", (path, status)
        assert b"<svg" not in data and b"# Note" not in data

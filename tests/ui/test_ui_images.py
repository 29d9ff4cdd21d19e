"""In chromium: a note's embedded image is shown as it was at the page's moment (two versions of different
widths tell which one loaded), and an embedded PDF's first page as text, from the page's own server, with nothing
run and nothing fetched elsewhere."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import browser  # noqa: F401 (fixture)
from support.pdfs import pdf
from support.ui_page import Server, Watched, open_page, ui_process, wait_note, wait_until

from vaultsync import Vault
from vaultsync.times import parse_time

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SVG = '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'


def png(width: int, height: int = 1) -> bytes:
    """A real PNG of ``width`` × ``height`` grey pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("ui-images")
    root, db = work / "vault", work / "db" / "vaultsync.db"
    (root / "Files").mkdir(parents=True)
    (root / "Note.md").write_text(
        "# Note\n\n![[diagram.png|the plan]]\n\n![logo](Files/logo.svg)\n\n![[scan.pdf]]\n", encoding="utf-8"
    )
    (root / "Files" / "diagram.png").write_bytes(png(3))
    (root / "Files" / "scan.pdf").write_bytes(pdf(["Invoice <b>one</b>\nfirst line", "page two of the first"]))
    (root / "Files" / "logo.svg").write_text(SVG, encoding="utf-8")
    with Vault.open(db, root=root) as vault:
        vault.sync(known_at="2025-01-01")
        (root / "Files" / "diagram.png").write_bytes(png(7))
        (root / "Files" / "scan.pdf").write_bytes(pdf(["", "Receipt two, on its second page"]))
        vault.sync(known_at="2025-02-01")
        (root / "Files" / "diagram.png").unlink()
        (root / "Files" / "scan.pdf").unlink()
        vault.sync(known_at="2025-03-01")
    with ui_process(db) as started:
        yield started


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Watched]:  # noqa: F811 (the browser fixture)
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    tab = context.new_page()
    watched = Watched(tab, [], [], [])
    tab.on("dialog", lambda dialog: (watched.dialogs.append(dialog.message), dialog.dismiss()))
    tab.on("pageerror", lambda e: watched.errors.append(str(e)))
    tab.on("request", lambda r: watched.foreign.append(r.url) if not r.url.startswith(server.base + "/") else None)
    yield watched
    context.close()


def test_an_embedded_image_is_shown_as_it_was_at_the_moment(page: Watched, server: Server, tmp_path: Path) -> None:
    for day, width in (("2025-01-15", 3), ("2025-02-15", 7)):
        micros = parse_time(day)
        tab = open_page(page, server, f"#at={micros}&note=Note.md")
        wait_note(tab, "Note.md", micros)
        wait_until(
            tab,
            "(() => { const i = document.querySelector('#note-body img.embed'); "
            "return i && i.complete && i.naturalWidth > 0; })()",
        )
        shown = tab.evaluate(
            "[...document.querySelectorAll('#note-body img')].map(i => [i.dataset.file, i.naturalWidth])"
        )
        assert shown == [["Files/diagram.png", width]], (day, shown)
    now = parse_time("2025-03-15")
    tab = open_page(page, server, f"#at={now}&note=Note.md")
    wait_note(tab, "Note.md", now)
    assert tab.evaluate("document.querySelectorAll('#note-body img').length") == 0, "deleted by then: no image"
    assert page.dialogs == [] and page.foreign == [] and page.errors == []


def test_an_embedded_pdf_shows_its_first_page_text_as_it_was_at_the_moment(page: Watched, server: Server) -> None:
    for day, first in (
        ("2025-01-15", "Invoice <b>one</b>\nfirst line"),
        ("2025-02-15", "Receipt two, on its second page"),
    ):
        micros = parse_time(day)
        tab = open_page(page, server, f"#at={micros}&note=Note.md")
        wait_note(tab, "Note.md", micros)
        wait_until(
            tab,
            "(() => { const p = document.querySelector('#note-body .embed.pdf .pdf-page'); "
            "return p && p.textContent.length > 0; })()",
        )
        shown = tab.evaluate(
            "[...document.querySelectorAll('#note-body .embed.pdf')].map(b => "
            "[b.dataset.pdf, b.querySelector('.pdf-name').textContent, b.querySelector('.pdf-page').textContent])"
        )
        assert shown == [["Files/scan.pdf", "scan.pdf", first]], (day, shown)
        assert tab.evaluate("document.querySelectorAll('#note-body b, iframe, embed, object').length") == 0
    now = parse_time("2025-03-15")
    tab = open_page(page, server, f"#at={now}&note=Note.md")
    wait_note(tab, "Note.md", now)
    assert tab.evaluate("document.querySelectorAll('#note-body .embed.pdf').length") == 0, "deleted by then"
    assert page.dialogs == [] and page.foreign == [] and page.errors == []

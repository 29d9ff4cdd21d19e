"""A PDF's text, for search: each page's text under its heading, bounded in pages, characters, time and memory; a
damaged, hostile or locked PDF gives what could be read and one warning, never an exception."""

from __future__ import annotations

import io
import itertools
import tracemalloc

import pypdf
import pytest
from support.pdfs import deflated, pdf, text_stream

from vaultsync.parsers import parse_file
from vaultsync.parsers import pdf as pdf_parser
from vaultsync.parsers.pdf import pdf_text


def as_text(data: bytes) -> str:
    """What the parser is handed for a PDF: its bytes, one character a byte."""
    return data.decode("latin-1")


def test_each_page_text_comes_under_its_heading_as_chunks_without_links_or_tags() -> None:
    data = pdf(["Quarterly invoice (paid)\nsecond line", "", "see [[Budget]] and #finance"])
    text, warnings = pdf_text(data)
    assert not warnings
    assert text == (
        "# Page 1\n\nQuarterly invoice (paid)\nsecond line\n\n# Page 3\n\nsee [[Budget]] and #finance\n\n"
    ), "a page without text adds nothing"
    parsed = parse_file(as_text(data), "Scans/invoice.pdf")
    assert parsed.title == "invoice.pdf" and not parsed.warnings
    assert "".join(c.text for c in parsed.chunks) == text
    assert {c.heading_path for c in parsed.chunks} == {("Page 1",), ("Page 3",)}
    assert not parsed.links and not parsed.tags, "a PDF's [[ and # are its text, not Obsidian's syntax"


def test_compressed_pages_are_read() -> None:
    data = pdf(streams=[deflated([text_stream("deflated words")])], compressed=True)
    assert pdf_text(data) == ("# Page 1\n\ndeflated words\n\n", ())


def test_a_decompression_bomb_is_refused_in_bounded_memory() -> None:
    """40 MB of content stream packed into 40 KB: refused at pypdf's lowered limit (16 MB), not decompressed."""
    stream = deflated([text_stream("before the bomb"), *(b" " * 2**20 for _ in range(40))])
    data = pdf(streams=[stream], compressed=True)
    assert len(data) < 100_000
    tracemalloc.start()
    try:
        text, warnings = pdf_text(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text == "" and len(warnings) == 1 and "page 1 of 1 could not be read" in warnings[0]
    assert peak < 40 * 2**20, f"{peak / 2**20:.0f} MB in use at the peak"


def test_only_the_first_pages_are_read_and_the_warning_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pdf_parser, "MAX_PAGES", 3)
    text, warnings = pdf_text(pdf([f"page number {n}" for n in range(1, 6)]))
    assert text.count("# Page") == 3 and "page number 3" in text and "page number 4" not in text
    assert warnings == ("only the first 3 of its 5 pages are searched",)


def test_the_text_is_cut_at_the_character_limit_within_a_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pdf_parser, "MAX_CHARS", 100)
    lines = "\n".join(f"line {n} of a long page" for n in range(50))
    text, warnings = pdf_text(pdf(["a short first page", lines, "never reached"]))
    assert len(text) <= 100 + len("# Page 2\n\n\n\n")
    assert "a short first page" in text and "line 0 of a long page" in text and "never reached" not in text
    assert warnings == ("text cut at 100 characters, at page 2 of 3",)


def test_the_time_spent_is_bounded_by_a_deadline_checked_while_a_page_is_read() -> None:
    """A clock that moves on a second at each look: the deadline falls inside the second page."""
    ticks = itertools.count()
    lines = "\n".join(f"line {n}" for n in range(20))
    text, warnings = pdf_text(pdf(["one", lines, "three"]), seconds=8, clock=lambda: float(next(ticks)))
    assert text.startswith("# Page 1\n\none\n\n# Page 2\n\nline 0") and "three" not in text
    assert warnings == ("stopped after 8 s at page 2 of 3",)


def test_damaged_and_locked_pdfs_give_one_warning_and_their_name_to_search() -> None:
    whole = pdf(["the whole text"])
    locked = pypdf.PdfWriter(clone_from=io.BytesIO(whole))
    locked.encrypt(user_password="secret", algorithm="RC4-128")
    out = io.BytesIO()
    locked.write(out)
    for data, why in (
        (whole[: len(whole) // 2], "not a readable PDF"),
        (b"%PDF-1.7\n" + bytes(range(256)) * 40, "not a readable PDF"),
        (out.getvalue(), "encrypted"),
    ):
        parsed = parse_file(as_text(data), "Files/broken.pdf")
        assert [(c.text, c.kind) for c in parsed.chunks] == [("Files/broken.pdf", "name")]
        assert len(parsed.warnings) == 1 and why in parsed.warnings[0] and "\n" not in parsed.warnings[0]

"""PDF → reading text: the text of a PDF's pages, bounded, for search. Pure (bytes in, text out), like the parsers.

The text is taken with pypdf (pure Python, no native code) page by page, each page under a heading ``# Page N``
so that a hit says where it came from. A hostile or broken PDF must neither hang nor blow memory, so the work is
bounded four ways, and what a bound cuts off is said in a warning (the pages read before it are kept):

- at most ``MAX_PAGES`` pages and ``MAX_CHARS`` characters of text;
- at most ``SECONDS`` of work (checked before each page and at each piece of text a page shows);
- pypdf's own limits lowered (``LIMITS``): no stream decompresses past 16 MB, no content stream parses past its
  budget;
- the file itself at most ``MAX_PDF_BYTES`` (``disk/attachments.text_of``: a larger PDF has no text searched).

A PDF that cannot be read at all (damaged, encrypted with a password) gives no text and one warning; its bytes
are kept like any attachment's.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

MAX_PDF_BYTES = 32 * 2**20
"""A PDF larger than this is kept whole but its text is not extracted."""

MAX_PAGES = 500
"""Pages read at most; the rest of a longer PDF is not searched."""

MAX_CHARS = 1_000_000
"""Characters of text kept at most (a note's text is limited to about 5 MB)."""

SECONDS = 10.0
"""Work spent on one PDF at most."""

LIMITS: dict[str, int] = {
    "maximum_declared_stream_length": MAX_PDF_BYTES,
    "array_based_stream_maximum_output_length": 16 * 2**20,
    "jbig2_maximum_output_length": 16 * 2**20,
    "lzw_maximum_output_length": 16 * 2**20,
    "run_length_maximum_output_length": 16 * 2**20,
    "zlib_maximum_output_length": 16 * 2**20,
    "brotli_maximum_output_length": 16 * 2**20,
    "image_maximum_buffer_size": 16 * 2**20,
    "stream_decoding_work_maximum_length": 64 * 2**20,
    "stream_parsing_work_maximum_count": 1_000_000,
}
"""pypdf's resource limits, lower than its defaults (75 MB per stream): a page's text never needs more."""

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BLANKS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")

logging.getLogger("pypdf").setLevel(logging.ERROR)  # a damaged file's repairs are ours to report, in one line


class _Stop(Exception):
    """A bound was reached while a page's text was taken."""


def pdf_text(
    data: bytes, *, seconds: float = SECONDS, clock: Callable[[], float] = time.monotonic
) -> tuple[str, tuple[str, ...]]:
    """The reading text of the PDF ``data`` (``# Page N`` over each page's text) and the warnings of its bounds
    or its damage; ``("", (warning,))`` when it cannot be read at all."""
    from pypdf import PdfReader, apply_configuration

    budget = _Budget(clock() + seconds, seconds, clock)
    parts: list[str] = []
    with apply_configuration(None, **LIMITS):
        try:
            reader = PdfReader(BytesIO(data))
            if reader.is_encrypted and not reader.decrypt(""):
                return "", ("an encrypted PDF (a password is needed): its text is not searched",)
            budget.count = len(reader.pages)
        except Exception as exc:  # noqa: BLE001 - pypdf raises many kinds on damaged input; a file is never lost
            return "", (f"not a readable PDF, its text is not searched: {_reason(exc)}",)
        for number in range(min(budget.count, MAX_PAGES)):
            budget.start(number)
            try:
                budget.check()
                text = reader.pages[number].extract_text(visitor_text=budget.visit)
            except _Stop as stop:
                parts.append(_page(number, "".join(budget.taken)[: MAX_CHARS - budget.used]))
                return "".join(parts), (str(stop),)
            except Exception as exc:  # noqa: BLE001 - as above: the pages read so far are kept
                return "".join(parts), (f"page {number + 1} of {budget.count} could not be read: {_reason(exc)}",)
            page = _page(number, text[: MAX_CHARS - budget.used])
            budget.used += len(page)
            parts.append(page)
            if budget.used >= MAX_CHARS:
                return "".join(parts), (budget.cut(),)
    if budget.count > MAX_PAGES:
        return "".join(parts), (f"only the first {MAX_PAGES} of its {budget.count} pages are searched",)
    return "".join(parts), ()


@dataclass(slots=True)
class _Budget:
    """What one PDF may still cost: its deadline, and the characters taken so far (pages kept, and the page being
    read: ``visit`` is pypdf's callback for each piece of text a page shows)."""

    deadline: float
    seconds: float
    clock: Callable[[], float]
    count: int = 0
    page: int = 0
    used: int = 0
    taken: list[str] = field(default_factory=list)
    taking: int = 0

    def start(self, page: int) -> None:
        self.page, self.taken, self.taking = page, [], 0

    def check(self) -> None:
        if self.clock() > self.deadline:
            raise _Stop(f"stopped after {self.seconds:g} s at page {self.page + 1} of {self.count}")

    def cut(self) -> str:
        return f"text cut at {MAX_CHARS:,} characters, at page {self.page + 1} of {self.count}"

    def visit(self, text: Any, *_: Any) -> None:
        self.check()
        self.taking += len(text)
        if self.used + self.taking > MAX_CHARS:
            raise _Stop(self.cut())
        self.taken.append(str(text))


def _page(number: int, text: str) -> str:
    """One page's part of the reading text (nothing for a page without text)."""
    text = _BLANKS.sub("\n\n", _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))).strip()
    return f"# Page {number + 1}\n\n{text}\n\n" if text else ""


def _reason(exc: BaseException) -> str:
    """One line saying why (the exception's message, else its kind)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


__all__ = ["MAX_CHARS", "MAX_PAGES", "MAX_PDF_BYTES", "SECONDS", "pdf_text"]

"""PDFs made by the tests: a few pages of text, written by hand (cross-reference offsets computed), optionally with
their content streams compressed (``FlateDecode``, streamed, so a test can make a decompression bomb cheaply)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable


def text_stream(text: str) -> bytes:
    """A page's content stream showing ``text`` (one line per line of ``text``)."""
    shown = []
    for n, line in enumerate(text.split("\n")):
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        shown.append(f"BT /F1 12 Tf 72 {720 - 14 * n} Td ({escaped}) Tj ET")
    return "\n".join(shown).encode("latin-1")


def deflated(pieces: Iterable[bytes]) -> bytes:
    """``pieces`` compressed as one zlib stream, a piece at a time."""
    packer = zlib.compressobj(9)
    return b"".join(packer.compress(piece) for piece in pieces) + packer.flush()


def pdf(pages: list[str] | None = None, *, streams: list[bytes] | None = None, compressed: bool = False) -> bytes:
    """A valid PDF with one page per item of ``pages`` (their text), or per content stream of ``streams`` (given
    compressed when ``compressed``)."""
    contents = streams if streams is not None else [text_stream(text) for text in pages or []]
    count = len(contents)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(count)), count),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, stream in enumerate(contents):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 3 0 R >> >> >>" % (5 + 2 * i)
        )
        flate = b" /Filter /FlateDecode" if compressed else b""
        objects.append(b"<< /Length %d%s >>\nstream\n" % (len(stream), flate) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % at for at in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)

"""An attachment's bytes on disk (or in a git blob): hashed and handed to the store in bounded memory.

An attachment is any recorded file that is not a Markdown note (``ignore.Recorded``): an image, a PDF, a
canvas, a base, audio. Its content hash is the SHA-256 of its bytes, as a note's is, so that the same image in
a thousand revisions, or at two paths, is stored once. A file is read in ``PIECE`` slices, never whole, and
stored only up to ``max_attachment_bytes``: a larger one is recorded by its hash and size alone (its history,
renames and deletion are kept; its bytes are not), with a warning.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..errors import NotANote, ParseError
from ..parsers.attachment import TEXT_SUFFIXES, is_pdf
from ..parsers.pdf import MAX_PDF_BYTES
from . import vaultfs
from .folder import MAX_FILE_BYTES, Present
from .paths import NOTE_SUFFIX, relative

PIECE = 1 << 20
"""Bytes read, hashed and stored at a time (one stored part)."""

MAX_ATTACHMENT_MB = 100
"""The default size limit for an attachment's bytes to be kept: larger files are recorded by hash and size only."""


def max_attachment_bytes() -> int:
    """The size limit per attachment: ``VAULTSYNC_MAX_ATTACHMENT_MB`` (MiB), else ``MAX_ATTACHMENT_MB``."""
    raw = os.environ.get("VAULTSYNC_MAX_ATTACHMENT_MB", "").strip()
    try:
        return int(float(raw) * 2**20) if raw else MAX_ATTACHMENT_MB * 2**20
    except ValueError:
        return MAX_ATTACHMENT_MB * 2**20


def is_attachment(path: str) -> bool:
    """A recorded path that is not a Markdown note."""
    return not path.endswith(NOTE_SUFFIX)


OWN_TYPES = {".canvas": "application/json", ".base": "application/yaml", ".md": "text/markdown"}
"""Types ``mimetypes`` does not know: a canvas is JSON Canvas, a base YAML."""


def mime_type(path: str) -> str:
    """A file's MIME type by its name (``application/octet-stream`` when unknown)."""
    suffix = os.path.splitext(path)[1].lower()
    return OWN_TYPES.get(suffix) or mimetypes.guess_type(path, strict=False)[0] or "application/octet-stream"


def too_large(size: int, limit: int) -> str:
    """The warning for an attachment recorded by hash and size only."""
    return (
        f"attachment is {size / 2**20:.1f} MB, over the {limit / 2**20:g} MB limit "
        "(VAULTSYNC_MAX_ATTACHMENT_MB): recorded by hash and size only, its bytes are not kept"
    )


class Changed(Exception):
    """The file's bytes changed while they were stored: a later batch records what it holds then."""


@dataclass(slots=True)
class Body:
    """An attachment's content, to be stored: its hash and size as read, and how to read it again in pieces."""

    hash: str
    size: int
    pieces: Callable[[], Iterator[bytes]]
    """The bytes again, in ``PIECE`` slices (a file opened anew: ``Changed`` or OSError if it moved on)."""
    keep: bool = True
    """False: over the size limit, recorded by hash and size only."""


def file_pieces(root: str, rel: str) -> Iterator[bytes]:
    """The bytes of the vault file ``rel``, ``PIECE`` at a time, opened without following a symlink."""
    *parts, last = rel.split("/")
    try:
        with vaultfs.folder(root, parts) as where:
            fd, _ = vaultfs.open_file(where, vaultfs.disk_name(where, last), rel)
    except NotANote as exc:
        raise ParseError(str(exc)) from None
    with os.fdopen(fd, "rb") as handle:
        while piece := handle.read(PIECE):
            yield piece


def bytes_pieces(data: bytes) -> Callable[[], Iterator[bytes]]:
    """``Body.pieces`` for bytes already in memory (a git blob under the size limit)."""

    def pieces() -> Iterator[bytes]:
        for at in range(0, len(data), PIECE):
            yield data[at : at + PIECE]

    return pieces


def body_of(obs: Present, limit: int | None = None) -> Body:
    """The content of an observed attachment, hashed in pieces (its bytes kept if within ``limit``, by default
    ``max_attachment_bytes``); ParseError when it cannot be read as a vault file, OSError as raised."""
    if obs.data is not None:
        pieces = bytes_pieces(obs.data)
    elif obs.stream is not None:
        pieces = obs.stream
    else:
        assert obs.fs_path is not None and obs.root is not None
        root, rel = obs.root, relative(obs.root, obs.fs_path)

        def pieces() -> Iterator[bytes]:
            return file_pieces(root, rel)

    content, size = digest(pieces())
    return Body(content, size, pieces, keep=size <= (max_attachment_bytes() if limit is None else limit))


def text_of(path: str, body: Body) -> str:
    """The text an attachment is parsed with (``parsers.attachment``): a canvas's or a base's bytes as UTF-8, at
    most ``MAX_FILE_BYTES`` (a note's limit) and valid UTF-8; a PDF's bytes as Latin-1 (each byte one character,
    its text taken by the parser), at most ``MAX_PDF_BYTES``; else "" (no text). ``Changed`` when the bytes are
    no longer those hashed."""
    if is_pdf(path) and body.keep and 0 < body.size <= MAX_PDF_BYTES:
        return b"".join(checked(body)).decode("latin-1")
    if not path.endswith(TEXT_SUFFIXES) or body.size > MAX_FILE_BYTES or not body.keep:
        return ""
    try:
        return b"".join(checked(body)).decode("utf-8")
    except UnicodeDecodeError:
        return ""


def digest(pieces: Iterator[bytes]) -> tuple[str, int]:
    """The SHA-256 (hex) and size of the bytes ``pieces`` yields."""
    hasher = hashlib.sha256()
    size = 0
    for piece in pieces:
        hasher.update(piece)
        size += len(piece)
    return hasher.hexdigest(), size


def checked(body: Body) -> Iterator[bytes]:
    """``body``'s pieces, raising ``Changed`` at the end when they are not the bytes it was hashed as."""
    hasher = hashlib.sha256()
    size = 0
    for piece in body.pieces():
        hasher.update(piece)
        size += len(piece)
        if size > body.size:
            raise Changed(f"grew past {body.size} bytes while it was read")
        yield piece
    if size != body.size or hasher.hexdigest() != body.hash:
        raise Changed("changed while it was read")


__all__ = [
    "MAX_ATTACHMENT_MB",
    "PIECE",
    "Body",
    "Changed",
    "body_of",
    "bytes_pieces",
    "checked",
    "digest",
    "file_pieces",
    "is_attachment",
    "max_attachment_bytes",
    "mime_type",
    "text_of",
    "too_large",
]

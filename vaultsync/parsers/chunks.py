"""Cutting a note into bounded chunks at block boundaries, with IDs stable under edits elsewhere.

Rules:

* Sections start at the frontmatter (its own section), at line 0 (text before the first
  heading) and at every top-level heading; a section runs to the next one.
* A section is a run of *units*: each top-level block, and each gap between blocks (blank
  lines, link reference definitions). Units are packed in order while the piece stays within
  ``max_chars``; a gap therefore goes with the preceding block when it fits.
* A unit over ``max_chars`` (a huge fence, table, list, or gap) is cut at line boundaries,
  lines packed the same way, in pieces of its own. A single line over ``max_chars`` becomes a
  chunk of exactly that one line.
* Where a piece ends is decided by content, not only by size: a piece also closes after a
  unit (or line) whose text hashes to a *boundary* (1 in ``_BOUNDARY_EVERY``) once it holds at
  least a quarter of ``max_chars``. Inserting a line into a long list then changes the piece
  around it and not every piece after it, so the unchanged pieces keep their stored text.
* Kinds: ``frontmatter``; ``heading`` for a section's first chunk (it starts at the heading);
  ``code``/``table``/``callout`` for a chunk whose only block (gaps aside) is a fence or
  indented code, a table, or a callout, including the line-cut pieces of one; else ``text``.
* A chunk's ID is the first 16 hex digits of blake2b over the JSON key
  ``["vaultsync-chunk/1", "section", heading_path, occurrence, "part", n]``: ``occurrence``
  counts earlier sections with the same full heading path, ``n`` is the chunk's index within
  its section. A chunk holding an Obsidian block id uses ``"block", id, repeat`` instead of
  ``"part", n`` (its first id; ``repeat`` counts the same id earlier in the section). The
  frontmatter's key is ``[..., "frontmatter", "part", n]``. Nothing in a key depends on line
  numbers or on other sections' text; a hash collision within the note (never seen) is
  resolved by re-hashing with a salt, in order.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

from .model import Chunk
from .tokens import Block

_ID_VERSION = "vaultsync-chunk/1"
_OWN_KINDS = frozenset({"code", "table", "callout"})
_BOUNDARY_EVERY = 8


def _is_boundary(text: str) -> bool:
    """Content-defined cut point: about one line (or block) in ``_BOUNDARY_EVERY``."""
    return zlib.crc32(text.encode("utf-8", "surrogatepass")) % _BOUNDARY_EVERY == 0


@dataclass(slots=True)
class Section:
    """A heading's span (or the frontmatter, or the text before the first heading)."""

    start: int
    """First line, 0-based."""
    end: int
    """Line after the last, 0-based."""
    path: tuple[str, ...]
    """Heading path of every chunk in the section."""
    key: list[Any]
    """JSON-able identity of the section, independent of its position."""
    kind: str
    """``frontmatter``, ``preamble`` or ``heading``."""
    blocks: list[Block] = field(default_factory=list)
    """Top-level blocks inside the section, in order."""


def build_sections(blocks: list[Block], n_lines: int, max_headings: int | None = None) -> list[Section]:
    """Group monotone top-level ``blocks`` of a note of ``n_lines`` lines into sections.

    Past ``max_headings`` headings (``limits``), a heading stays in the section before it, as its text.
    """
    sections: list[Section] = []
    body = blocks
    current = Section(0, n_lines, (), ["section", [], 0], "preamble")
    if blocks and blocks[0].kind == "frontmatter":
        sections.append(Section(0, blocks[0].end, (), ["frontmatter"], "frontmatter", [blocks[0]]))
        current.start, body = blocks[0].end, blocks[1:]
    stack: list[tuple[int, str]] = []
    seen: dict[tuple[str, ...], int] = {}
    headings = 0
    for block in body:
        if block.kind != "heading" or (max_headings is not None and headings >= max_headings):
            current.blocks.append(block)
            continue
        headings += 1
        current.end = block.start
        if current.start < current.end:
            sections.append(current)
        while stack and stack[-1][0] >= block.level:
            stack.pop()
        stack.append((block.level, block.text))
        path = tuple(text for _, text in stack)
        occurrence = seen.get(path, 0)
        seen[path] = occurrence + 1
        current = Section(block.start, n_lines, path, ["section", list(path), occurrence], "heading", [block])
    current.end = n_lines
    if current.start < current.end:
        sections.append(current)
    return sections


Piece = tuple[int, int, Block | None]
"""``(start, end, sole_block)``: a chunk's line range and the only block it touches, if one."""


def pack_section(section: Section, offsets: list[int], max_chars: int, text: str) -> list[Piece]:
    """Cut ``section`` into pieces: units packed up to the bound, oversized units cut by lines."""
    units: list[tuple[int, int, Block | None]] = []
    pos = section.start
    for block in section.blocks:
        if block.start > pos:
            units.append((pos, block.start, None))
        units.append((block.start, block.end, block))
        pos = block.end
    if pos < section.end:
        units.append((pos, section.end, None))

    packer = _Packer(offsets, max_chars, text)
    for start, end, unit_block in units:
        if offsets[end] - offsets[start] <= max_chars:
            packer.add(start, end, unit_block)
        else:
            packer.cut_lines(start, end, unit_block)
    packer.flush()
    return packer.pieces


class _Packer:
    """Packing of consecutive units into pieces of at most ``max_chars`` characters, closing a
    piece early at content-defined boundaries."""

    __slots__ = ("blocks", "end", "max_chars", "min_chars", "offsets", "pieces", "start", "text")

    def __init__(self, offsets: list[int], max_chars: int, text: str) -> None:
        self.offsets, self.max_chars, self.text = offsets, max_chars, text
        self.min_chars = max_chars // 4
        self.pieces: list[Piece] = []
        self.start = self.end = -1
        self.blocks: list[Block] = []

    def add(self, start: int, end: int, block: Block | None) -> None:
        """Append a unit that fits the bound to the open piece, or open a new piece with it."""
        if self.start < 0 or self.offsets[end] - self.offsets[self.start] > self.max_chars:
            self.flush()
            self.start = start
        self.end = end
        if block is not None:
            self.blocks.append(block)
        if self._closes(self.start, end):
            self.flush()

    def _closes(self, start: int, end: int) -> bool:
        """True when lines ``start:end`` are big enough and their last line is a boundary."""
        offsets = self.offsets
        return offsets[end] - offsets[start] >= self.min_chars and _is_boundary(
            self.text[offsets[end - 1] : offsets[end]]
        )

    def cut_lines(self, start: int, end: int, block: Block | None) -> None:
        """Cut an oversized unit into pieces of its own, packing whole lines up to the bound."""
        self.flush()
        first = start
        for stop in range(start + 1, end):
            if self.offsets[stop + 1] - self.offsets[first] > self.max_chars or self._closes(first, stop):
                self.pieces.append((first, stop, block))
                first = stop
        self.pieces.append((first, end, block))

    def flush(self) -> None:
        if self.start >= 0:
            self.pieces.append((self.start, self.end, self.blocks[0] if len(self.blocks) == 1 else None))
        self.start, self.blocks = -1, []


def build_chunks(
    text: str,
    offsets: list[int],
    blocks: list[Block],
    block_ids: list[tuple[int, str]],
    max_chars: int,
    max_headings: int | None = None,
) -> tuple[Chunk, ...]:
    """Partition ``text`` (whose line starts are ``offsets``) into chunks with stable IDs.

    ``block_ids`` are ``(0-based line, id)`` pairs sorted by line; ``max_headings`` bounds the sections.
    """
    id_lines = [line for line, _ in block_ids]
    chunks: list[Chunk] = []
    used: set[str] = set()
    for section in build_sections(blocks, len(offsets) - 1, max_headings):
        block_seen: dict[str, int] = {}
        for part, (start, end, sole) in enumerate(pack_section(section, offsets, max_chars, text)):
            if section.kind == "frontmatter":
                kind = "frontmatter"
            elif part == 0 and section.kind == "heading":
                kind = "heading"
            elif sole is not None and sole.kind in _OWN_KINDS:
                kind = sole.kind
            else:
                kind = "text"
            k = bisect_left(id_lines, start)
            if k < len(id_lines) and id_lines[k] < end:
                block_id = block_ids[k][1]
                repeat = block_seen.get(block_id, 0)
                block_seen[block_id] = repeat + 1
                key = [_ID_VERSION, *section.key, "block", block_id, repeat]
            else:
                key = [_ID_VERSION, *section.key, "part", part]
            chunk_id = _unique_id(key, used)
            chunks.append(Chunk(chunk_id, text[offsets[start] : offsets[end]], section.path, start + 1, end, kind))
    return tuple(chunks)


def _unique_id(key: list[Any], used: set[str]) -> str:
    salt = 0
    while True:
        payload = json.dumps(key if salt == 0 else [*key, "salt", salt], ensure_ascii=False)
        chunk_id = hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        if chunk_id not in used:
            used.add(chunk_id)
            return chunk_id
        salt += 1

"""Attachment → record: what a non-Markdown file of the vault yields. Pure, like the note parser.

Every attachment's revision has a title (its file name, as Obsidian shows it); its bytes are kept whole beside the
revision (``store/files.py``). Two kinds hold text worth searching, and are given chunks the way a note is, from
their *reading text*, a small Markdown document parsed by ``parse_note`` (so headings, links and tags come out as a
note's do, and the chunks joined give back the reading text):

- a canvas (JSON Canvas, ``.canvas``): its cards in reading order (top to bottom, then left to right; the cards
  outside any group first, then each group, its label a heading over the cards inside it), separated by blank
  lines: a text card's Markdown as written, a file card as an embed ``![[file]]`` (a link to it), a link card as
  ``<url>``; then each edge's label as a line;
- a base (``.base``, YAML views over notes): a heading per view (``# name (type)``) over its filters, and the
  base's own filters under ``# Filters``, each condition a list item as written.

A file of either kind that is not what it should be (invalid JSON or YAML) keeps its bytes and gets no chunks,
with a warning.

A PDF's text is taken from its bytes (``pdf.pdf_text``: its pages' text, each page under ``# Page N``, bounded),
handed here as Latin-1 text (one character a byte, so the bytes come back exactly); its reading text gives its
chunks, but never links or tags (a PDF's ``[[`` or ``#word`` is text, not Obsidian's syntax). A PDF that cannot
be read gets no chunks of its text, with a warning.

Any other attachment, or one without text, gets one chunk of kind ``name``: its path, so that a file is found by
its name and folder (``Files/diagram.png``) as of any date, as a note is by its title. It is not the file's text
(``store/read.content`` leaves it out).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import yaml

from .model import Chunk, ParsedNote
from .note import parse_note
from .pdf import pdf_text

TEXT_SUFFIXES = (".canvas", ".base")
"""Attachments whose text (UTF-8) is searched."""

PDF_SUFFIX = ".pdf"
"""Attachments whose text is taken from their bytes (``pdf.pdf_text``), handed to the parser as Latin-1."""


def is_pdf(path: str) -> bool:
    return path.lower().endswith(PDF_SUFFIX)


def parse_attachment(path: str, text: str = "") -> ParsedNote:
    """The record of the attachment at ``path`` (``text``: its content, for a canvas or a base; its bytes as
    Latin-1, for a PDF)."""
    name = path.rpartition("/")[2]
    if text and is_pdf(path):
        reading, warnings = pdf_text(text.encode("latin-1"))
        parsed = parse_note(reading, path) if reading.strip() else None
        if parsed is None or not parsed.chunks:
            return ParsedNote(title=name, chunks=(name_chunk(path),), warnings=warnings)
        return ParsedNote(title=name, chunks=parsed.chunks, warnings=(*warnings, *parsed.warnings))
    if not text or not path.endswith(TEXT_SUFFIXES):
        return ParsedNote(title=name, chunks=(name_chunk(path),))
    try:
        reading = canvas_text(text) if path.endswith(".canvas") else base_text(text)
    except (ValueError, TypeError, AttributeError, yaml.YAMLError) as exc:
        kind = "JSON Canvas" if path.endswith(".canvas") else "base (YAML)"
        return ParsedNote(
            title=name,
            chunks=(name_chunk(path),),
            warnings=(f"not a valid {kind} file, its text is not searched: {exc}",),
        )
    if not reading.strip():
        return ParsedNote(title=name, chunks=(name_chunk(path),))
    parsed = parse_note(reading, path)
    return ParsedNote(
        title=name,
        chunks=parsed.chunks,
        tags=parsed.tags,
        links=parsed.links,
        block_ids=parsed.block_ids,
        callouts=parsed.callouts,
        warnings=parsed.warnings,
    )


def name_chunk(path: str) -> Chunk:
    """The one chunk of an attachment without text: its vault path, so that its name and folder are searched."""
    return Chunk(_NAME_ID, path, (), 1, 1, "name")


_NAME_ID = hashlib.blake2b(json.dumps(["vaultsync-chunk/1", "name"]).encode(), digest_size=8).hexdigest()
"""The name chunk's ID (as ``chunks.py`` derives a chunk's: a hash of its key)."""


def parse_file(text: str, path: str) -> ParsedNote:
    """A recorded file's record: a note's (``parse_note``) when ``path`` is Markdown, else an attachment's."""
    return parse_note(text, path) if path.endswith(".md") else parse_attachment(path, text)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def canvas_text(text: str) -> str:
    """A JSON Canvas's reading text (see the module docstring); ValueError when it is not a canvas."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("the top level is not an object")
    nodes = [n for n in data.get("nodes") or [] if isinstance(n, dict)]
    groups = sorted(
        (n for n in nodes if n.get("type") == "group"),
        key=lambda n: (_number(n.get("y")), _number(n.get("x"))),
    )

    def inside(node: dict[str, Any], group: dict[str, Any]) -> bool:
        x, y = _number(node.get("x")), _number(node.get("y"))
        gx, gy = _number(group.get("x")), _number(group.get("y"))
        return gx <= x <= gx + _number(group.get("width")) and gy <= y <= gy + _number(group.get("height"))

    def card(node: dict[str, Any]) -> str:
        kind = node.get("type")
        if kind == "text":
            return str(node.get("text") or "").strip("\n")
        if kind == "file" and node.get("file"):
            sub = str(node.get("subpath") or "")
            return f"![[{node['file']}{sub}]]"
        if kind == "link" and node.get("url"):
            return f"<{node['url']}>"
        return ""

    def order(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(items, key=lambda n: (_number(n.get("y")), _number(n.get("x")), str(n.get("id"))))

    cards = [n for n in nodes if n.get("type") != "group"]
    placed: set[int] = set()
    parts: list[str] = []
    for group in groups:
        members = [n for n in cards if id(n) not in placed and inside(n, group)]
        placed.update(id(n) for n in members)
        label = str(group.get("label") or "").strip().replace("\n", " ")
        texts = [t for t in map(card, order(members)) if t]
        if label or texts:
            parts.append(f"## {label}" if label else "##")
            parts.extend(texts)
    loose = [t for t in map(card, order([n for n in cards if id(n) not in placed])) if t]
    if loose and parts:
        parts.insert(0, "\n\n".join(loose))
    elif loose:
        parts = loose
    for edge in data.get("edges") or []:
        if isinstance(edge, dict) and edge.get("label"):
            parts.append(str(edge["label"]).strip())
    return "".join(part + "\n\n" for part in parts if part)


def base_text(text: str) -> str:
    """A base's reading text (see the module docstring); ValueError when it is not a base."""
    data = yaml.safe_load(text) if text.strip() else {}
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError("the top level is not a mapping")
    parts: list[str] = []
    conditions = _conditions(data.get("filters"))
    if conditions:
        parts.append("# Filters\n\n" + "\n".join(f"- {c}" for c in conditions))
    for view in data.get("views") or []:
        if not isinstance(view, dict):
            continue
        name = str(view.get("name") or "").strip().replace("\n", " ")
        kind = str(view.get("type") or "").strip()
        heading = f"# {name} ({kind})" if name and kind else f"# {name or kind or 'view'}"
        lines = [f"- {c}" for c in _conditions(view.get("filters"))]
        lines += [
            f"- {key}: {', '.join(map(str, value)) if isinstance(value, list) else value}"
            for key in ("order", "sort", "groupBy")
            if (value := view.get(key))
        ]
        parts.append(heading + ("\n\n" + "\n".join(lines) if lines else ""))
    return "".join(part + "\n\n" for part in parts)


def _conditions(value: Any) -> list[str]:
    """The conditions of a base's filter, as written, depth first (``and``/``or``/``not`` groups flattened)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list):
        return [c for item in value for c in _conditions(item)]
    if isinstance(value, dict):
        return [c for key in ("and", "or", "not") for c in _conditions(value.get(key))]
    return [str(value)]


__all__ = [
    "PDF_SUFFIX",
    "TEXT_SUFFIXES",
    "base_text",
    "canvas_text",
    "is_pdf",
    "name_chunk",
    "parse_attachment",
    "parse_file",
]

"""Fixture-file tests for the Markdown parser (markdown-it's ``title / . / input / . / expected / .`` format).

Each case's title may end with a JSON object of options: ``max`` (max_chunk_chars), ``path``
(note path, default ``Fixture Note.md``) and ``ids`` (also compare chunk IDs). In the input, ``␍``
stands for a carriage return, so CRLF and lone-CR notes can live in a normal text file, and a
final ``␃`` ends the note without its last newline.
Expected output is JSON compared as data. Run this file as a script with ``--regen`` to rewrite
expected outputs from the current parser (then read every diff before keeping it).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from vaultsync.parsers import ParsedNote, parse_note

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "parser"
_OPTIONS = re.compile(r"\s+(\{.*\})\s*$")
_YAML_REASON = re.compile(r"^(invalid YAML frontmatter: ).*( \(line \d+\))$")


def read_fixtures(path: Path) -> list[tuple[int, int, int]]:
    """``(first_dot, second_dot, third_dot)`` line indices per case; lines split at ``\\n`` only."""
    lines = _lines(path)
    dots = [i for i, line in enumerate(lines) if line.rstrip() == "."]
    return [(dots[k], dots[k + 1], dots[k + 2]) for k in range(0, len(dots) - 2, 3)]


def _lines(path: Path) -> list[str]:
    return re.findall(r"[^\n]*\n|[^\n]+$", path.read_bytes().decode("utf-8"))


def project(note: ParsedNote, with_ids: bool = False) -> dict[str, Any]:
    """The compact, JSON-shaped view of a note the fixtures spell out."""
    out: dict[str, Any] = {"title": note.title, "tags": list(note.tags), "aliases": list(note.aliases)}
    if note.frontmatter_text is not None:
        out["frontmatter"] = note.frontmatter
        out["frontmatter_text"] = note.frontmatter_text
    # PyYAML words its reasons differently with and without libyaml; the line must match exactly
    out["warnings"] = [_YAML_REASON.sub(r"\1...\2", w) for w in note.warnings]
    out["block_ids"] = list(note.block_ids)
    out["callouts"] = [[c.type, c.title, c.fold, c.line] for c in note.callouts]
    out["links"] = [_link(link) for link in note.links]
    out["chunks"] = [
        [c.kind, list(c.heading_path), [c.line_start, c.line_end], *([c.chunk_id] if with_ids else [])]
        for c in note.chunks
    ]
    return out


def _link(link: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"target": link.target}
    for name in ("heading", "block", "alias"):
        if getattr(link, name) is not None:
            out[name] = getattr(link, name)
    if link.embed:
        out["embed"] = True
    if link.kind != "wikilink":
        out["kind"] = link.kind
    out["line"] = link.line
    return out


def _run(title: str, source: str) -> dict[str, Any]:
    match = _OPTIONS.search(title)
    options = json.loads(match.group(1)) if match else {}
    text = source.replace("\u240d", "\r")
    if text.endswith("\u2403\n"):
        text = text[:-2]
    note = parse_note(text, options.get("path", "Fixture Note.md"), options.get("max", 2000))
    assert "".join(c.text for c in note.chunks) == text
    return project(note, bool(options.get("ids")))


def _cases() -> list[Any]:
    cases = []
    for path in sorted(FIXTURES.glob("*.md")):
        lines = _lines(path)
        for a, b, c in read_fixtures(path):
            title = lines[a - 1].strip()
            case_id = f"{path.stem}:{a}:{_OPTIONS.sub('', title)}"
            cases.append(pytest.param(title, "".join(lines[a + 1 : b]), "".join(lines[b + 1 : c]), id=case_id))
    return cases


CASES = _cases()


def test_fixtures_found() -> None:
    assert len(CASES) >= 25


@pytest.mark.parametrize(("title", "source", "expected"), CASES)
def test_parser_fixture(title: str, source: str, expected: str) -> None:
    assert _run(title, source) == json.loads(expected)


def format_expected(data: dict[str, Any]) -> str:
    """One key per line, one link or chunk per line: diffs stay readable."""
    rows = []
    for key, value in data.items():
        if key in ("links", "chunks") and value:
            inner = ",\n".join("  " + json.dumps(v, ensure_ascii=False) for v in value)
            rows.append(f' "{key}": [\n{inner}\n ]')
        else:
            rows.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(rows) + "\n}\n"


def _regenerate() -> None:
    for path in sorted(FIXTURES.glob("*.md")):
        lines = _lines(path)
        for a, b, c in reversed(read_fixtures(path)):
            lines[b + 1 : c] = [format_expected(_run(lines[a - 1].strip(), "".join(lines[a + 1 : b])))]
        path.write_text("".join(lines), encoding="utf-8")


if __name__ == "__main__" and sys.argv[1:] == ["--regen"]:
    _regenerate()

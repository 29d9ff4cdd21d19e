"""The connection strings the docs and examples show work as written: every ``options=-c…`` setting writes its
``=`` as ``%3D`` (psycopg refuses a bare ``=`` inside ``options``), and psycopg parses each such string."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PLACES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "examples").rglob("*.*"))]
OPTION = re.compile(r"options=-c[A-Za-z_]+[^\s`\"'&]*")


def shown() -> list[tuple[str, str]]:
    found = []
    for place in PLACES:
        if place.suffix in {".png", ".xml", ".plist"} or not place.is_file():
            continue
        for match in OPTION.finditer(place.read_text(encoding="utf-8", errors="replace")):
            found.append((place.relative_to(REPO).as_posix(), match.group(0)))
    return found


def test_every_options_setting_in_the_docs_writes_its_equals_sign_as_percent_3d() -> None:
    settings = shown()
    assert settings, "no options=-c… found: the pattern no longer matches the docs"
    bare = [(where, text) for where, text in settings if "=" in text[len("options=") :]]
    assert not bare, bare


def test_psycopg_reads_the_documented_form() -> None:
    conninfo = pytest.importorskip("psycopg.conninfo")
    parsed = conninfo.conninfo_to_dict("postgresql://vaultsync_owner@db.internal:5432/team?options=-csearch_path%3Dv")
    assert parsed["options"] == "-csearch_path=v"

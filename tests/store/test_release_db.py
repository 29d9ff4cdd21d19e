"""A database written by the previous release opens with today's code, every note and past state intact."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from support.engines import sqlite_file

from vaultsync import NoteNotFound, Vault

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "release_db"


RELEASE = "release-0.1.0"
"""Written by vaultsync 0.1.0 (schema 1)."""
SCHEMA_6 = "schema-6"
"""Written by main at 1e50317 (schema 6, the last before m007 recorded callers), with a write tool's batch."""
SCHEMA_7 = "schema-7"
"""Written by main at a45d9ef (schema 7, the last release before m008 kept search spans)."""


@pytest.fixture
def release_db(tmp_path: Path) -> Path:
    """A copy of the release fixture (opening for writing migrates it in place)."""
    return fixture_copy(tmp_path, RELEASE)


def fixture_copy(tmp_path: Path, name: str) -> Path:
    db = tmp_path / f"{name}.db"
    shutil.copyfile(FIXTURE / f"{name}.db", db)
    return db


def truth(name: str = RELEASE) -> dict[str, dict[str, str]]:
    return json.loads((FIXTURE / f"{name}.truth.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("readonly", [False, True])
@pytest.mark.parametrize("name", [RELEASE, SCHEMA_6, SCHEMA_7])
def test_every_note_and_every_past_state_survive(tmp_path: Path, name: str, readonly: bool) -> None:
    # read-only, an old database is read as it is (its search tables are current); for writing it is migrated
    release_db = fixture_copy(tmp_path, name)
    expected = truth(name)
    everything = set().union(*expected.values())
    with Vault.open(release_db, name="notes", readonly=readonly) as vault:
        assert vault.check() == []
        for when, notes in expected.items():
            assert [r.path for r in vault.ls(as_of=when)] == sorted(notes), when
            for path in sorted(everything):
                if path in notes:
                    content = vault.read(path, as_of=when).content
                    assert hashlib.sha256(content.encode("utf-8")).hexdigest() == notes[path], (when, path)
                else:
                    with pytest.raises(NoteNotFound):
                        vault.read(path, as_of=when)
        history = vault.history("Recipes/Chili for Twelve.md")
        assert [r.path for r in history][0] == "Recipes/Team Lunch Chili.md"
        assert vault.search("ferry timetable", mode="keyword").hits[0]["path"] == "Home.md"


def test_opening_for_writing_migrates_once_and_keeps_reading(release_db: Path) -> None:
    from vaultsync.store.schema import MIGRATIONS

    with Vault.open(release_db, name="notes") as vault:
        with sqlite_file(release_db) as con:
            assert con.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        before = vault.search("ferry timetable", mode="keyword").hits
    with Vault.open(release_db, name="notes", readonly=True) as vault:
        assert vault.search("ferry timetable", mode="keyword").hits == before and vault.check() == []


def test_migrated_index_equals_a_fresh_one_without_blank_or_heading_only_chunks(release_db: Path) -> None:
    """m003 takes the 0.1.0 index's blank and heading-only chunk rows out: at every cutoff, keyword search
    equals a fresh FTS5 table over exactly the chunks `export` marks indexed, and none of those is bare."""
    from support.search_truth import fresh_keyword, same_ranking, split_export

    from vaultsync.embed.tokenizer import has_content, parse_query

    with Vault.open(release_db, name="notes") as vault:
        cutoffs = [None, *truth()]
        dropped = 0
        for as_of in cutoffs:
            header, chunks = split_export(vault.export(as_of=as_of))
            dropped += sum(not c["indexed"] for c in chunks)
            assert all(has_content(c["text"]) for c in chunks if c["indexed"])
            for query in ["ferry timetable", "the", "chili", "notes"]:
                expression = parse_query(query).expression
                got = vault.search(query, as_of=as_of, mode="keyword", limit=1000).hits
                same_ranking(
                    [(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in got],
                    fresh_keyword(header, chunks, expression),
                )
        assert dropped > 0  # the fixture has such chunks: the migration had work to do


@pytest.mark.parametrize("readonly", [False, True])
def test_a_write_tools_batch_before_callers_were_recorded_is_still_an_assistants(
    tmp_path: Path, readonly: bool, cli
) -> None:
    """A schema-6 batch of the write tools (source "write", no caller column) is listed by ``changes --source
    mcp``, read-only as it is and after m007, and names no caller; ``--caller`` finds nothing there."""
    db = fixture_copy(tmp_path, SCHEMA_6)
    if not readonly:
        with Vault.open(db, name="notes"):
            pass  # migrates
    listed = cli("changes", "--source", "mcp", "--json", db=db)
    assert listed.returncode == 0, listed.stderr
    batches = json.loads(listed.stdout)
    assert [(b["paths"], b["source"], b["caller"], b["known_at"][:10]) for b in batches] == [
        (["Inbox.md"], "write", None, "2025-05-05")
    ]
    assert json.loads(cli("changes", "--caller", "mcp", "--json", db=db).stdout) == []

"""A database written by the previous release opens with today's code, every note and past state intact."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from vaultsync import NoteNotFound, Vault

FIXTURE = Path(__file__).parent / "fixtures" / "release_db"


@pytest.fixture
def release_db(tmp_path: Path) -> Path:
    """A copy of the release fixture (opening for writing migrates it in place)."""
    db = tmp_path / "release-0.1.0.db"
    shutil.copyfile(FIXTURE / "release-0.1.0.db", db)
    return db


def truth() -> dict[str, dict[str, str]]:
    return json.loads((FIXTURE / "release-0.1.0.truth.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("readonly", [False, True])
def test_every_note_and_every_past_state_survive(release_db: Path, readonly: bool) -> None:
    # read-only, the 0.1.0 database is read as it is (its search tables are current); for writing it is migrated
    expected = truth()
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
        assert vault._store.db.one("PRAGMA user_version")[0] == len(MIGRATIONS)
        before = vault.search("ferry timetable", mode="keyword").hits
    with Vault.open(release_db, name="notes", readonly=True) as vault:
        assert vault.search("ferry timetable", mode="keyword").hits == before and vault.check() == []


def test_migrated_index_equals_a_fresh_one_without_blank_or_heading_only_chunks(release_db: Path) -> None:
    """m003 takes the 0.1.0 index's blank and heading-only chunk rows out: at every cutoff, keyword search
    equals a fresh FTS5 table over exactly the chunks `export` marks indexed, and none of those is bare."""
    from search_truth import fresh_keyword, same_ranking, split_export
    from vaultsync.tokenizer import has_content, parse_query

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
                same_ranking([(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in got],
                             fresh_keyword(header, chunks, expression))
        assert dropped > 0  # the fixture has such chunks: the migration had work to do

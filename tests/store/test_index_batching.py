"""The search indexer writes a note's docs in one go (one hash lookup, one FTS5 insert, one size read) and ends a
note's rows with texts remembered by doc hash: the index must be what one text at a time gives."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.engines import sqlite_file

from vaultsync import Vault
from vaultsync.embed.tokenizer import TOKENIZE
from vaultsync.store.search import index
from vaultsync.store.search.embedding import doc_texts

SHARED = "A paragraph that several notes and revisions share, word for word."


def write_notes(root: Path, revision: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for n in range(6):
        body = [
            f"# Note {n}",
            f"Only in note {n}, revision {revision}: 東京で会議 {n * revision}.",
            "## Again",
            SHARED,
            "## Again",
            SHARED,
        ]  # the same text twice in one note: one doc, two rows
        if (n + revision) % 3:
            body.append(f"A line that comes and goes ({n}).")
        body += ["## End", "The end."]
        (root / f"note {n}.md").write_text("\n\n".join(body) + "\n", encoding="utf-8")
        if n == 0:  # a copy: the same docs in another note
            (root / "copy.md").write_text("\n\n".join(body) + "\n", encoding="utf-8")
    if revision == 2:
        (root / "note 5.md").unlink()


def build(tmp_path: Path, name: str, *, forget_texts: bool) -> Path:
    db, root = tmp_path / f"{name}.db", tmp_path / name
    for revision in range(3):
        write_notes(root, revision)
        if forget_texts:  # every ended row's text regenerated from the revision tables, as a new process does
            index._TEXTS.clear()
        with Vault.open(db, root=root) as vault:
            vault.sync(known_at=f"2024-01-0{revision + 1}")
    return db


def fts_lengths(texts: list[str]) -> list[int]:
    """Token counts of ``texts`` from a fresh FTS5 table with the index's tokenizer (one text at a time)."""
    con = apsw.Connection(":memory:")
    con.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, content='', tokenize='{TOKENIZE}')")
    out = []
    for i, text in enumerate(texts, 1):
        con.execute("INSERT INTO t (rowid, x) VALUES (?, ?)", (i, text))
        out.append(index._varint(con.execute("SELECT sz FROM t_docsize WHERE id = ?", (i,)).fetchone()[0]))
    return out


def search_tables(con: apsw.Connection) -> dict[str, list[tuple]]:
    names = [
        name
        for (name,) in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'search%' ORDER BY name"
        )
    ]
    return {name: con.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall() for name in names}


def test_docs_written_per_note_are_those_of_one_text_at_a_time(tmp_path: Path) -> None:
    db = build(tmp_path, "vault", forget_texts=False)
    with sqlite_file(db) as con:
        docs = con.execute("SELECT id, length FROM search_docs ORDER BY id").fetchall()
        texts = dict(doc_texts(con))
        assert [doc_id for doc_id, _ in docs] == list(range(1, len(docs) + 1))  # ids dense, in order of appearance
        assert [length for _, length in docs] == fts_lengths([texts[doc_id] for doc_id, _ in docs])
        assert (
            con.execute(
                "SELECT count(*) FROM (SELECT 1 FROM search_rows GROUP BY note_id, doc_id HAVING count(*) > 1)"
            ).fetchone()[0]
            >= 6
        )  # a doc twice in one revision
        assert (
            con.execute(
                "SELECT count(*) FROM (SELECT 1 FROM search_rows GROUP BY doc_id HAVING count(DISTINCT note_id) > 2)"
            ).fetchone()[0]
            >= 6
        )  # in other notes, revisions
        first = con.execute("SELECT doc_id, min(born) FROM search_rows GROUP BY doc_id").fetchall()
        for batch_id, max_doc in con.execute("SELECT batch_id, max_doc FROM search_stats"):
            assert max_doc == max(doc for doc, born in first if born <= batch_id)
        totals = con.execute("SELECT docs, tokens FROM search_doc_totals").fetchone()
        assert totals == (len(docs), sum(length for _, length in docs))
        live = con.execute("SELECT count(*) FROM search_rows WHERE died IS NULL").fetchone()[0]
        assert con.execute("SELECT count(*) FROM search_live_1_docsize").fetchone()[0] == live


def test_ended_rows_remembered_or_regenerated_give_the_same_index(tmp_path: Path) -> None:
    remembered = build(tmp_path, "remembered", forget_texts=False)
    regenerated = build(tmp_path, "regenerated", forget_texts=True)
    with sqlite_file(remembered) as a, sqlite_file(regenerated) as b:
        tables = search_tables(a)
        assert "search_live_1_data" in tables and tables["search_live_1_data"]
        assert tables == search_tables(b)  # the live FTS5 table's segments included, byte for byte

"""Purge repairs the search index instead of rebuilding it: what the purge did not touch keeps its index
rows (and another vault keeps everything), and the repaired index equals a rebuilt one where answers are
concerned: the per-batch statistics every cutoff sums, the live table, and keyword search at every batch
against a fresh FTS5 index over ``export``."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from support.purge_repair import SECRET, TIMES, _rebuilt, _rows, _states, _write, two_vaults  # noqa: F401 (a fixture)
from support.search_truth import FreshKeyword, same_ranking, split_export

from vaultsync.embed.tokenizer import parse_query
from vaultsync.vault import Vault

QUERIES = ["harlequin gazebo", "purged", "garden notes", "lantern", "7731"]


def _vault_id(db: Path, name: str) -> int:
    return _rows(db, "SELECT id FROM vaults WHERE name = ?", (name,))[0][0]


def _index_of(db: Path, vault_id: int, doc_ids: bool = False) -> tuple:
    """Everything the index holds for one vault (doc ids replaced by the doc's content hash, unless ``doc_ids``)."""
    doc = "r.doc_id" if doc_ids else "d.hash"
    rows = _rows(
        db,
        f"""SELECT r.id, r.note_id, {doc}, d.length, r.born, r.died FROM search_rows r
                        JOIN search_docs d ON d.id = r.doc_id WHERE r.vault_id = ? ORDER BY r.id""",
        (vault_id,),
    )
    live = _rows(db, f"SELECT rowid FROM search_live_{vault_id} ORDER BY rowid")
    vectors = _rows(
        db,
        """SELECT d.hash, v.refs, v.embedding FROM search_live_vectors v JOIN search_docs d
                           ON d.id = v.doc_id WHERE v.vault_id = ? ORDER BY d.hash""",
        (vault_id,),
    )
    return rows, live, vectors


def _cutoff_stats(db: Path, vault_id: int) -> list[tuple]:
    """(batch, visible rows, tokens) at every batch of the vault: what a cutoff's BM25 takes."""
    return _rows(
        db,
        """SELECT b.id, (SELECT coalesce(sum(rows), 0) FROM search_stats s WHERE s.vault_id = b.vault_id
                              AND s.batch_id <= b.id),
                               (SELECT coalesce(sum(tokens), 0) FROM search_stats s WHERE s.vault_id = b.vault_id
                              AND s.batch_id <= b.id)
                        FROM batches b WHERE b.vault_id = ? ORDER BY b.id""",
        (vault_id,),
    )


@pytest.mark.parametrize("kind", ["text", "note", "before"])
def test_purge_repairs_only_what_it_touched(two_vaults: tuple[Path, Path, Path], tmp_path: Path, kind: str) -> None:
    db, alpha, _ = two_vaults
    a, b = _vault_id(db, "alpha"), _vault_id(db, "beta")
    other_before = _index_of(db, b, doc_ids=True)
    untouched = {
        r[0]: r
        for r in _index_of(db, a)[0]
        if r[1] in {n for (n,) in _rows(db, "SELECT id FROM notes WHERE path IN ('n0.md', 'n5.md')")}
    }
    with Vault.open(db, root=alpha) as vault:
        args = {"text": {"texts": [SECRET]}, "note": {"note": "n2.md"}, "before": {"before": TIMES[3]}}[kind]
        result = vault.purge(**args, also_current=True)
        assert result.revisions_changed + result.revisions_removed > 0
    assert _index_of(db, b, doc_ids=True) == other_before  # the other vault's index: untouched, not rebuilt
    after = {r[0]: r for r in _index_of(db, a)[0]}
    kept = [row_id for row_id in untouched if row_id in after]
    assert kept and all(after[row_id] == untouched[row_id] for row_id in kept)  # repaired, not rebuilt
    rebuilt = _rebuilt(db, tmp_path / "rebuilt.db")
    assert _cutoff_stats(db, a) == _cutoff_stats(rebuilt, a)
    assert _index_of(db, a)[1:] == _index_of(rebuilt, a)[1:]
    assert sorted(r[2:] for r in _index_of(db, a)[0]) == sorted(r[2:] for r in _index_of(rebuilt, a)[0])
    assert _rows(db, "SELECT docs, tokens FROM search_doc_totals") == _rows(
        rebuilt, "SELECT docs, tokens FROM search_doc_totals"
    )
    assert (
        _rows(db, "SELECT count(*) FROM search_docs")
        == _rows(rebuilt, "SELECT count(*) FROM search_docs")
        == _rows(db, "SELECT count(*) FROM search_vectors")
    )
    with Vault.open(db, name="alpha", readonly=True) as vault:
        for when in TIMES[3:] if kind == "before" else TIMES:
            header, chunks = split_export(vault.export(as_of=when))
            if kind == "text":
                assert all(SECRET not in c["text"] for c in chunks)
            fresh = FreshKeyword(header, chunks)  # built once, asked every query
            for query in QUERIES:
                got = vault.search(query, as_of=when, mode="keyword", limit=1000)
                same_ranking(
                    [(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in got.hits],
                    fresh.search(parse_query(query).expression),
                )
            fresh.close()
        assert vault.check() == []


@pytest.mark.parametrize("kind", ["text", "note", "before"])
def test_purge_leaves_the_schema_as_it_found_it(two_vaults: tuple[Path, Path, Path], kind: str) -> None:
    """The indexes a purge makes for its own deletes are gone after it, and every foreign key still holds."""
    db, alpha, _ = two_vaults
    schema = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
    before = _rows(db, schema)
    with Vault.open(db, root=alpha) as vault:
        args = {"text": {"texts": [SECRET]}, "note": {"note": "n2.md"}, "before": {"before": TIMES[3]}}[kind]
        result = vault.purge(**args, also_current=True)
    assert result.revisions_changed + result.revisions_removed > 0 and result.batches_removed >= 0
    assert _rows(db, schema) == before
    assert _rows(db, "PRAGMA foreign_key_check") == []
    assert _rows(db, "SELECT count(*) FROM texts WHERE id NOT IN (SELECT text_id FROM chunks)") == [(0,)]


def _vocabulary(db: Path, table: str) -> list[tuple]:
    """(term, docs, occurrences) of every term an FTS5 table holds."""
    con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        con.execute(f'CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, "{table}", "row")')
        return con.execute("SELECT term, doc, cnt FROM temp.v ORDER BY term").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("kind", ["text", "note", "before"])
def test_docs_only_purged_rows_used_leave_the_index(tmp_path: Path, kind: str) -> None:
    """In a store of one vault (no other vault shares its docs), the docs that only the purged or rewritten
    rows used are deleted, with their vectors and their FTS5 terms, and no other: the docs, their totals
    and both FTS5 vocabularies are those of a rebuilt index."""
    db, root = tmp_path / "store.db", tmp_path / "alpha"
    root.mkdir()
    with Vault.open(db, root=root) as vault:
        for when, files in zip(TIMES, _states()):
            _write(root, files)
            vault.sync(known_at=when)
    docs = _rows(db, "SELECT hash FROM search_docs ORDER BY hash")
    with Vault.open(db, root=root) as vault:
        args = {"text": {"texts": [SECRET]}, "note": {"note": "n2.md"}, "before": {"before": TIMES[3]}}[kind]
        vault.purge(**args, also_current=True)
    rebuilt = _rebuilt(db, tmp_path / "rebuilt.db")
    after = _rows(db, "SELECT hash FROM search_docs ORDER BY hash")
    assert set(docs) - set(after)  # some docs went (so the comparison below can fail)
    assert after == _rows(rebuilt, "SELECT hash FROM search_docs ORDER BY hash")
    assert (
        _rows(db, "SELECT docs, tokens FROM search_doc_totals")
        == _rows(rebuilt, "SELECT docs, tokens FROM search_doc_totals")
        == [(len(after), _rows(db, "SELECT sum(length) FROM search_docs")[0][0])]
    )
    assert _rows(db, "SELECT count(*) FROM search_vectors") == [(len(after),)]
    vault_id = _vault_id(db, "alpha")
    for table in ("search_fts", f"search_live_{vault_id}"):
        assert _vocabulary(db, table) == _vocabulary(rebuilt, table), table

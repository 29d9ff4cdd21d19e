"""``vaultsync copy`` into PostgreSQL builds each copied vault's search index in one pass (``pg/bulk.py``) and writes
the revisions' chunks and texts with their statements sent together: the database is the one the batch-by-batch
indexer leaves, table for table and row for row (doc ids, postings, rows, statistics, the live set, the spans,
vectors, validity), into an empty database as into one that already holds another vault sharing texts; the
revisions keep the ids a one-by-one copy gives them (SQLite's own copy); and the copy answers every search as the
source, at every batch time.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.pg_live import SHARED, STATES, T0, _history, _same_searches, _write

from vaultsync import Vault
from vaultsync.store.pg.dictionary import PAIRS
from vaultsync.store.transfer import copy_databases

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")

BOUNDED = "---\nvalid_from: 2020-01-01\nvalid_to: 2030-01-01\n---\n# Bounded\n\nA tide report valid for a decade.\n"
EMPTY = "\n\n"
STATES_PLUS = [
    {**STATES[0], "Bounded.md": BOUNDED, "Empty.md": EMPTY, "Headings.md": "# Only\n\n## Headings\n"},
    *STATES[1:3],
    {**STATES[3], "Bounded.md": BOUNDED.replace("decade", "decade, revised")},
]

TABLES = {
    "search_docs": "SELECT id, hash, length FROM search_docs ORDER BY id",
    "search_doc_terms": "SELECT d.doc, array(SELECT t.term FROM unnest(d.terms) WITH ORDINALITY AS u(id, o) "
    f"JOIN {PAIRS} t ON t.id = u.id ORDER BY u.o), d.tfs, d.positions FROM search_doc_terms d ORDER BY d.doc",
    "search_live_terms": "SELECT d.doc, array(SELECT t.term FROM unnest(d.terms) WITH ORDINALITY AS u(id, o) "
    f"JOIN {PAIRS} t ON t.id = u.id ORDER BY u.o), d.tfs, d.positions FROM search_live_terms d ORDER BY d.doc",
    "search_rows": "SELECT id, vault_id, note_id, doc_id, born, died FROM search_rows ORDER BY id",
    "search_vectors": "SELECT doc_id, embedding, {vec} FROM search_vectors ORDER BY doc_id",
    "search_stats": "SELECT vault_id, batch_id, rows, tokens, max_doc FROM search_stats ORDER BY 1, 2",
    "search_live": "SELECT vault_id, doc_id, rows, length FROM search_live ORDER BY 1, 2",
    "search_doc_spans": "SELECT vault_id, doc_id, born, died FROM search_doc_spans ORDER BY 1, 2, 3",
    "search_bounded": "SELECT note_id, vault_id FROM search_bounded ORDER BY 1",
    "search_state": "SELECT vault_id, last_batch FROM search_state ORDER BY 1",
    "next doc id": "SELECT nextval(pg_get_serial_sequence('search_docs', 'id'))",
}
REVISIONS = {
    "notes": "SELECT id, vault_id, batch_id, path, kind, prev_id, content_hash FROM notes ORDER BY id",
    "chunks": "SELECT id, note_id, ord, chunk_id, text_id, heading_path, links_id FROM chunks ORDER BY id",
    "texts": "SELECT id, hash FROM texts ORDER BY id",
    "blobs": "SELECT id, hash FROM blobs ORDER BY id",
}


def _tables(dsn: str, queries: dict[str, str]) -> dict[str, list[tuple]]:
    import psycopg

    from vaultsync.store.pg.vectors import pgvector_schema

    with psycopg.connect(dsn) as con:
        vec = "vec::text" if pgvector_schema(con) is not None else "NULL"
        return {name: [tuple(r) for r in con.execute(q.format(vec=vec))] for name, q in queries.items()}


def _lite(db: Path, queries: dict[str, str]) -> dict[str, list[tuple]]:
    import apsw

    con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {name: [tuple(r) for r in con.execute(q)] for name, q in queries.items()}
    finally:
        con.close()


def _other_vault(dsn: str, tmp_path: Path) -> None:
    """A vault already in the destination, one of whose texts the copied vaults share."""
    _write(tmp_path / "x", {"Shared.md": SHARED, "Mine.md": "# Mine\n\nA gauge of x's own.\n"})
    with Vault.open(dsn, root=tmp_path / "x", name="x") as vault:
        vault.sync(known_at=T0 - 1)


@pytest.mark.parametrize("occupied", [False, True], ids=["empty", "holding-another-vault"])
def test_a_bulk_copy_leaves_the_tables_the_batch_by_batch_indexer_leaves(tmp_path: Path, occupied: bool) -> None:
    lite = tmp_path / "lite.db"
    times = _history(lite, tmp_path, states=STATES_PLUS)
    bulk, slow = pgserver.fresh_or_skip("bulkcopy"), pgserver.fresh_or_skip("slowcopy")
    if occupied:
        for dsn in (bulk, slow):
            _other_vault(dsn, tmp_path)
    copy_databases(lite, bulk)
    copy_databases(lite, slow, bulk=False)
    built, kept = _tables(bulk, TABLES), _tables(slow, TABLES)
    for name in TABLES:
        assert built[name] == kept[name], name
    assert built["search_bounded"] and built["search_doc_terms"] and built["search_doc_spans"]  # something compared
    assert any(died is not None for *_, died in built["search_rows"])
    assert len({vault for vault, *_ in built["search_live"]}) == (3 if occupied else 2)
    if not occupied:  # the revisions' ids are those of a copy made one statement at a time (SQLite's own)
        back = tmp_path / "back.db"
        copy_databases(lite, back)
        assert _tables(bulk, REVISIONS) == _lite(back, REVISIONS)
    with Vault.open(bulk, name="v", readonly=True) as vault:
        assert vault.check() == []
    assert _same_searches(lite, bulk, times) > 300


def _stats(dsn: str, table: str) -> tuple[int, int, int]:
    """The table's rows inserted, deleted and dead, as the statistics count them once the copy's sessions reported
    (a session reports as it ends: waited for, a bounded while)."""
    import time

    import psycopg

    with psycopg.connect(dsn, autocommit=True) as con:
        for _ in range(100):
            con.execute("SELECT pg_stat_clear_snapshot()")
            found = con.execute(
                "SELECT n_tup_ins, n_tup_del, n_dead_tup FROM pg_stat_user_tables WHERE relid = to_regclass(%s)",
                (table,),
            ).fetchone()
            if found[0]:
                return tuple(found)
            time.sleep(0.1)
    raise AssertionError(f"no statistics of {table}")


def test_a_bulk_copy_writes_each_docs_postings_once_where_they_end(tmp_path: Path, monkeypatch) -> None:
    """A text first met in a revision that ended and current again at the end: its postings go straight to the live
    docs' table, though the two revisions are read in different rounds (``STEP``): none moved after."""
    from vaultsync.store.pg import bulk

    monkeypatch.setattr(bulk, "STEP", 1)  # (each note revision a round of its own)
    lite = tmp_path / "lite.db"
    first, second = "# Tide\n\nThe tide gauge at dawn.\n", "# Tide\n\nThe tide gauge at dusk, moved.\n"
    for i, text in enumerate([first, second, first]):
        _write(tmp_path / "v", {"Tide.md": text, "Keep.md": f"# Keep\n\nA keeper's log, entry {i}.\n"})
        with Vault.open(lite, root=tmp_path / "v", name="v") as vault:
            vault.sync(known_at=T0 + i * 1000)
    bulk_dsn, slow = pgserver.fresh_or_skip("oncecopy"), pgserver.fresh_or_skip("onceslow")
    copy_databases(lite, bulk_dsn)
    copy_databases(lite, slow, bulk=False)
    postings = {name: TABLES[name] for name in ("search_docs", "search_doc_terms", "search_live_terms")}
    built = _tables(bulk_dsn, postings)
    assert built == _tables(slow, postings)
    assert len(built["search_live_terms"]) == 2 and len(built["search_doc_terms"]) == 3
    for table in ("search_doc_terms", "search_live_terms"):
        inserted, deleted, dead = _stats(bulk_dsn, table)
        assert (inserted, deleted, dead) == (len(built[table]), 0, 0), table


def _index_pages(dsn: str, column: str = "pg_relation_size(c.oid) / current_setting('block_size')::int") -> dict:
    """Each btree index of the schema's pages (or another ``column`` of it)."""
    import psycopg

    with psycopg.connect(dsn) as con:
        return dict(
            con.execute(
                f"SELECT c.relname, {column} FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.relkind = 'i' "
                "AND a.amname = 'btree' AND c.relnamespace = current_schema()::regnamespace"
            ).fetchall()
        )


def test_a_copy_into_an_empty_database_leaves_its_indexes_compact(tmp_path: Path) -> None:
    """Copied into a database that held no vault, no index is any smaller built again; into one holding another
    vault, none is built again (readers may be using them)."""
    import psycopg

    lite = tmp_path / "lite.db"
    section = "## Part {j}\n\nGauge {i} reads {k} at watch {j}.\n\n"
    notes = {  # (paths and hashes in no order)
        f"{i * 7919 % 1009:04d} note.md": "".join(section.format(i=i, j=j, k=i * j) for j in range(4))
        for i in range(400)
    }
    _write(tmp_path / "v", notes)
    with Vault.open(lite, root=tmp_path / "v", name="v") as vault:
        vault.sync(known_at=T0)
    empty, occupied = pgserver.fresh_or_skip("compact"), pgserver.fresh_or_skip("occupied")
    _other_vault(occupied, tmp_path)
    files = _index_pages(occupied, "c.relfilenode")
    copy_databases(lite, empty)
    copy_databases(lite, occupied)
    grown = _index_pages(empty)
    with psycopg.connect(empty, autocommit=True) as con:
        con.execute("REINDEX SCHEMA " + con.execute("SELECT current_schema()").fetchone()[0])
    built = _index_pages(empty)
    assert {name: pages for name, pages in grown.items() if pages > built[name]} == {}
    assert sum(grown.values()) > 3 * len(grown)  # (indexes of several pages)
    kept = _index_pages(occupied, "c.relfilenode")
    assert [name for name in files if kept[name] != files[name]] == []


def test_migrate_builds_again_the_indexes_an_earlier_copy_grew(tmp_path: Path) -> None:
    """A copy into a database holding another vault (as every copy and batch of earlier versions) leaves indexes
    grown row by row; migration m018 (``vaultsync migrate``) builds them again: none is then any smaller built anew,
    and the past docs' postings are written anew."""
    import psycopg

    from vaultsync.store.pg import upgrade

    lite = tmp_path / "lite.db"
    section = "## Part {j}\n\nGauge {i} reads {k} at watch {j}.\n\n"
    notes = {
        f"{i * 7919 % 1009:04d} note.md": "".join(section.format(i=i, j=j, k=i * j) for j in range(4))
        for i in range(400)
    }
    _write(tmp_path / "v", notes)
    with Vault.open(lite, root=tmp_path / "v", name="v") as vault:
        vault.sync(known_at=T0)
    dsn = pgserver.fresh_or_skip("compactmigrate")
    _other_vault(dsn, tmp_path)
    copy_databases(lite, dsn)
    grown = _index_pages(dsn)
    with psycopg.connect(dsn) as con:
        assert con.execute("DELETE FROM vaultsync_schema WHERE name = 'compact_indexes'").rowcount == 1
        postings = con.execute("SELECT pg_relation_filenode('search_doc_terms')").fetchone()[0]
    upgrade(dsn)
    migrated = _index_pages(dsn)
    assert {name for name, pages in grown.items() if pages > migrated[name]}  # (the copy left some grown)
    with psycopg.connect(dsn, autocommit=True) as con:
        assert con.execute("SELECT pg_relation_filenode('search_doc_terms')").fetchone()[0] != postings
        con.execute("REINDEX SCHEMA " + con.execute("SELECT current_schema()").fetchone()[0])
    built = _index_pages(dsn)
    assert {name: pages for name, pages in migrated.items() if pages > built[name]} == {}

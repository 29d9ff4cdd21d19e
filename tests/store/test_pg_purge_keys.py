"""PostgreSQL's schema m008: every foreign key whose parent rows a purge deletes is checked through an index, and
the postings keep no foreign key (the rebuild inside a purge deleted every doc, each deletion scanning them).

The catalog is read independently of the code: every foreign key pointing at a table a purge deletes from must
have an index whose first column is the key's. m008 run on a database built before it gives that schema, and the
purges after it answer as SQLite's; ``check`` reports postings whose doc is gone, since no key keeps them now.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vaultsync import Vault

pgserver = pytest.importorskip("support.pgserver")
from support.pg_live import T0, _history, _same_searches  # noqa: E402

pytestmark = pytest.mark.pg

PURGED_PARENTS = ("batches", "notes", "texts", "blobs", "search_docs")
"""The tables a purge deletes rows from that other tables point at (``store/purge.py``, ``pg/keyword.reindex``)."""

FOREIGN_KEYS = """
SELECT c.conrelid::regclass::text, a.attname, c.confrelid::regclass::text,
       EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1])
FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace
"""


def _keys(dsn: str) -> list[tuple[str, str, str, bool]]:
    import psycopg

    with psycopg.connect(dsn) as con:
        return sorted(con.execute(FOREIGN_KEYS).fetchall())


def _unindexed(dsn: str) -> list[tuple[str, str, str]]:
    return [
        (child, column, parent)
        for child, column, parent, indexed in _keys(dsn)
        if parent in PURGED_PARENTS and not indexed
    ]


def test_every_key_a_purge_checks_has_an_index(tmp_path: Path) -> None:
    dsn = pgserver.fresh_or_skip("purgekeys")
    _history(dsn, tmp_path)
    keys = _keys(dsn)
    assert {(child, column) for child, column, parent, _ in keys if parent in PURGED_PARENTS} >= {
        ("chunks", "text_id"),
        ("chunks", "links_id"),
        ("notes", "prev_id"),
        ("notes", "batch_id"),
        ("note_ends", "batch_id"),
        ("git_commits", "batch_id"),
    }  # what the check below covers
    assert _unindexed(dsn) == []
    assert not [k for k in keys if k[0] in ("search_postings", "search_doc_terms")]


def test_m008_on_a_database_built_before_it(tmp_path: Path) -> None:
    """A database with m007's schema (m008 undone, the version set back): the check above fails on it; opening it
    with ``upgrade`` (``vaultsync migrate``) runs m008; then a text purge and a retention purge answer as SQLite's,
    and ``check`` is clean."""
    import psycopg

    from vaultsync.store.pg import upgrade
    from vaultsync.store.pg.schema import FK_INDEXES

    dsn = pgserver.fresh_or_skip("purgekeysmigrate")
    times = _history(dsn, tmp_path)
    with psycopg.connect(dsn) as con:
        for index in FK_INDEXES:
            con.execute(f"DROP INDEX {index}")
        con.execute("DELETE FROM vaultsync_schema WHERE version >= 8 AND name <> 'compact_index'")
    assert len(_unindexed(dsn)) >= 6
    with pytest.raises(Exception, match="older vaultsync"):
        Vault.open(dsn, name="v", readonly=True)
    with pytest.raises(Exception, match="older vaultsync"):
        Vault.open(dsn, root=tmp_path / "v", name="v")  # nor written: only `vaultsync migrate` changes the schema
    upgrade(dsn)  # `vaultsync migrate`: runs m008 (and those after it)
    with Vault.open(dsn, root=tmp_path / "v", name="v") as vault:
        assert _unindexed(dsn) == []
        purged = vault.purge(texts=["lighthouse"], also_current=True)
        assert purged.revisions_changed > 0 and vault.check() == []
    _history(tmp_path / "lite.db", tmp_path)
    with Vault.open(tmp_path / "lite.db", root=tmp_path / "v", name="v") as lite:
        assert lite.purge(texts=["lighthouse"], also_current=True).revisions_changed == purged.revisions_changed
    assert _same_searches(tmp_path / "lite.db", dsn, times) > 300
    horizon = times[2]
    for db in (dsn, tmp_path / "lite.db"):
        with Vault.open(db, root=tmp_path / "v", name="v") as vault:
            assert vault.purge(before=horizon).revisions_removed > 0
            assert vault.check() == []
    with (
        Vault.open(tmp_path / "lite.db", name="v", readonly=True) as lite,
        Vault.open(dsn, name="v", readonly=True) as pg,
    ):
        for at in (None, horizon, times[-1]):
            for query in ("tide", "keeper", "storm season"):
                want = [(h["path"], h["chunk_id"]) for h in lite.search(query, as_of=at, mode="keyword").hits]
                assert [(h["path"], h["chunk_id"]) for h in pg.search(query, as_of=at, mode="keyword").hits] == want
        assert [r.path for r in pg.changes(T0)] == [r.path for r in lite.changes(T0)]


def test_check_reports_postings_whose_doc_is_gone(tmp_path: Path) -> None:
    """No foreign key keeps the postings with their docs since m008: ``check`` does."""
    import psycopg

    dsn = pgserver.fresh_or_skip("purgekeysorphan")
    _history(dsn, tmp_path)
    with Vault.open(dsn, name="v", readonly=True) as vault:
        assert vault.check() == []
    with psycopg.connect(dsn) as con:
        con.execute(
            "INSERT INTO search_doc_terms (doc, terms, tfs, positions) "
            "SELECT max(id) + 1000, '{1}', '{1}', '\\x00' FROM search_docs"
        )
    with Vault.open(dsn, name="v", readonly=True) as vault:
        assert vault.check() == ["1 keyword postings belong to no indexed text: rebuild the search index"]

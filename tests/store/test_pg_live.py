"""The PostgreSQL live set (migration m006, ``pg/live.py``) never drifts, and searches through it answer as SQLite.

After every batch of a history with edits, renames, deletions, a text that comes back, and a second vault sharing
texts with the first, the kept tables (``search_live``, ``search_live_terms``, ``search_stats.max_doc``), and the
vectors a search "now" reads through the live set, equal a recomputation from ``search_rows`` and
``search_vectors``; so they do after a purge, a full reindex, a reembed and a copy, and m006 run on a database built
before it fills them the same way. Keyword, default and vector search at every batch time, now and between batches,
equal the SQLite engine's (chunks and order; scores within 1e-9, vectors bit for bit), with a filter as well.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.pg_live import STATES, _history, _same_searches

from vaultsync import Vault
from vaultsync.store.pg.dictionary import PAIRS

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")


LIVE_POSTINGS = (
    "SELECT t.term, d.doc, coalesce(u.tf, 1) FROM "
    "(SELECT * FROM search_doc_terms UNION ALL SELECT * FROM search_live_terms) d, "
    f"unnest(d.terms, d.tfs) AS u(id, tf), {PAIRS} t WHERE t.id = u.id "
    "AND d.doc IN (SELECT doc_id FROM search_rows WHERE died IS NULL) ORDER BY d.doc, t.term"
)
KEPT_POSTINGS = (
    "SELECT t.term, d.doc, coalesce(u.tf, 1) FROM search_live_terms d, unnest(d.terms, d.tfs) AS u(id, tf), "
    f"{PAIRS} t WHERE t.id = u.id ORDER BY d.doc, t.term"
)
EXPECTED = {
    "live": "SELECT r.vault_id, r.doc_id, count(*), min(d.length) FROM search_rows r JOIN search_docs d "
    "ON d.id = r.doc_id WHERE r.died IS NULL GROUP BY 1, 2 ORDER BY 1, 2",
    "postings": LIVE_POSTINGS,
    "docs": "SELECT id, 1 FROM search_docs ORDER BY 1",
    "vectors": "SELECT r.vault_id, v.doc_id, v.embedding, {halfvec} FROM (SELECT DISTINCT vault_id, doc_id FROM "
    "search_rows WHERE died IS NULL) r JOIN search_vectors v ON v.doc_id = r.doc_id ORDER BY 1, 2",
    "max_doc": "SELECT s.vault_id, s.batch_id, (SELECT max(doc_id) FROM search_rows r WHERE r.vault_id = s.vault_id "
    "AND r.born <= s.batch_id) FROM search_stats s ORDER BY 1, 2",
}
KEPT = {
    "live": "SELECT vault_id, doc_id, rows, length FROM search_live ORDER BY 1, 2",
    "postings": KEPT_POSTINGS,
    # each doc's postings row once, in the live docs' table or the other
    "docs": "SELECT doc, count(*) FROM (SELECT doc FROM search_doc_terms UNION ALL SELECT doc FROM search_live_terms) "
    "AS b GROUP BY doc ORDER BY 1",
    # what a vector search "now" reads (``vectors.live_docs``): the live docs' vectors, by their key
    "vectors": "SELECT l.vault_id, l.doc_id, v.embedding, {vec} FROM search_live l JOIN search_vectors v "
    "ON v.doc_id = l.doc_id ORDER BY 1, 2",
    "max_doc": "SELECT vault_id, batch_id, max_doc FROM search_stats ORDER BY 1, 2",
}


def _tables(dsn: str, queries: dict[str, str]) -> dict[str, list[tuple]]:
    import psycopg

    from vaultsync.store.pg.vectors import pgvector_schema

    with psycopg.connect(dsn) as con:
        schema = pgvector_schema(con)
        vec = "v.vec::text" if schema is not None else "NULL"
        halfvec = f'vec::"{schema}".halfvec::text' if schema is not None else "NULL"
        return {k: [tuple(r) for r in con.execute(q.format(vec=vec, halfvec=halfvec))] for k, q in queries.items()}


def assert_live_exact(dsn: str) -> dict[str, list[tuple]]:
    kept, expected = _tables(dsn, KEPT), _tables(dsn, EXPECTED)
    for key in KEPT:
        assert kept[key] == expected[key], key
    # and the bound holds: no row visible at a batch uses a doc above that batch's max_doc
    import psycopg

    with psycopg.connect(dsn) as con:
        assert (
            con.execute("""SELECT count(*) FROM search_rows r JOIN batches b ON b.vault_id = r.vault_id
                              AND r.born <= b.id AND (r.died IS NULL OR r.died > b.id)
                              WHERE r.doc_id > (SELECT max_doc FROM search_stats s WHERE s.vault_id = b.vault_id
                                                AND s.batch_id <= b.id ORDER BY s.batch_id DESC LIMIT 1)""").fetchone()[
                0
            ]
            == 0
        )
    return kept


def _shape(kept: dict[str, list[tuple]]) -> dict[str, list[tuple]]:
    """The live set without its doc ids (a reindex numbers the docs anew)."""
    return {
        "live": sorted((v, n, k) for v, _, n, k in kept["live"]),
        "postings": sorted((t, f) for t, _, f in kept["postings"]),
        # (the bytes without pgvector; with it ``vec`` alone holds the vector, m017)
        "vectors": sorted((v, None if e is None else bytes(e), x) for v, _, e, x in kept["vectors"]),
    }


def test_the_live_set_equals_a_recomputation_after_every_batch_and_searches_equal_sqlite(tmp_path: Path) -> None:
    dsn = pgserver.fresh_or_skip("live")
    checked: list[dict] = []
    times = _history(dsn, tmp_path, lambda db: checked.append(assert_live_exact(db)))
    assert len(checked) == len(STATES)
    assert all(checked[-1][k] for k in ("live", "postings", "vectors"))  # something to compare
    assert len({tuple(c["live"]) for c in checked}) == len(STATES)  # the set changed at every batch
    assert _history(tmp_path / "lite.db", tmp_path) == times
    assert _same_searches(tmp_path / "lite.db", dsn, times) > 300


def test_purge_reindex_reembed_and_copy_keep_the_live_set_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.embedders import FusedHash

    from vaultsync.embed import embedders
    from vaultsync.store.transfer import copy_databases

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-fused", FusedHash)
    dsn = pgserver.fresh_or_skip("livepurge")
    times = _history(dsn, tmp_path)
    _history(tmp_path / "lite.db", tmp_path)
    before = assert_live_exact(dsn)
    with Vault.open(dsn, root=tmp_path / "v", name="v") as vault:
        vault.purge(texts=["lighthouse"], also_current=True)
        purged = assert_live_exact(dsn)
        assert purged["postings"] != before["postings"]
        v_docs = {doc for vault_id, doc, _, _ in purged["live"] if vault_id == purged["live"][0][0]}  # "v" came first
        kept_docs = {doc for term, doc, _ in purged["postings"] if term == "lighthouse"}
        assert kept_docs and not kept_docs & v_docs  # only the other vault's shared text keeps the word
        vault.reindex(full=True)  # new doc ids: the same set otherwise
        assert _shape(assert_live_exact(dsn)) == _shape(purged)
        vault.reembed("hash-fused")
        embedded = assert_live_exact(dsn)
        assert embedded["vectors"] != purged["vectors"] and len(embedded["vectors"]) == len(purged["vectors"])
    with Vault.open(tmp_path / "lite.db", root=tmp_path / "v", name="v") as lite:
        lite.purge(texts=["lighthouse"], also_current=True)
        lite.reembed("hash-fused")
    assert _same_searches(tmp_path / "lite.db", dsn, times) > 300
    copied = pgserver.fresh_or_skip("livecopy")
    copy_databases(tmp_path / "lite.db", copied)
    assert assert_live_exact(copied)["postings"]
    assert _same_searches(tmp_path / "lite.db", copied, times) > 300


def test_m006_fills_the_live_set_of_a_database_built_before_it(tmp_path: Path) -> None:
    """A database indexed by m005's code (the m006 tables and column dropped, the version set back):
    ``upgrade`` (``vaultsync migrate``) runs m006, whose tables equal the ones kept batch by batch."""
    import psycopg

    from vaultsync.store.pg import upgrade

    dsn = pgserver.fresh_or_skip("livemigrate")
    times = _history(dsn, tmp_path)
    kept = assert_live_exact(dsn)
    with psycopg.connect(dsn) as con:
        con.execute("DROP TABLE search_live, search_doc_spans")  # m007's too
        con.execute("ALTER TABLE search_stats DROP COLUMN max_doc")
        con.execute("DELETE FROM vaultsync_schema WHERE version >= 6 AND name <> 'compact_index'")
    upgrade(dsn)  # `vaultsync migrate`: runs m006 (and those after it)
    with Vault.open(dsn, root=tmp_path / "v", name="v") as vault:
        assert vault.search("tide", mode="keyword").hits
    assert assert_live_exact(dsn) == kept
    _history(tmp_path / "lite.db", tmp_path)
    assert _same_searches(tmp_path / "lite.db", dsn, times) > 300

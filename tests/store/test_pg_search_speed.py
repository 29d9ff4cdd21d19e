"""What makes PostgreSQL keyword search cheap changes no answer (``pg/ranking.py``, migration m005).

- ``search_stats`` (each vault's visible chunk rows and tokens after every batch, kept by the indexer) equals
  a count over the visible rows at every batch, after a purge and a full reindex, and equals what m005
  computes from ``search_rows`` alone for an index built before it;
- the pruned ranking (one statement returns only the docs that can reach the best ``limit`` rows) gives the
  SQLite engine's rows, order and scores at every limit from 1, at every batch time, with a filter and with
  the validity overlay, where ties at the edge are the rule (the small history of tests/store/test_pg_parity.py);
- a term too long for the covering index is found through the ``left(term, 256)`` index, as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vaultsync import Vault

pgserver = pytest.importorskip("support.pgserver")
from support.pg_history import DAY, QUERIES, T0, _import_all  # noqa: E402

pytestmark = pytest.mark.pg


def _stats_rows(dsn: str) -> list[tuple[int, int, int, int]]:
    import psycopg

    with psycopg.connect(dsn) as con:
        return [
            tuple(r)
            for r in con.execute(
                "SELECT vault_id, batch_id, rows, tokens FROM search_stats ORDER BY vault_id, batch_id"
            )
        ]


def _check_counts(dsn: str) -> int:
    """Every batch's ``search_stats`` (its own row or the last before it) against a count of the visible rows."""
    import psycopg

    with psycopg.connect(dsn) as con:
        batches = con.execute("SELECT vault_id, id FROM batches ORDER BY id").fetchall()
        for vault_id, batch in batches:
            counted = con.execute(
                """SELECT count(*), coalesce(sum(d.length), 0) FROM search_rows r JOIN search_docs d ON d.id = r.doc_id
                   WHERE r.vault_id = %s AND r.born <= %s AND (r.died IS NULL OR r.died > %s)""",
                (vault_id, batch, batch),
            ).fetchone()
            kept = con.execute(
                "SELECT rows, tokens FROM search_stats WHERE vault_id = %s AND batch_id <= %s "
                "ORDER BY batch_id DESC LIMIT 1",
                (vault_id, batch),
            ).fetchone() or (0, 0)
            assert tuple(kept) == tuple(counted), (vault_id, batch)
        return len(batches)


def test_search_stats_equal_a_count_at_every_batch_and_what_the_migration_computes(tmp_path: Path) -> None:
    import psycopg

    from vaultsync.store.pg.schema import STATS_FROM_ROWS

    dsn = pgserver.fresh_or_skip("stats")
    _import_all(dsn, tmp_path / "vault")
    assert _check_counts(dsn) == 3
    kept = _stats_rows(dsn)
    assert kept and kept[-1][2] > 0
    with psycopg.connect(dsn) as con:  # an index built before m005: the migration's own fill
        con.execute("DELETE FROM search_stats")
        con.execute(STATS_FROM_ROWS)
    assert _stats_rows(dsn) == kept
    with Vault.open(dsn, root=tmp_path / "vault", name="v") as vault:
        vault.purge(texts=["lighthouse"], also_current=True)
        assert _check_counts(dsn) >= 3
        vault.reindex(full=True)
    assert _check_counts(dsn) >= 3
    assert _stats_rows(dsn) != []


def _ranked(vault: Vault, query: str, mode: str, at: int | None, limit: int, **options: Any) -> list[tuple]:
    found = vault.search(query, mode=mode, as_of=at, limit=limit, **options)
    return [(h["path"], h["chunk_id"], h["score"]) for h in found.hits]


def test_pruned_ranking_equals_sqlite_at_every_limit(tmp_path: Path) -> None:
    dsn = pgserver.fresh_or_skip("pruned")
    times = _import_all(tmp_path / "lite.db", tmp_path / "vault")
    assert _import_all(dsn, tmp_path / "vault") == times
    compared = 0
    with (
        Vault.open(tmp_path / "lite.db", name="v", readonly=True) as lite,
        Vault.open(dsn, name="v", readonly=True) as pg,
    ):
        for at in (None, *times, T0 + DAY // 2):
            for query in (*QUERIES, "the tide", "the keeper logs the tide"):
                for limit in (1, 2, 3, 5):
                    for mode in ("keyword", "hybrid"):
                        for options in ({}, {"prefix": "Plans/"}, {"valid_at": T0 + DAY - DAY // 6}):
                            want = _ranked(lite, query, mode, at, limit, **options)
                            got = _ranked(pg, query, mode, at, limit, **options)
                            assert [g[:2] for g in got] == [w[:2] for w in want], (query, mode, at, limit, options)
                            assert all(abs(g[2] - w[2]) <= 1e-9 for g, w in zip(got, want))
                            compared += bool(want)
    assert compared > 500


def test_a_term_longer_than_the_covering_index_is_still_found(tmp_path: Path) -> None:
    from vaultsync.store.pg.ranking import SHORT_BYTES

    long_word = "x" * (SHORT_BYTES + 10)
    root = tmp_path / "vault"
    root.mkdir()
    (root / "Long.md").write_text(f"# Long\n\n{long_word} and the tide\n", encoding="utf-8")
    (root / "Short.md").write_text("# Short\n\nthe tide\n", encoding="utf-8")
    answers = []
    for db in (tmp_path / "lite.db", pgserver.fresh_or_skip("long")):
        with Vault.open(db, root=root, name="v") as vault:
            vault.sync(known_at=T0)
            answers.append([_ranked(vault, q, "keyword", None, 5) for q in (long_word, long_word[:300] + "*", "tide")])
    assert answers[0][0] and answers[0][0][0][0] == "Long.md"
    for got, want in zip(answers[1], answers[0]):
        assert [g[:2] for g in got] == [w[:2] for w in want]
        assert all(abs(g[2] - w[2]) <= 1e-9 for g, w in zip(got, want))


@pytest.mark.parametrize("latest", [True, False])
@pytest.mark.parametrize("docs", ["DOCS_PARAM", "SELECT doc AS value FROM cand"])
def test_rows_by_doc_are_looked_up_by_index_on_postgresql(latest: bool, docs: str) -> None:
    """``pg.compat.PARTS`` rewrites the exact text ``search.snapshot.rows_source`` gives for rows by doc (the
    planner would hash every chunk row ever written against the joined list): a change to that text must
    change the rewrite too, or PostgreSQL quietly loses its index lookup."""
    from vaultsync.store.pg.compat import translate
    from vaultsync.store.search import snapshot

    snap = snapshot.Snapshot(vault_id=1, batch=5, latest=latest, as_of=None if latest else 1, valid_at=1)
    sql, _ = snapshot.rows_source(snap, None, docs=getattr(snapshot, docs, docs))
    translated, _ = translate(sql)
    assert "= ANY(ARRAY(" in translated and "JOIN search_rows" not in translated, (sql, translated)

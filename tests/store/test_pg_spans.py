"""Each doc's spans of visibility on PostgreSQL (migration m007, ``pg/spans.py``) never drift, and vector search
at a past cutoff through them answers as SQLite.

After every batch of a history with edits, renames, deletions, a text that goes and comes back, and a second
vault sharing texts with the first, ``search_doc_spans`` equals the row lifetimes of ``search_rows`` merged per
doc and vault by a computation in Python here (no copy of any vector: search reads them from ``search_vectors``),
and the docs it shows at every batch are exactly the docs of the rows visible then; so after a
purge, a full reindex, a reembed and a copy; m007 run on a database built before it fills the same table, as
``spans.FROM_ROWS`` does. The check itself fails on a table kept without closing spans, or with one span moved.
The live set's transitions (enter and leave in one batch, leave and come back in one batch or later, another
vault) are checked one by one, and ``spans.by_index`` turns whole-table scans off for its statements only.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from vaultsync import Vault
from vaultsync.embed.embedders import HashEmbedder

pgserver = pytest.importorskip("support.pgserver")
from support.pg_live import STATES, _same_searches  # noqa: E402
from support.pg_live import _history as _live_history  # noqa: E402

from vaultsync.store.pg import spans  # noqa: E402
from vaultsync.store.search.schema import OPEN  # noqa: E402

pytestmark = pytest.mark.pg

AWAY = {**STATES[-1], "Home.md": "# Home\n\nThe keeper is away.\n\n## More\n\nMorning watch.\n"}
HISTORY = [*STATES, AWAY, STATES[-1]]
"""The live set's history, then the first section of ``Home.md`` edited away and back: a text whose rows all
died comes back (two spans of one doc)."""


def _history(db: Any, tmp_path: Path, check: Any = None) -> list[int]:
    return _live_history(db, tmp_path, check, HISTORY)


def _merged(rows: list[tuple[int, int, int, int | None]]) -> list[tuple[int, int, int, int]]:
    """(vault, doc, born, died) of every stretch of batches in which a row of the vault used the doc."""
    lives: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for vault, doc, born, died in rows:
        if died is None or died > born:  # a row born and dead in one batch was never visible
            lives[(vault, doc)].append((born, OPEN if died is None else died))
    out = []
    for (vault, doc), spans_ in lives.items():
        spans_.sort()
        start, end = spans_[0]
        for born, died in spans_[1:]:
            if born > end:
                out.append((vault, doc, start, end))
                start, end = born, died
            else:
                end = max(end, died)
        out.append((vault, doc, start, end))
    return sorted(out)


def assert_spans_exact(dsn: str) -> list[tuple]:
    """The kept spans against the merged row lifetimes, and the docs visible at every batch."""
    import psycopg

    with psycopg.connect(dsn) as con:
        kept = [tuple(r) for r in con.execute("SELECT * FROM search_doc_spans ORDER BY 1, 2, 3")]
        rows = con.execute("SELECT vault_id, doc_id, born, died FROM search_rows").fetchall()
        assert kept == _merged(rows)
        for vault, batch in con.execute("SELECT vault_id, id FROM batches ORDER BY id").fetchall():
            shown = con.execute(
                "SELECT doc_id FROM search_doc_spans WHERE vault_id = %s AND born <= %s AND died > %s ORDER BY doc_id",
                (vault, batch, batch),
            ).fetchall()
            visible = con.execute(
                "SELECT DISTINCT doc_id FROM search_rows WHERE vault_id = %s AND born <= %s AND "
                "(died IS NULL OR died > %s) ORDER BY doc_id",
                (vault, batch, batch),
            ).fetchall()
            assert shown == visible, (vault, batch)
        assert sorted(tuple(r) for r in con.execute(spans.FROM_ROWS)) == [s[:4] for s in kept]  # m007's fill
    return kept


@pytest.mark.parametrize("vectors", ["pgvector", "python"])
def test_the_spans_equal_the_merged_row_lifetimes_after_every_batch(
    tmp_path: Path, vectors: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vaultsync.store.pg.vectors import ENV

    if vectors == "python":
        monkeypatch.setenv(ENV, "python")  # the fallback's schema: no vec column
    dsn = pgserver.fresh_or_skip(f"spans{vectors}")
    checked: list[list[tuple]] = []
    times = _history(dsn, tmp_path, lambda db: checked.append(assert_spans_exact(db)))
    last = checked[-1]
    assert len({tuple(c) for c in checked}) == len(checked)  # every batch changed them
    assert any(died != OPEN for _, _, _, died in last)  # closed spans,
    by_doc = defaultdict(int)
    for vault, doc, *_ in last:
        by_doc[(vault, doc)] += 1
    assert max(by_doc.values()) >= 2  # and a text that went and came back has two
    assert len({vault for vault, *_ in last}) == 2
    assert _history(tmp_path / "lite.db", tmp_path) == times
    assert _same_searches(tmp_path / "lite.db", dsn, times) > 300


class PairHash(HashEmbedder):
    """The hashed embedder with word pairs weighed as words: other vectors (a reembed rewrites every span's)."""

    embedder_id = "hash-pairs"
    pair_weight = 1.0


def test_purge_reindex_reembed_and_copy_keep_the_spans_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vaultsync.embed import embedders
    from vaultsync.store.transfer import copy_databases

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-pairs", PairHash)
    dsn = pgserver.fresh_or_skip("spanspurge")
    times = _history(dsn, tmp_path)
    _history(tmp_path / "lite.db", tmp_path)
    before = assert_spans_exact(dsn)
    with Vault.open(dsn, root=tmp_path / "v", name="v") as vault:
        vault.purge(texts=["lighthouse"], also_current=True)
        purged = assert_spans_exact(dsn)
        assert purged != before
        vault.reindex(full=True)
        reindexed = assert_spans_exact(dsn)
        assert len(reindexed) == len(purged)
        vault.reembed("hash-pairs")
        embedded = assert_spans_exact(dsn)
        assert embedded == reindexed  # (the new vectors are in ``search_vectors`` alone)
    with Vault.open(tmp_path / "lite.db", root=tmp_path / "v", name="v") as lite:
        lite.purge(texts=["lighthouse"], also_current=True)
        lite.reembed("hash-pairs")
    assert _same_searches(tmp_path / "lite.db", dsn, times) > 300
    copied = pgserver.fresh_or_skip("spanscopy")
    copy_databases(tmp_path / "lite.db", copied)
    assert len(assert_spans_exact(copied)) == len(embedded)
    assert _same_searches(tmp_path / "lite.db", copied, times) > 300


def test_m007_fills_the_spans_of_a_database_built_before_it(tmp_path: Path) -> None:
    """A database indexed by m006's code (the table dropped, the version set back): ``upgrade`` (``vaultsync migrate``)
    runs m007, whose table equals the one kept batch by batch."""
    import psycopg

    from vaultsync.store.pg import upgrade

    dsn = pgserver.fresh_or_skip("spansmigrate")
    times = _history(dsn, tmp_path)
    kept = assert_spans_exact(dsn)
    with psycopg.connect(dsn) as con:
        con.execute("DROP TABLE search_doc_spans")
        con.execute("DELETE FROM vaultsync_schema WHERE version >= 7 AND name <> 'compact_index'")
    with pytest.raises(Exception, match="older vaultsync"):
        Vault.open(dsn, name="v", readonly=True)
    upgrade(dsn)  # `vaultsync migrate`: runs m007 (and those after it)
    with Vault.open(dsn, root=tmp_path / "v", name="v") as vault:
        assert vault.search("tide", mode="vector", as_of=times[1]).hits
    assert assert_spans_exact(dsn) == kept
    _history(tmp_path / "lite.db", tmp_path)
    assert _same_searches(tmp_path / "lite.db", dsn, times) > 300


def test_the_check_fails_on_spans_kept_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the tests above rely on can fail: spans never closed (the leaving docs' statement without its part
    for them), and one span of a correct table moved by a batch."""
    import psycopg

    with monkeypatch.context() as patched:
        patched.setattr(spans, "LEAVE", "")
        broken = pgserver.fresh_or_skip("spansbroken")
        _history(broken, tmp_path / "broken")
    with pytest.raises(AssertionError):
        assert_spans_exact(broken)
    dsn = pgserver.fresh_or_skip("spansmoved")
    _history(dsn, tmp_path / "moved")
    assert_spans_exact(dsn)
    with psycopg.connect(dsn) as con:
        con.execute(
            "UPDATE search_doc_spans SET born = born + 1 WHERE (vault_id, doc_id, born) = "
            "(SELECT vault_id, doc_id, born FROM search_doc_spans WHERE died <> %s ORDER BY 1, 2, 3 LIMIT 1)",
            (OPEN,),
        )
    with pytest.raises(AssertionError):
        assert_spans_exact(dsn)


def test_a_doc_entering_and_leaving_opens_closes_reopens_or_drops_its_span(tmp_path: Path) -> None:
    """The live set's transitions, one by one on a migrated database (the writer makes the rest): a doc that enters
    and leaves within one batch leaves no span, one that leaves and comes back in one batch keeps its span open,
    one that comes back later gets a second span, and rows added to or taken from a live doc change nothing."""
    import psycopg

    from vaultsync.store.pg import live
    from vaultsync.store.pg.compat import Con

    dsn = pgserver.fresh_or_skip("spansunit")
    Vault.open(dsn, root=tmp_path, name="v").close()  # the schema
    length = {7: 2, 8: 2}
    with psycopg.connect(dsn) as raw:
        con = Con(raw)

        def spans_of(doc: int) -> list[tuple[int, int]]:
            return [
                tuple(r)
                for r in raw.execute(
                    "SELECT born, died FROM search_doc_spans WHERE vault_id = 1 AND doc_id = %s ORDER BY born", (doc,)
                )
            ]

        live.add(con, 1, 5, [7], length)
        live.remove(con, 1, 5, [7])
        assert spans_of(7) == []
        live.add(con, 1, 6, [7, 7], length)  # two rows
        live.remove(con, 1, 8, [7])
        live.add(con, 1, 9, [7], length)
        assert spans_of(7) == [(6, OPEN)]
        live.remove(con, 1, 10, [7, 7])
        assert spans_of(7) == [(6, 10)]
        live.add(con, 1, 10, [7], length)  # back in the batch it left
        assert spans_of(7) == [(6, OPEN)]
        live.remove(con, 1, 11, [7])
        live.add(con, 1, 12, [7, 8], length)
        assert spans_of(7) == [(6, 11), (12, OPEN)] and spans_of(8) == [(12, OPEN)]
        live.add(con, 2, 13, [7], length)  # another vault's span of the same doc
        assert spans_of(7) == [(6, 11), (12, OPEN)]
        assert raw.execute("SELECT born, died FROM search_doc_spans WHERE vault_id = 2").fetchall() == [(13, OPEN)]
        raw.rollback()


def test_the_spans_are_read_by_index_and_the_setting_is_given_back(tmp_path: Path) -> None:
    """``spans.by_index`` turns whole-table scans off for its statements only: the setting the transaction had
    is back afterwards (also after an error), and a past cutoff's vector statement then reads the index."""
    import psycopg

    dsn = pgserver.fresh_or_skip("spansindex")
    times = _history(dsn, tmp_path)
    with psycopg.connect(dsn) as raw:
        for before in ("on", "off"):
            raw.execute("SELECT set_config('enable_seqscan', %s, false)", (before,))
            with spans.by_index(raw):
                assert raw.execute("SHOW enable_seqscan").fetchone()[0] == "off"
                plan = "\n".join(
                    r[0]
                    for r in raw.execute(
                        "EXPLAIN SELECT doc_id FROM search_doc_spans s WHERE s.vault_id = 1 AND s.born <= %s "
                        "AND s.died > %s",
                        (3, 3),
                    )
                )
            assert "search_doc_spans_at" in plan and "Seq Scan" not in plan
            assert raw.execute("SHOW enable_seqscan").fetchone()[0] == before
            with pytest.raises(ZeroDivisionError), spans.by_index(raw):
                1 / 0  # noqa: B018 - the exception leaves the block
            assert raw.execute("SHOW enable_seqscan").fetchone()[0] == before
    with Vault.open(dsn, name="v", readonly=True) as vault:  # a past vector search goes through it
        assert vault.search("tide", mode="vector", as_of=times[1]).hits


@pytest.mark.parametrize("moment", ["now", "past"])
def test_vector_search_reads_each_visible_docs_vector_by_its_key(tmp_path: Path, moment: str) -> None:
    """The statements of a vector search now (the live set) and at a past cutoff (the spans) read the visible docs
    from the vault's own table and their vectors from ``search_vectors`` by its key: no join at all, never a scan,
    hash or merge of every vector of the history (what a plain join was planned as)."""
    import types

    import psycopg

    from vaultsync.store.pg.compat import translate
    from vaultsync.store.pg.vectors import _distance, live_docs, pgvector_schema

    dsn = pgserver.fresh_or_skip(f"spanskey{moment}")
    _history(dsn, tmp_path)
    with psycopg.connect(dsn) as raw:
        raw.execute("ANALYZE")
        schema = pgvector_schema(raw)
        assert schema is not None
        vault, batch = raw.execute("SELECT vault_id, id FROM batches ORDER BY id LIMIT 1 OFFSET 1").fetchone()
        (dims,) = raw.execute(f'SELECT "{schema}".vector_dims(vec) FROM search_vectors LIMIT 1').fetchone()
        snap = types.SimpleNamespace(vault_id=vault, batch=batch)
        distance = _distance(schema, f'v.vec::"{schema}".halfvec', "halfvec")
        sql, params = live_docs(snap, distance) if moment == "now" else spans.visible(snap, distance)
        text, _ = translate(f"{sql} ORDER BY d LIMIT :n")
        with spans.by_index(raw):
            plan = [r[0] for r in raw.execute(f"EXPLAIN {text}", {**params, "q": [1] * dims, "n": 5})]
    assert not [line for line in plan if "Join" in line or "Nested Loop" in line], plan
    docs = "search_live" if moment == "now" else "search_doc_spans"
    scans = [line.split(" on ")[-1].split()[0] for line in plan if " on " in line and "Scan" in line]
    assert scans[0] == docs and set(scans[1:]) <= {"search_vectors", "search_vectors_pkey"}, plan
    assert any("search_vectors_pkey" in line for line in plan) and any("doc_id = ANY" in line for line in plan), plan
    assert not any("Seq Scan on search_vectors" in line for line in plan), plan
    assert any("search_vectors_pkey" in line for line in plan), plan

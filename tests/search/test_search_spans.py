"""The past search's two shortcuts keep it exact.

``search_spans`` (rows per doc and lifetime, kept by triggers on ``search_rows``) always equals a recount of
``search_rows``: after indexing a history, after each kind of purge (the index repaired, not rebuilt), after a
rebuild, and after the migration that adds it to a database from before it (which, read-only, still answers
the same).

The MaxScore pruning (docs holding only phrases that cannot lift them into the best ``limit`` rows are never
scored) gives exactly the rows, order and scores of a fresh FTS5 index at every cutoff and every limit, on a
vault built so that short notes holding only a common word outrank long ones holding a rare one: a bound
that let one of them go would drop a row the fresh index ranks in its top ``limit``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import apsw
import pytest
from support.help_corpus import copy_db
from support.purge_repair import TIMES, _rebuilt, _rows, two_vaults  # noqa: F401 (a fixture)
from support.search_truth import FreshKeyword, fresh_default, same_ranking, split_export

from vaultsync.embed.tokenizer import parse_query
from vaultsync.store.search import cutoff
from vaultsync.store.search.schema import OPEN
from vaultsync.vault import Vault

RECOUNT = f"""SELECT doc_id, vault_id, born, coalesce(died, {OPEN}), count(*) FROM search_rows
              GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"""
SPANS = "SELECT doc_id, vault_id, born, died, rows FROM search_spans ORDER BY 1, 2, 3, 4"


def _spans_match(db: Path) -> None:
    spans = _rows(db, SPANS)
    assert spans and spans == _rows(db, RECOUNT)


@pytest.mark.parametrize("kind", ["text", "note", "before"])
def test_spans_equal_a_recount_after_index_purge_and_rebuild(two_vaults, tmp_path: Path, kind: str) -> None:  # noqa: F811
    db, alpha, _ = two_vaults
    _spans_match(db)
    assert any(died != OPEN for _, _, _, died, _ in _rows(db, SPANS))  # ended rows too
    with Vault.open(db, root=alpha) as vault:
        args = {
            "text": {"texts": ["harlequin-gazebo-7731"]},
            "note": {"note": "n2.md"},
            "before": {"before": TIMES[3]},
        }[kind]
        vault.purge(**args, also_current=True)
    _spans_match(db)
    _spans_match(_rebuilt(db, tmp_path / "rebuilt.db"))


def test_migration_adds_spans_and_an_older_database_reads_the_same(two_vaults, tmp_path: Path) -> None:  # noqa: F811
    db, alpha, _ = two_vaults
    older = copy_db(db, tmp_path / "older.db")
    con = apsw.Connection(str(older))
    with con:  # the database as vaultsync wrote it before m008_search_spans
        con.execute("DROP TABLE search_spans")
        for name in ("search_spans_in", "search_spans_out", "search_spans_moved"):
            con.execute(f"DROP TRIGGER {name}")
        con.execute("PRAGMA user_version = 7")
        con.execute("DELETE FROM vaultsync_migrations WHERE name = 'search_spans'")
    con.close()
    queries = ["garden notes", "lantern gate", "harlequin"]
    with Vault.open(older, name="alpha", readonly=True) as vault:  # read as it is: the counts come from search_rows
        before = {
            (q, t): vault.search(q, as_of=t, mode="keyword", limit=50).to_json()["hits"] for q in queries for t in TIMES
        }
    with Vault.open(older, root=alpha) as vault:  # migrated
        after = {
            (q, t): vault.search(q, as_of=t, mode="keyword", limit=50).to_json()["hits"] for q in queries for t in TIMES
        }
    assert _rows(older, "PRAGMA user_version")[0][0] >= 8
    _spans_match(older)
    assert before == after and any(before.values())


def _note(i: int) -> str:
    """Short notes full of a fairly common word (alpha), long ones holding a rare word (zeta) once, and notes
    holding a word most notes hold (gamma): a doc holding only alpha outranks one holding only zeta."""
    if i % 6 == 0:
        return f"# Short {i}\n\nalpha alpha {'alpha ' * (i % 4)}beta\n"
    if i % 12 == 1:
        filler = " ".join(f"word{j}" for j in range(40 + i))
        return f"# Long {i}\n\n{filler} zeta {filler} gamma\n"
    return f"# Note {i}\n\nsome text {i} with {'gamma ' * (1 + i % 3)}and more\n"


def test_pruning_keeps_every_row_a_fresh_index_ranks_in_its_top_limit(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    times = []
    with Vault.open(tmp_path / "db.sqlite", root=root) as vault:
        for step in range(3):
            for i in range(step * 20, step * 20 + 30):  # overlapping ranges: later steps rewrite some notes
                (root / f"n{i:03d}.md").write_text(_note(i + step * (i % 2)), encoding="utf-8")
            when = dt.datetime(2024, 2, 1 + step, tzinfo=dt.UTC).isoformat()
            vault.sync(known_at=when)
            times.append(when)
        scored: list[int] = []
        score = cutoff.Scorer.score

        def counting(self):  # how many docs the cutoff scores, to see it prune
            score(self)
            scored.append(self.con.execute("SELECT count(*) FROM temp.kw_docs").fetchone()[0])

        monkeypatch.setattr(cutoff.Scorer, "score", counting)
        pruned = 0
        for as_of in times[:-1]:  # past cutoffs
            header, chunks = split_export(vault.export(as_of=as_of))
            fresh = FreshKeyword(header, chunks)
            for query in ["alpha zeta", "zeta alpha gamma", "beta alpha", "gamma zeta", "alpha", "gamma alpha"]:
                holding = len(fresh.search(parse_query(query).expression))
                for limit in (1, 2, 3, 5, 8, 13, 40):
                    scored.clear()
                    got = vault.search(query, as_of=as_of, mode="keyword", limit=limit).to_json()["hits"]
                    same_ranking(
                        [(h["path"], h["chunk_id"], h["score"]) for h in got],
                        fresh.search(parse_query(query).expression, limit),
                    )
                    pruned += bool(scored) and scored[-1] < holding
            fresh.close()
    assert pruned  # the bound did skip docs somewhere, and every answer was still exact


def test_now_ranks_copies_by_doc_as_a_fresh_index(tmp_path: Path, monkeypatch) -> None:
    """Now, a vault of copies (its rows many times its docs) is ranked per doc, as at a cutoff, and still
    equals a fresh index, keyword and default modes, whole query included."""
    root = tmp_path / "vault"
    for copy in range(4):
        for i in range(40):
            (root / f"copy{copy}" / f"n{i:03d}.md").parent.mkdir(parents=True, exist_ok=True)
            (root / f"copy{copy}" / f"n{i:03d}.md").write_text(_note(i), encoding="utf-8")
    calls: list[int] = []
    score = cutoff.Scorer.score
    monkeypatch.setattr(cutoff.Scorer, "score", lambda self: (calls.append(1), score(self))[1])
    with Vault.open(tmp_path / "db.sqlite", root=root) as vault:
        vault.sync(known_at="2024-03-01")
        header, chunks = split_export(vault.export())
        fresh = FreshKeyword(header, chunks)
        for query in ["alpha zeta", "gamma alpha", "alpha alpha beta", "zeta"]:
            for limit in (1, 4, 9, 30):
                calls.clear()
                got = vault.search(query, mode="keyword", limit=limit).to_json()["hits"]
                assert calls  # ranked per doc, not by the live table
                same_ranking(
                    [(h["path"], h["chunk_id"], h["score"]) for h in got],
                    fresh.search(parse_query(query).expression, limit),
                )
            got = vault.search(query, limit=30).to_json()["hits"]
            want = fresh_default(header, chunks, query, 30)
            same_ranking([(h["path"], h["chunk_id"], h["score"]) for h in got], want)
        fresh.close()

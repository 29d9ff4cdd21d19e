"""Phrases held by many docs, at a cutoff: their docs walked best first (``cutoff.Scorer.best_first``) until no doc
left can reach the best ``limit`` rows. The bound that stops the walk holds for every count and length; the ranking
equals a fresh index over exactly the visible chunks, at past cutoffs, now over copies, and under the validity
overlay. The real history's common words: ``test_search_history.py``."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pytest
from support.search_truth import FreshKeyword, fresh_default, same_ranking, split_export

from vaultsync.embed.tokenizer import parse_query
from vaultsync.store.search import cutoff
from vaultsync.store.search.cutoff import K1, B, tail_bound
from vaultsync.vault import Vault


def term(tf: int, length: int, avgdl: float) -> float:
    """One phrase's bm25 term without its idf (as fts5Bm25Function)."""
    return (tf * (K1 + 1.0)) / (tf + K1 * (1 - B + B * length / avgdl))


def test_tail_bound_holds_for_every_count_and_length() -> None:
    """No doc whose term at the docs' average length is at most g has a larger term at the cutoff's than the bound;
    and the bound is tight where the two average lengths are equal (it is g itself)."""
    rng = random.Random(31)
    for _ in range(20_000):
        davgdl, avgdl = rng.uniform(1.0, 400.0), rng.uniform(1.0, 400.0)
        length = rng.choice([rng.randint(1, 5), rng.randint(1, 60), rng.randint(1, 3000)])
        tf = rng.randint(1, length)
        g = term(tf, length, davgdl)
        assert term(tf, length, avgdl) <= tail_bound(g, davgdl, avgdl) * (1 + 1e-12), (tf, length, davgdl, avgdl)
        # a doc of another count and length below g at the docs' average: below the bound at the cutoff's too
        other_length = rng.randint(1, 3000)
        other_tf = rng.randint(1, other_length)
        if term(other_tf, other_length, davgdl) <= g:
            assert term(other_tf, other_length, avgdl) <= tail_bound(g, davgdl, avgdl) * (1 + 1e-12)
        assert tail_bound(g, davgdl, davgdl) == pytest.approx(g, rel=1e-12)
    assert tail_bound(0.0, 10.0, 20.0) == 0.0


def _note(i: int, step: int) -> str:
    """Every note holds "common": a third of them short with it once or twice, the others long with it up to twenty
    times (the short ones rank first at a small average length, the long ones at a large one); some hold "rare"."""
    rng = random.Random(i * 7 + step)
    if i % 3 == 0:
        words = [f"w{j}" for j in range(rng.randint(0, 3))] + ["common"] * rng.randint(1, 2)
    else:
        words = [f"w{j}" for j in range(rng.randint(40, 250))] + ["common"] * rng.randint(1, 20)
    rng.shuffle(words)
    extra = " rare" if i % 9 == 0 else ""
    return f"{' '.join(words)}{extra}\n"


@pytest.fixture()
def walked(monkeypatch) -> list[tuple[bool, int, int]]:
    """Every walk's outcome (True: no doc left could reach the best rows), the docs scored when it ended and the
    docs it read for each phrase; walks of up to three phrases, of few docs, whatever share of the docs they are."""
    outcomes: list[tuple[bool, int, int]] = []
    walk = cutoff.Scorer.best_first

    def recording(self, phrases, max_doc, limit, first):
        early = walk(self, phrases, max_doc, limit, first)
        scored = self.con.execute("SELECT count(*) FROM temp.kw_docs").fetchone()[0]
        outcomes.append((early, scored, first))
        return early

    monkeypatch.setattr(cutoff.Scorer, "best_first", recording)
    monkeypatch.setattr(cutoff, "SHARE", 0)
    monkeypatch.setattr(cutoff, "WALKED", 3)
    monkeypatch.setattr(cutoff, "FIRST", 8)
    return outcomes


QUERIES = ["common", "rare", "comm*", "w1", '"common w1"', "common w1", "w2 common w1", "common rare"]


def test_best_first_equals_a_fresh_index_at_past_cutoffs(tmp_path: Path, walked: list[tuple[bool, int, int]]) -> None:
    """Batches that move the cutoff's average length far from that of all the distinct docs, both ways (notes
    holding the word, then many tiny notes without it, then rewrites and deletions): every past cutoff and every
    limit ranks as a fresh index, and some walks stop before scoring every doc."""
    root = tmp_path / "vault"
    root.mkdir()
    times = []
    with Vault.open(tmp_path / "db.sqlite", root=root) as vault:
        for step in range(3):
            if step == 0:
                for i in range(80):
                    (root / f"n{i:03d}.md").write_text(_note(i, step), encoding="utf-8")
            elif step == 1:
                for i in range(400):  # many docs without the word, far shorter than the cutoff's average
                    (root / f"t{i:03d}.md").write_text(f"tiny{i}\n", encoding="utf-8")
            else:
                for i in range(0, 40):
                    (root / f"n{i:03d}.md").write_text(_note(i, step), encoding="utf-8")
                for i in range(40, 50):
                    (root / f"n{i:03d}.md").unlink()
            when = dt.datetime(2024, 2, 1 + step, tzinfo=dt.UTC).isoformat()
            vault.sync(known_at=when)
            times.append(when)
        holding = vault.search("common", mode="keyword", limit=1000).hits
        for as_of in times:
            header, chunks = split_export(vault.export(as_of=as_of))
            fresh = FreshKeyword(header, chunks)
            for query in QUERIES:
                for limit in (1, 3, 10, 40, 500):
                    got = vault.search(query, as_of=as_of, mode="keyword", limit=limit).hits
                    same_ranking(
                        [(h["path"], h["chunk_id"], h["score"]) for h in got],
                        fresh.search(parse_query(query).expression, limit),
                    )
                got = vault.search(query, as_of=as_of, limit=30).hits  # default mode: the whole query's docs too
                same_ranking(
                    [(h["path"], h["chunk_id"], h["score"]) for h in got],
                    fresh_default(header, chunks, query, 30, index=fresh),
                )
            fresh.close()
    assert any(early and scored < len(holding) for early, scored, _ in walked)  # stopped early
    assert any(not early for early, _, _ in walked)  # the rest scored as without the walk


def test_best_first_equals_a_fresh_index_now_over_copies_and_valid_time(
    tmp_path: Path, walked: list[tuple[bool, int, int]]
) -> None:
    """Now over copies (the per-doc ranking replaces the live table's) and at a validity time that swaps a
    revision for an earlier one (the overlay changes the docs' visible rows): as a fresh index."""
    root = tmp_path / "vault"
    for copy in range(3):
        for i in range(50):
            path = root / f"copy{copy}" / f"n{i:03d}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_note(i, 0), encoding="utf-8")
    policy = root / "policy.md"
    policy.write_text("---\nvalid_from: 2024-01-01\n---\n# Policy\n\ncommon common common rule\n", encoding="utf-8")
    with Vault.open(tmp_path / "db.sqlite", root=root) as vault:
        vault.sync(known_at="2024-03-01")
        policy.write_text(
            "---\nvalid_from: 2025-01-01\n---\n# Policy\n\ncommon later rule with many more words in it\n",
            encoding="utf-8",
        )
        vault.sync(known_at="2024-03-02")
        for valid_at in (None, "2024-06-01"):
            header, chunks = split_export(vault.export(valid_at=valid_at))
            assert any(c["path"] == "policy.md" for c in chunks)
            fresh = FreshKeyword(header, chunks)
            for query in QUERIES:
                for limit in (1, 5, 30, 400):
                    walked.clear()
                    got = vault.search(query, valid_at=valid_at, mode="keyword", limit=limit).hits
                    same_ranking(
                        [(h["path"], h["chunk_id"], h["score"]) for h in got],
                        fresh.search(parse_query(query).expression, limit),
                    )
                    assert walked or not got  # every query was walked
            fresh.close()

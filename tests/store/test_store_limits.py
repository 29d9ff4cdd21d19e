"""Every query within the argument limits works at every cutoff, exactly; limits reach the store."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from support.search_truth import fresh_keyword, same_ranking, split_export

from vaultsync import Vault
from vaultsync.embed.tokenizer import parse_query

WORDS = [f"w{i:03d}" for i in range(600)]


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("limits")
    root = base / "vault"
    root.mkdir()
    rng = random.Random(9)
    with Vault.open(base / "db" / "v.db", root=root) as v:
        for day in range(1, 4):
            for n in range(12):
                words = " ".join(rng.choice(WORDS) for _ in range(60))
                (root / f"Note {n:02d}.md").write_text(f"# Note {n} day {day}\n\n{words}\n", encoding="utf-8")
            v.sync(known_at=f"2024-01-0{day}")
        yield v


@pytest.mark.parametrize("words", [63, 64, 200, 500])
@pytest.mark.parametrize("as_of", ["2024-01-01", "2024-01-02", None])
def test_long_queries_work_and_stay_exact_at_every_cutoff(vault: Vault, words: int, as_of: str | None) -> None:
    """63 words at a past cutoff used to need 64+ tables in one join; 500 one-letter words is the most
    the 1,000-character search argument allows."""
    query = " ".join(WORDS[:words])
    header, chunks = split_export(vault.export(as_of=as_of))
    want = fresh_keyword(header, chunks, parse_query(query).expression)
    got = vault.search(query, as_of=as_of, mode="keyword", limit=1000).to_json()
    same_ranking([(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in got["hits"]], want)
    assert want, "the query matches something"


def test_the_widest_query_the_tool_allows_works_at_a_past_cutoff(vault: Vault) -> None:
    query = " ".join("abcdefghijklmnopqrstuvwxyz"[i % 26] for i in range(500))[:1000]
    assert vault.search(query, as_of="2024-01-02", mode="hybrid", limit=5).hits is not None


def test_list_changes_limit_is_pushed_into_the_store(vault: Vault) -> None:
    everything = vault.changes("2024-01-01")
    first, counts, more = vault.changes_page("2024-01-01", limit=1)
    assert [r.path for r in first] == [everything[0].path] and more is True
    assert counts == {"modified": len(everything)} and len(everything) == 24
    assert vault.changes("2024-01-01", limit=5) == everything[:5]
    page, _, more = vault.changes_page("2024-01-01", limit=24)
    assert page == everything and more is False


def test_database_lock_and_wal_files_are_private(tmp_path: Path) -> None:
    import os
    import stat

    root = tmp_path / "vault"
    root.mkdir()
    (root / "A.md").write_text("# A\n", encoding="utf-8")
    old = os.umask(0o022)  # a usual umask: files would be world-readable
    try:
        with Vault.open(tmp_path / "data" / "v.db", root=root) as v:
            v.sync()
            files = sorted(p.name for p in (tmp_path / "data").iterdir())
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "data").iterdir()}
    finally:
        os.umask(old)
    assert {"v.db", "v.db-wal", "v.db-shm", "v.db.vault.lock"} <= set(files), files
    assert all(mode == 0o600 for mode in modes.values()), modes
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700

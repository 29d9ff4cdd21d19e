"""The parity suite on real history: the Obsidian Help replay (``help_replayed``) in both engines.

The session's replay database (SQLite, every 16th commit of the Help vault's history, the folders
conftest.REPLAY_FOLDERS keeps) is copied into PostgreSQL with ``vaultsync copy`` (each batch written again through the
PostgreSQL engine's own write path, at its own time; the search index built once after them, ``pg/bulk.py``).
Then, at every replayed date, the two list the same notes with the same content hashes, every revision reads back
byte-equal, and at 24 cutoffs
keyword, default and vector search (words, phrases, prefixes, Chinese pairs, a folder filter) give the
same chunks in the same order with the same scores (compared to 1e-9; the SQLite
engine's equal a fresh FTS5 index: tests/search/test_search_history.py). Each test prints what it compared (``-rP``).

Measured on the 2-core machine under the other helpers' load (``VAULTSYNC_PG_REPLAY=1 /usr/bin/time -v
.venv/bin/python -m pytest -q -p no:xdist tests/store/test_pg_replay.py``): 17 min 58 s wall, 639 s user + 82 s system;
the setup (the SQLite replay, about 3.5 min, then ``copy`` of its 116 batches and 7,993 revisions into
PostgreSQL, about 8.5 min) took 712 s; the reads (116 dates, 6,802 revisions) 66 s; the searches (24 cutoffs,
960 searches per engine, 8,810 hits compared) 289 s.
"""

from __future__ import annotations

import os

import pytest

from vaultsync import Vault
from vaultsync.store.read import LISTED_FIELDS

pgserver = pytest.importorskip("support.pgserver")

pytestmark = [
    pytest.mark.pg,
    pytest.mark.corpus,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("VAULTSYNC_PG_REPLAY") != "1",
        reason="copying the whole Help replay into PostgreSQL takes over 10 minutes on two "
        "cores: not in make test; run it with VAULTSYNC_PG_REPLAY=1",
    ),
]

QUERIES = ["link", "canvas plugin", '"graph view"', "sync*", "prop*", "链接", "插件", "笔记 同步", "the", "Obsidian"]


@pytest.fixture(scope="module")
def engines(help_replayed):
    from vaultsync.store.transfer import copy_databases

    try:
        server = pgserver.shared()
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    dsn = server.fresh("helpreplay")
    copied = copy_databases(str(help_replayed.db), dsn)
    lite, pg = Vault.open(help_replayed.db, readonly=True), Vault.open(dsn, readonly=True)
    assert list(copied.vaults.values())[0]["batches"] == lite.stats().batches > 100
    yield lite, pg, [t * 1_000_000 for t in help_replayed.commit_times]
    lite.close()
    pg.close()


def test_every_note_at_every_replayed_date_reads_the_same(engines) -> None:
    lite, pg, times = engines
    read: set[tuple[str, str]] = set()
    for at in times:
        listed = lite.ls(as_of=at)
        assert [r.summary(LISTED_FIELDS) for r in pg.ls(as_of=at)] == [r.summary(LISTED_FIELDS) for r in listed]
        for r in listed:
            if (r.path, r.content_hash) not in read:  # each revision once, at a date it was visible
                read.add((r.path, r.content_hash))
                assert pg.read(r.path, as_of=at).content == lite.read(r.path, as_of=at).content
    assert len(read) > 1000
    print(f"{len(times)} replayed dates listed equal; {len(read)} revisions read byte-equal")


def test_search_at_24_cutoffs_is_the_same(engines) -> None:
    lite, pg, times = engines
    cutoffs = [times[i * (len(times) - 1) // 23] for i in range(24)]
    compared = 0
    for at in cutoffs:
        for query in QUERIES:
            for mode, options in (("keyword", {}), ("hybrid", {}), ("keyword", {"prefix": "zh/"}), ("vector", {})):
                a = lite.search(query, mode=mode, as_of=at, limit=10, **options).hits
                b = pg.search(query, mode=mode, as_of=at, limit=10, **options).hits
                assert [(h["path"], h["chunk_id"], h["keyword"] and h["keyword"]["rank"]) for h in b] == [
                    (h["path"], h["chunk_id"], h["keyword"] and h["keyword"]["rank"]) for h in a
                ], (at, query, mode)
                assert all(abs(x["score"] - y["score"]) <= 1e-9 for x, y in zip(a, b)), (at, query, mode)
                compared += len(a)
    assert compared > 2000
    print(f"{len(set(cutoffs))} cutoffs x {len(QUERIES)} queries x 4 modes: {compared} hits equal")

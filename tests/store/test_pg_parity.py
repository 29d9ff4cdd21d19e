"""The PostgreSQL engine answers exactly as the SQLite engine: one small history imported into both.

Through ``Vault`` (the one door) with ``--db postgresql://…`` and a SQLite file: at every batch time and
between them, ``ls``, ``read`` of every path ever seen, ``history``, ``export`` and keyword search
and the default mode (single words, phrases, prefixes, CJK pairs, a filter, the validity overlay) give the
same answers,
scores within 1e-9; vector search and the default mode fused with vectors give the same chunks with the same
scores, bit for bit, with pgvector and with the fallback that does without it (the SQLite engine's scores are checked
against a fresh FTS5 index by
tests/test_search_truth.py). Threads reading one store at once answer as one at a time, over several pooled
connections; the system's PostgreSQL (no pgvector), where installed, falls back to Python vectors by itself
with the same answers. The servers are tests/support/pgserver.py's, shared by the session.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.pg_history import DAY, QUERIES, STATES, T0, _import_all

from vaultsync import Vault
from vaultsync.embed.embedders import HashEmbedder
from vaultsync.errors import NoteNotFound
from vaultsync.store.read import HISTORY_FIELDS, LISTED_FIELDS

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")


def _answers(vault: Vault, at: int, paths: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"ls": [r.summary(LISTED_FIELDS) for r in vault.ls(as_of=at)]}
    for path in paths:
        try:
            out[f"read {path}"] = vault.read(path, as_of=at).content
        except NoteNotFound as exc:
            out[f"read {path}"] = str(exc)
    out["export"] = list(vault.export(as_of=at))
    for valid_at in (None, T0 + DAY - DAY // 6):  # 2023-11-15T18:13Z: inside the first Policy's interval
        for query in QUERIES:
            for options in ({}, {"prefix": "Plans/"}):
                for mode in ("keyword", "hybrid"):
                    found = vault.search(query, mode=mode, as_of=at, valid_at=valid_at, limit=8, **options)
                    out[f"search {mode} {query} {valid_at} {options}"] = [
                        (h["path"], h["chunk_id"], json.dumps([h["keyword"], h["signals"]]), h["score"], h["snippet"])
                        for h in found.hits
                    ]
    return out


@contextlib.contextmanager
def _store(db: Any) -> Iterator[tuple[Any, int]]:
    """The database ``db`` opened read-only as a store of its own (beside any ``Vault`` on it), and vault "v"'s id:
    what a test reads below the facade (file states, purge records, audit heads, a view's session)."""
    from vaultsync.store import open_store

    store = open_store(db, readonly=True)
    try:
        found = store.vault("v")
        assert found is not None
        yield store, found.id
    finally:
        store.close()


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[int]]:
    """One small history imported into a SQLite file and a PostgreSQL database: (file, connection string, times)."""
    try:
        server = pgserver.shared()
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    work = tmp_path_factory.mktemp("parity")
    times = _import_all(work / "lite.db", work / "vault")
    dsn = server.fresh("parity")
    assert _import_all(dsn, work / "vault") == times
    return work / "lite.db", dsn, times


@pytest.fixture(scope="module")
def both(databases: tuple[Path, str, list[int]]) -> tuple[Vault, Vault, list[int], list[str]]:
    lite_db, dsn, times = databases
    lite, pg = Vault.open(lite_db, name="v", readonly=True), Vault.open(dsn, name="v", readonly=True)
    paths = sorted({p for state in STATES for p in state} | {"Plans/Q1.md"})
    yield lite, pg, times, paths
    lite.close()
    pg.close()


def test_every_answer_is_the_same_at_every_time(both: tuple[Vault, Vault, list[int], list[str]]) -> None:
    lite, pg, times, paths = both
    cutoffs = [T0 - 1] + [t + d for t in times for d in (0, DAY // 2)]
    searched = 0
    for at in cutoffs:
        a, b = _answers(lite, at, paths), _answers(pg, at, paths)
        assert a.keys() == b.keys()
        for key in a:
            if key.startswith("search"):
                assert [h[:3] + h[4:] for h in b[key]] == [h[:3] + h[4:] for h in a[key]], (at, key)
                assert all(abs(x[3] - y[3]) <= 1e-9 for x, y in zip(a[key], b[key])), (at, key)
                searched += len(a[key])
            else:
                assert b[key] == a[key], (at, key)
    assert searched > 200  # the queries found something to compare
    overlay = pg.search("reviewed", mode="keyword", as_of=times[2], valid_at=T0 + DAY - DAY // 6).hits
    assert [h["path"] for h in overlay] == ["Policy.md"] and "weekly" in overlay[0]["text"]  # the overlay applied


def test_history_follows_renames_the_same_way(both: tuple[Vault, Vault, list[int], list[str]]) -> None:
    lite, pg, _, paths = both
    for path in paths:
        try:
            expected = [r.summary(HISTORY_FIELDS) for r in lite.history(path)]
        except NoteNotFound:
            with pytest.raises(NoteNotFound):
                pg.history(path)
            continue
        assert [r.summary(HISTORY_FIELDS) for r in pg.history(path)] == expected
    assert [r.kind for r in pg.history("Plans/2025 Q1.md")] == ["created", "renamed", "modified"]


def test_the_postgres_database_checks_clean_and_refuses_rewrites(
    both: tuple[Vault, Vault, list[int], list[str]], databases: tuple[Path, str, list[int]]
) -> None:
    import psycopg

    _, pg, _, _ = both
    assert pg.check() == []
    dsn = databases[1]  # the test reaches the database itself: append-only must hold there, not only in vaultsync
    with psycopg.connect(dsn) as con:
        for sql in (
            "UPDATE notes SET path = 'x'",
            "DELETE FROM chunks",
            "UPDATE texts SET body = ''::bytea",
            "DELETE FROM search_docs",  # (a doc's postings row moves; the terms' blocks grow in place)
        ):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                con.execute(sql)
            con.rollback()


def test_copy_sqlite_to_postgres_and_back_keeps_every_answer(
    both: tuple[Vault, Vault, list[int], list[str]], databases: tuple[Path, str, list[int]], tmp_path: Path
) -> None:
    """``vaultsync copy`` SQLite → PostgreSQL → SQLite: each copy answers as the original, and checks clean."""
    from click.testing import CliRunner

    from vaultsync.cli import cli

    lite, _, times, paths = both
    there, back = pgserver.shared().fresh("copied"), tmp_path / "back.db"
    runner = CliRunner()
    written = sum(len(lite.written_by(i)) for i in range(1, len(times) + 1))
    for src, dst in ((str(databases[0]), there), (there, str(back))):
        done = runner.invoke(cli, ["copy", src, dst, "--json"], catch_exceptions=False)
        assert done.exit_code == 0, done.output
        assert json.loads(done.output)["vaults"] == {"v": {"batches": len(times), "revisions": written}}
    refused = runner.invoke(cli, ["copy", there, str(back)])
    assert refused.exit_code == 1 and "already holds a vault 'v'" in refused.output
    expected = {at: _answers(lite, at, paths) for at in [T0 - 1, *times]}
    for db in (there, back):
        copy = Vault.open(db, name="v", readonly=True)
        try:
            assert copy.check() == []
            with _store(db) as (copied, copied_id), _store(databases[0]) as (source, source_id):
                assert copied.live_index(copied_id) == source.live_index(source_id)  # file states came along
            assert [copy.batch_info(i) for i in range(1, 4)] == [lite.batch_info(i) for i in range(1, 4)]
            for at, answers in expected.items():
                assert _answers(copy, at, paths) == answers, (db, at)
            for path in ("Home.md", "Plans/2025 Q1.md", "Policy.md"):
                assert [r.summary(HISTORY_FIELDS) for r in copy.history(path)] == [
                    r.summary(HISTORY_FIELDS) for r in lite.history(path)
                ]
        finally:
            copy.close()


class FusedHash(HashEmbedder):
    """The hashed embedder, marked as one the default mode fuses (so the default mode joins vectors)."""

    embedder_id = "hash-fused"
    fuse = True


@pytest.fixture(scope="module")
def fused() -> Any:
    """Three stores of one history with a fusing embedder: SQLite, PostgreSQL with pgvector, and PostgreSQL
    without it (``VAULTSYNC_PG_VECTORS=python`` when its schema was made: the fallback)."""
    import psycopg

    from vaultsync.embed import embedders
    from vaultsync.store.pg.vectors import ENV, pgvector_schema

    try:
        server = pgserver.shared()
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as tmp:
        mp.setitem(embedders.EMBEDDERS, "hash-fused", FusedHash)
        work = Path(tmp)
        times = _import_all(work / "lite.db", work / "vault", "hash-fused")
        with_ext, without = server.fresh("vec"), server.fresh("novec")
        assert _import_all(with_ext, work / "vault", "hash-fused") == times
        mp.setenv(ENV, "python")
        assert _import_all(without, work / "vault", "hash-fused") == times
        mp.delenv(ENV)
        opened = [Vault.open(db, name="v", readonly=True) for db in (work / "lite.db", with_ext, without)]
        with psycopg.connect(with_ext) as con:  # the databases themselves, as their connection strings select them
            assert pgvector_schema(con) is not None  # the first really ranks with pgvector…
        with psycopg.connect(without) as con:
            assert pgvector_schema(con) is None  # …and the second without it
        yield (*opened, times)
        for vault in opened:
            vault.close()


def _vector_answers(vault: Vault, at: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for valid_at in (None, T0 + DAY - DAY // 6):
        for query in ["tide table", "storm season keeper", "東京の会議", "budgets"]:
            for options in ({}, {"prefix": "Plans/"}):
                for mode, limit in (("vector", 1), ("vector", 3), ("vector", 8), ("hybrid", 8)):
                    found = vault.search(query, mode=mode, as_of=at, valid_at=valid_at, limit=limit, **options)
                    out[f"{mode} {limit} {query} {valid_at} {options}"] = [
                        (h["path"], h["chunk_id"], json.dumps([h["keyword"], h["vector"], h["signals"]]), h["score"])
                        for h in found.hits
                    ]
    return out


def test_vector_and_fused_search_are_the_same_with_and_without_pgvector(fused: Any) -> None:
    lite, pg, fallback, times = fused
    compared = 0
    for at in [T0 - 1, times[0], times[1] + DAY // 2, times[2]]:
        want = _vector_answers(lite, at)
        assert _vector_answers(pg, at) == want, at
        assert _vector_answers(fallback, at) == want, at
        compared += sum(len(hits) for hits in want.values())
    assert compared > 200
    nearest = pg.search("storm season keeper", mode="vector", limit=3).hits
    assert nearest[0]["path"] == "Storm.md" and nearest[0]["vector"]["score"] > 0.3  # the vectors are real
    fusedhits = pg.search("keeper", limit=8).hits
    assert any(h["vector"] is not None for h in fusedhits)  # the default mode joined the vector ranking


def test_reembed_purge_and_reindex_keep_the_vectors_equal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One history in both engines (the default embedder): vector search equal; both re-embedded with a fusing
    embedder: the default mode equal and fused; a text purged from both (the PostgreSQL index rebuilt with
    the store's embedder inside the purge), then a reindex: still equal."""
    from vaultsync.embed import embedders

    dsn = pgserver.fresh_or_skip("reembed")
    monkeypatch.setitem(embedders.EMBEDDERS, "hash-fused", FusedHash)
    _import_all(tmp_path / "lite.db", tmp_path / "vault")
    _import_all(dsn, tmp_path / "vault")
    vaults = [Vault.open(db, root=tmp_path / "vault", name="v") for db in (tmp_path / "lite.db", dsn)]
    try:

        def same(mode: str, queries: tuple[str, ...] = ("tide table", "lighthouse keeper", "storm")) -> list[Any]:
            found = [
                [
                    [
                        (h["path"], h["chunk_id"], h["score"], h["vector"])
                        for h in v.search(q, mode=mode, limit=6, as_of=at).hits
                    ]
                    for q in queries
                    for at in (None, T0)
                ]
                for v in vaults
            ]
            assert found[1] == found[0], mode
            return found[0]

        assert any(same("vector"))
        for vault in vaults:
            assert vault.reembed("hash-fused").docs_embedded > 0
        assert any(h[3] is not None for hits in same("hybrid") for h in hits)  # fused on both
        for vault in vaults:
            vault.purge(texts=["lighthouse"], also_current=True)
        assert any(same("vector", ("lighthouse budget", "tide")))
        vaults[1].reindex(full=True)
        same("vector", ("lighthouse budget", "keeper logs"))
        same("hybrid", ("lighthouse budget", "keeper logs"))
    finally:
        for vault in vaults:
            vault.close()


def test_copy_carries_purge_records_audit_heads_and_the_embedder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vault purged twice (a text, then a retention horizon) in a database with an audit log head and a fusing
    embedder: copied SQLite → PostgreSQL → SQLite, each copy has the same purge records, horizon, audit head
    and answers (the default mode fused with the same vectors), and checks clean."""
    from vaultsync.embed import embedders
    from vaultsync.store import open_store
    from vaultsync.store.transfer import copy_databases

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-fused", FusedHash)

    there = pgserver.fresh_or_skip("copypurge")
    lite_db, back = tmp_path / "lite.db", tmp_path / "back.db"
    times = _import_all(lite_db, tmp_path / "vault", "hash-fused")
    with Vault.open(lite_db, root=tmp_path / "vault", name="v") as vault:
        vault.purge(texts=["lighthouse"], also_current=True)
        vault.purge(before=times[1])
    store = open_store(lite_db)
    try:
        store.audit_append("log-1", "/var/log/vaultsync/audit.jsonl", lambda records, head: f"{records:064x}")
        store.audit_append("log-1", "/var/log/vaultsync/audit.jsonl", lambda records, head: f"{records + 7:064x}")
    finally:
        store.close()
    copy_databases(lite_db, there)
    copy_databases(there, back)
    lite = Vault.open(lite_db, name="v", readonly=True)
    paths = sorted({p for state in STATES for p in state} | {"Plans/Q1.md"})
    try:

        def records(db: Any) -> list[tuple]:
            with _store(db) as (store, vid), store.view(vid, "v") as view:
                return [(p.command, p.horizon, p.revisions_changed, p.revisions_removed, p.at) for p in view.purges()]

        purges = records(lite_db)
        assert [p[0] for p in purges] == ["text", "before"] and purges[1][1] == times[1]
        expected = {at: _answers(lite, at, paths) for at in times[1:]}
        vectors = _vector_answers(lite, times[2])
        assert any(h[2] != "[null, null, null]" and json.loads(h[2])[1] for hits in vectors.values() for h in hits)
        with _store(lite_db) as (store, _):
            head = store.audit_head(log_id="log-1")
        assert head is not None and head.records == 2
        for db in (there, back):
            copy = Vault.open(db, name="v", readonly=True)
            try:
                assert copy.check() == []
                assert records(db) == purges
                with _store(db) as (store, vid):
                    assert store.horizon(vid) == times[1]
                    assert store.audit_head(log_id="log-1") == head
                for at, answers in expected.items():
                    assert _answers(copy, at, paths) == answers, (db, at)
                assert _vector_answers(copy, times[2]) == vectors
            finally:
                copy.close()
    finally:
        lite.close()


def test_readers_of_one_store_share_a_pool_and_answer_as_one_at_a_time(databases: tuple[Path, str, list[int]]) -> None:
    """Threads searching one PgStore at once get the serial answers, over several connections of the readers' pool:
    a view held open in one thread does not stop another thread's view (each its own REPEATABLE READ READ ONLY
    transaction, as ``PgView.session`` reports it)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    _, dsn, times = databases
    held, go = threading.Event(), threading.Event()
    with _store(dsn) as (store, vid):

        def hold() -> Any:
            with store.view(vid, "v") as view:
                session = view.session()
                held.set()
                assert go.wait(30), "the other reader never got a view while this one was open"
                return session

        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(hold)
            assert held.wait(30)
            with store.view(vid, "v") as view:  # with one connection this would wait for `hold`, which waits for it
                second = view.session()
            go.set()
            assert first.result(30).backend_pid != second.backend_pid
            assert (second.isolation, second.read_only) == ("repeatable read", True)
            assert (first.result().isolation, first.result().read_only) == ("repeatable read", True)

        jobs = [(q, mode, at) for q in QUERIES for mode in ("keyword", "hybrid") for at in (None, times[0], times[1])]

        def answer(job: tuple[str, str, int | None]) -> list[tuple]:
            q, mode, at = job
            with store.view(vid, "v", as_of=at) as view:
                return [(h["path"], h["chunk_id"], h["score"]) for h in view.search(q, mode=mode, limit=8)["hits"]]

        serial = [answer(job) for job in jobs]
        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(answer, jobs)) == serial
        assert any(serial)
        assert store.db.pool().get_stats()["pool_size"] >= 2  # the readers really spread over connections


def test_the_system_postgres_without_pgvector_falls_back_by_itself(
    fused: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the system's PostgreSQL (Debian's packages: no ``vector`` extension to create), with no setting, the
    schema is made without pgvector and vector search and the fused default mode answer as SQLite's."""
    import psycopg

    from vaultsync.embed import embedders
    from vaultsync.store.pg.vectors import ENV, pgvector_schema

    try:
        server = pgserver.shared_system()
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setitem(embedders.EMBEDDERS, "hash-fused", FusedHash)
    lite, _, _, times = fused
    dsn = server.fresh("system")
    with psycopg.connect(dsn) as con:
        assert con.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'").fetchone()[0] == 0
        assert int(con.execute("SHOW server_version_num").fetchone()[0]) < 180000  # not the wheel's server
    assert _import_all(dsn, tmp_path / "vault", "hash-fused") == times
    system = Vault.open(dsn, name="v", readonly=True)
    try:
        with psycopg.connect(dsn) as con:
            assert pgvector_schema(con) is None
        for at in (times[0], times[2]):
            want = _vector_answers(lite, at)
            assert _vector_answers(system, at) == want and any(want.values()), at
    finally:
        system.close()

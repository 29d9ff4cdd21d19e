"""Vectors filled after their batch (``store.search.backfill``): a batch of a background embedder writes none, the
writer fills them a step at a time, newest notes first, and search at every cutoff equals a fresh index and a brute
force over exactly the visible chunks whose text has a vector, on both engines; the watcher fills them by itself."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.embedders import BackgroundHash
from support.engines import sqlite_file
from support.search_truth import BruteVector, fresh_default, same_ranking, split_export
from support.watch_helpers import wait_until

from vaultsync.dsn import is_dsn
from vaultsync.live.watcher import Watcher
from vaultsync.vault import Vault

NOTES = Path(__file__).resolve().parents[2] / "notes"
QUERIES = ["sync ate my notes", "budget review", "kickoff decisions", "how do I review my budget", "会議"]


@pytest.fixture(autouse=True)
def _background(monkeypatch: pytest.MonkeyPatch) -> None:
    from vaultsync.embed import embedders

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-background", BackgroundHash)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.pg)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "db.sqlite")
    from support import pgserver

    return pgserver.fresh_or_skip("backfill")


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _with_vectors(db: str) -> set[bytes]:
    """The hashes of the texts that have a vector, read from the database itself."""
    sql = "SELECT d.hash FROM search_docs d JOIN search_vectors v ON v.doc_id = d.id"
    if is_dsn(db):
        import psycopg

        with psycopg.connect(db) as con:
            return {bytes(r[0]) for r in con.execute(sql)}
    with sqlite_file(db) as con:
        return {bytes(r[0]) for r in con.execute(sql)}


def _history(vault: Vault, root: Path) -> list[str]:
    times = []
    for day, edit in [(2, None), (4, "Meetings"), (6, "Projects")]:
        if edit:  # a later batch: three notes of one folder change
            for note in sorted((root / edit).rglob("*.md"))[:3]:
                note.write_text(note.read_text(encoding="utf-8") + "\nlater words: sync budget review\n", "utf-8")
        when = dt.datetime(2024, 1, day, tzinfo=dt.UTC).isoformat()
        vault.sync(known_at=when)
        times.append(when)
    return times


def _exact(vault: Vault, db: str, times: list[str]) -> int:
    """Every search at every cutoff against a fresh index over the visible chunks whose text has a vector; how many
    of the visible chunks had one, summed over the cutoffs."""
    filled = _with_vectors(db)

    def vectored(chunk: dict[str, Any]) -> bool:
        return _key(chunk["indexed_text"]) in filled

    seen = 0
    for as_of in [None, *times]:
        header, chunks = split_export(vault.export(as_of=as_of))
        seen += sum(map(vectored, chunks))
        brute = BruteVector([c for c in chunks if vectored(c)], BackgroundHash())
        for query in QUERIES:
            for limit in (5, 60):
                got = vault.search(query, as_of=as_of, limit=limit).hits
                same_ranking(
                    [(h["path"], h["chunk_id"], h["score"]) for h in got],
                    fresh_default(header, chunks, query, limit, fused=BackgroundHash(), vectored=vectored),
                    rel=1e-9,
                    abs_=1e-9,
                )
                got = vault.search(query, as_of=as_of, limit=limit, mode="vector").hits
                same_ranking([(h["path"], h["chunk_id"], h["score"]) for h in got], brute.search(query, limit))
    return seen


@pytest.mark.slow
def test_batches_leave_vectors_to_the_writer_and_search_is_exact_for_what_is_filled(
    database: str, tmp_path: Path
) -> None:
    root = tmp_path / "vault"
    shutil.copytree(NOTES, root)
    with Vault.open(database, root=root, embedder="hash-background") as vault:
        times = _history(vault, root)
        progress = vault.vector_progress()
        assert progress is not None and progress["filled"] == 0 and progress["total"] > 20
        assert _with_vectors(database) == set()
        current = {k: progress[k] for k in ("embedder", "filled", "total")}
        assert vault.search("budget review").vectors == current  # search says how far it is
        assert _exact(vault, database, times) == 0  # words alone, exactly

        # newest first: the texts of the notes the last batch wrote come before every other
        _, now = split_export(vault.export())
        last = {_key(c["indexed_text"]) for c in now if c["known_at"] == now_known(now)}
        assert vault.fill_vectors(limit=3) == 3
        assert _with_vectors(database) <= last and len(_with_vectors(database)) == 3
        seen = [_exact(vault, database, times)]
        assert vault.vector_progress()["filled"] == 3

        vault.fill_vectors(limit=17)
        seen.append(_exact(vault, database, times))
        while vault.fill_vectors():
            pass
        done = vault.vector_progress()
        assert done["filled"] == done["total"] == progress["total"]
        assert vault.search("budget review").vectors is None
        seen.append(_exact(vault, database, times))
        assert 0 < seen[0] < seen[1] < seen[2]  # the comparisons ran over growing sets of vectors
        # the past texts were filled too: every text any cutoff sees has its vector
        for as_of in times:
            _, chunks = split_export(vault.export(as_of=as_of))
            assert {_key(c["indexed_text"]) for c in chunks if c["indexed"]} <= _with_vectors(database)


def _texts(vault: Vault, as_of: str | None = None) -> set[bytes]:
    """The distinct indexed texts visible at ``as_of``, from the export (the revision tables alone)."""
    _, chunks = split_export(vault.export(as_of=as_of))
    return {_key(c["indexed_text"]) for c in chunks if c["indexed"]}


@pytest.mark.anyio
async def test_current_texts_fill_first_and_status_and_past_searches_say_how_far(database: str, tmp_path: Path) -> None:
    """Every text of the vault as it is now gets its vector before any text only the past sees; the status (the
    library, ``stats``, ``vault_status``) counts both, and a search at a past cutoff counts the texts visible then."""
    from click.testing import CliRunner
    from mcp import Client
    from support.mcp_helpers import sc

    from vaultsync.cli import cli
    from vaultsync.server import ServeConfig, build_server

    root = tmp_path / "vault"
    shutil.copytree(NOTES, root)
    with Vault.open(database, root=root, embedder="hash-background") as vault:
        times = _history(vault, root)
        now, first, everything = _texts(vault), _texts(vault, times[0]), set()
        for as_of in times:
            everything |= _texts(vault, as_of)
        assert first - now and now <= everything  # the first cutoff sees texts that are gone now
        start = vault.vector_progress()
        assert start["filled"] == start["history_filled"] == 0
        assert start["history_total"] - start["total"] == len(everything - now) > 0  # the texts only the past sees
        while vault.vector_progress()["filled"] < start["total"]:
            assert vault.fill_vectors(limit=7) > 0
            assert not _with_vectors(database) & (everything - now)  # no past text before every current one
        half = vault.vector_progress()
        assert half["history_filled"] == half["filled"] == start["total"] < half["history_total"]
        assert vault.search("budget review").vectors is None  # now: complete
        past = vault.search("budget review", as_of=times[0]).vectors
        assert past is not None and past["total"] - past["filled"] == len(first - now) > 0
        assert past["as_of"] == vault.search("x", as_of=times[0]).as_of
        said = CliRunner().invoke(cli, ["search", "budget review", "--as-of", times[0], "--db", database])
        assert f"{past['filled']} of {past['total']} texts visible at {past['as_of']} so far" in said.stderr
        stats = CliRunner().invoke(cli, ["stats", "--db", database]).output
        total, history = half["total"], half["history_total"]
        assert f"{total} of {total} current texts, {total} of {history} in the whole history" in stats
        async with Client(build_server(ServeConfig.of(vault))) as c:
            status = sc(await c.call_tool("vault_status", {}))["semantic_vectors"]
        assert (status["history_filled"], status["history_total"]) == (total, history)

        while vault.fill_vectors():
            pass
        assert vault.vector_progress()["history_filled"] == len(_with_vectors(database)) == history
        assert vault.search("budget review", as_of=times[0]).vectors is None


def now_known(chunks: list[dict[str, Any]]) -> str:
    return max(c["known_at"] for c in chunks)


def test_a_first_import_fills_the_most_recently_modified_notes_first(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    for name in ["old", "newest", "middle"]:
        (root / f"{name}.md").write_text(f"# {name}\n\nthe {name} note about gardens\n", encoding="utf-8")
    for name, mtime in [("old", 1_000_000), ("middle", 2_000_000), ("newest", 3_000_000)]:
        os.utime(root / f"{name}.md", (mtime, mtime))
    db = str(tmp_path / "db.sqlite")
    with Vault.open(db, root=root, embedder="hash-background") as vault:
        vault.sync()
        _, chunks = split_export(vault.export())
        keys = {c["path"]: _key(c["indexed_text"]) for c in chunks if c["indexed"]}
        order = []
        while vault.fill_vectors(limit=1):
            order.append(next(p for p, k in keys.items() if k in _with_vectors(db) and p not in order))
        assert order == ["newest.md", "middle.md", "old.md"]


def test_the_watcher_fills_the_vectors_and_keeps_them_current(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    shutil.copytree(NOTES, root)
    with Vault.open(tmp_path / "db.sqlite", root=root, embedder="hash-background") as vault:
        vault.sync()
        assert vault.vector_progress()["filled"] == 0
        with Watcher(vault, step_ms=50, debounce_ms=200, reconcile_s=0) as watcher:
            wait_until(lambda: (p := vault.vector_progress()) and p["filled"] == p["total"], what="vectors filled")
            before = vault.vector_progress()["total"]
            (root / "Gardens.md").write_text("# Gardens\n\nwhere the tomatoes grow best\n", encoding="utf-8")
            wait_until(
                lambda: (p := vault.vector_progress())["total"] > before and p["filled"] == p["total"],
                what="the new note's vectors",
            )
            hits = vault.search("tomatoes grow", mode="vector", limit=1).hits
            assert hits[0]["path"] == "Gardens.md"
            assert watcher.vectors_filled == vault.vector_progress()["total"]


@pytest.mark.slow
def test_reembedding_with_a_background_embedder_keeps_no_old_vector(database: str, tmp_path: Path) -> None:
    """``reembed`` to an embedder whose vectors are filled after: every old vector goes at once (now and at every
    past cutoff), the writer fills the new ones, and search is exact for what is filled all along."""
    root = tmp_path / "vault"
    shutil.copytree(NOTES, root)
    with Vault.open(database, root=root, embedder="hash") as vault:
        times = _history(vault, root)
        assert _with_vectors(database)  # the hashed vectors, written with each batch
        assert vault.reembed("hash-background").docs_embedded == 0
        assert _with_vectors(database) == set() and vault.vector_progress()["filled"] == 0
        assert _exact(vault, database, times) == 0
        assert vault.fill_vectors(limit=7) == 7
        assert _exact(vault, database, times) > 0
        while vault.fill_vectors():
            pass
        assert vault.search("budget review").vectors is None
        _exact(vault, database, times)

"""Large batches parse (and embed ahead) in worker processes: the store must come out identical."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.engines import sqlite_file

from vaultsync import Vault, sync

REPO = Path(__file__).resolve().parents[2]

TABLES = {
    "notes": (
        "SELECT path, kind, content_hash, size, title, frontmatter, tags, aliases, warnings FROM notes ORDER BY id"
    ),
    "chunks": (
        "SELECT note_id, ord, chunk_id, text_id, heading_path, line_start, line_end, kind, links_id"
        " FROM chunks ORDER BY id"
    ),
    "texts": "SELECT hash FROM texts ORDER BY id",
    "vectors": "SELECT doc_id, embedding FROM search_vectors ORDER BY doc_id",
}


def snapshot(db: Path, root: Path, workers: int = 0) -> dict[str, list[tuple]]:
    with Vault.open(db, root=root, parse_workers=workers) as vault:
        vault.sync(known_at="2024-01-01")
    with sqlite_file(db) as con:
        return {name: con.execute(sql).fetchall() for name, sql in TABLES.items()}


def test_parallel_parsing_gives_the_same_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "notes"
    shutil.copytree(REPO / "notes", root)
    inline = snapshot(tmp_path / "inline.db", root)
    monkeypatch.setattr(sync, "PARALLEL_MIN_NOTES", 1)
    parallel = snapshot(tmp_path / "parallel.db", root, workers=2)
    assert len(inline["vectors"]) > 100 and len(inline["notes"]) == 30
    assert parallel == inline
    assert not __import__("vaultsync.store.search.embedding", fromlist=["AHEAD"]).AHEAD  # nothing left behind


@pytest.mark.slow
def test_a_second_parallel_batch_gives_the_same_store_as_inline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of changed notes: workers embed only the texts the index lacks, and the store is the same."""
    stores = {}
    for workers in (0, 2):
        root = tmp_path / f"notes{workers}"
        shutil.copytree(REPO / "notes", root)
        db = tmp_path / f"{workers}.db"
        monkeypatch.setattr(sync, "PARALLEL_MIN_NOTES", 1)
        snapshot(db, root, workers)
        for note in sorted(root.rglob("*.md"))[::2]:
            note.write_text(
                note.read_text(encoding="utf-8") + "\nOne more line, new in the second batch.\n", encoding="utf-8"
            )
        with Vault.open(db, root=root, parse_workers=workers) as vault:
            vault.sync(known_at="2024-02-01")
        with sqlite_file(db) as con:
            stores[workers] = {name: con.execute(sql).fetchall() for name, sql in TABLES.items()}
    assert stores[2] == stores[0]


def test_workers_embed_only_what_the_index_lacks(tmp_path: Path) -> None:
    """``embed_ahead`` (what a parse worker runs) skips chunk texts the committed index already holds."""
    from vaultsync.embed.tokenizer import indexed_text
    from vaultsync.parsers import parse_note
    from vaultsync.store.search.embedding import embed_ahead

    root = tmp_path / "notes"
    shutil.copytree(REPO / "notes", root)
    db = tmp_path / "v.db"
    snapshot(db, root)
    path = "Projects/Atlas/Architecture/Storage Format.md"
    text = (root / path).read_text(encoding="utf-8")
    before = parse_note(text, path)
    signature, known = embed_ahead("hash", None, before)  # no database: every indexed chunk
    assert len(known) >= 2
    signature, again = embed_ahead("hash", str(db), before)
    assert again == {}  # every one of them is in the index
    after = parse_note(text + "\n## Added later\n\nA paragraph nobody has indexed yet.\n", path)
    signature, fresh = embed_ahead("hash", str(db), after)
    lacking = {indexed_text(after.title, after.aliases, c.heading_path, c.text) for c in after.chunks} - set(known)
    assert set(fresh) == lacking and 1 <= len(lacking) < len(known)
    assert any("nobody has indexed" in t for t in fresh)


def _git(root: Path, *args: str) -> None:
    import subprocess

    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "HOME": str(root),
        "PATH": __import__("os").environ["PATH"],
    }
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def test_import_from_git_keeps_one_pool_and_gives_the_same_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``import_git``: every large commit parses in the same worker processes (one pool for the import),
    and the store equals an inline import's, vectors included (workers see the index grow between commits)."""
    monkeypatch.setattr(sync, "PARALLEL_MIN_NOTES", 1)
    started = []
    real = sync._start_pool
    monkeypatch.setattr(sync, "_start_pool", lambda n: started.append(n) or real(n))
    stores = {}
    for workers in (0, 2):
        root = tmp_path / f"repo{workers}"
        shutil.copytree(REPO / "notes", root)
        _git(root, "init", "-q", "-b", "main")
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "first")
        for n in (1, 2):
            for note in sorted(root.rglob("*.md"))[n::2]:
                note.write_text(note.read_text(encoding="utf-8") + f"\nA line of commit {n}.\n", encoding="utf-8")
            _git(root, "add", "-A")
            _git(root, "commit", "-q", "-m", f"commit {n}")
        db = tmp_path / f"{workers}.db"
        with Vault.open(db, root=root, parse_workers=workers) as vault:
            assert vault.import_git().commits == 3
        with sqlite_file(db) as con:
            stores[workers] = {name: con.execute(sql).fetchall() for name, sql in TABLES.items()}
    assert started == [2]  # three parallel batches, one pool
    assert len(stores[0]["notes"]) > 30 and stores[2] == stores[0]


def test_a_kept_worker_sees_the_index_it_found_empty_filled(tmp_path: Path) -> None:
    """A worker that found the committed index empty (a fresh import's first commit) asks again once the
    database changed, so a kept worker does not embed again what later commits find indexed."""
    from vaultsync.parsers import parse_note
    from vaultsync.store.search.embedding import embed_ahead

    root = tmp_path / "notes"
    shutil.copytree(REPO / "notes", root)
    db = tmp_path / "v.db"
    with Vault.open(db, root=root):
        pass  # the database and its (empty) search index
    path = "Projects/Atlas/Architecture/Storage Format.md"
    parsed = parse_note((root / path).read_text(encoding="utf-8"), path)
    _, first = embed_ahead("hash", str(db), parsed)
    assert len(first) >= 2  # empty index: everything embedded
    _, still = embed_ahead("hash", str(db), parsed)
    assert still == first  # still empty
    snapshot(db, root)
    _, after = embed_ahead("hash", str(db), parsed)
    assert after == {}

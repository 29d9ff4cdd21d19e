"""Large batches parse (and embed ahead) in worker processes: the store must come out identical."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vaultsync import Vault, sync

REPO = Path(__file__).resolve().parents[1]

TABLES = {
    "notes": "SELECT path, kind, content_hash, size, title, frontmatter, tags, aliases, warnings FROM notes ORDER BY id",
    "chunks": "SELECT note_id, ord, chunk_id, text_id, heading_path, line_start, line_end, kind, links_id FROM chunks ORDER BY id",
    "texts": "SELECT hash FROM texts ORDER BY id",
    "vectors": "SELECT doc_id, embedding FROM search_vectors ORDER BY doc_id",
}


def snapshot(db: Path, root: Path, workers: int = 0) -> dict[str, list[tuple]]:
    with Vault.open(db, root=root, parse_workers=workers) as vault:
        vault.sync(known_at="2024-01-01")
        con = vault._store.db.con
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

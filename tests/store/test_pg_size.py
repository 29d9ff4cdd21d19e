"""The PostgreSQL search index in few bytes. The keyword index (migration m013, ``pg/postings.py``): postings one row
per text, not one per term and text indexed twice by term and copied again for the live notes. The vectors (m014): each
text's once, in ``search_vectors``, with or without pgvector, not copied again for the live notes and every span.

A vault of generated notes (a Zipf-like vocabulary, as prose has) is recorded; after ``VACUUM`` (what autovacuum does:
GIN's pending list merged) the postings' relations, heap, TOAST and indexes, take few bytes per token position
indexed. Before m013 they took about 150 bytes a position on the Help vault's history, 17 since; the bound here sits
between (``benchmarks/pg_size.py`` measures whole histories).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from vaultsync import Vault

pgserver = pytest.importorskip("support.pgserver")
pytestmark = pytest.mark.pg

BYTES_PER_POSITION = 40


def _notes(root: Path, count: int = 150) -> None:
    rng = random.Random(52)
    vocabulary = ["".join(rng.choice("abcdefghijklmnoprstuvw") for _ in range(rng.randint(3, 9))) for _ in range(4000)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    for i in range(count):
        paragraphs = [" ".join(rng.choices(vocabulary, weights, k=rng.randint(40, 120))) for _ in range(3)]
        (root / f"note {i}.md").write_text(f"# Note {i}\n\n" + "\n\n".join(paragraphs) + "\n", encoding="utf-8")


def test_the_keyword_postings_take_few_bytes_per_position(tmp_path: Path) -> None:
    import psycopg

    dsn = pgserver.fresh_or_skip("pgsize")
    root = tmp_path / "notes"
    root.mkdir()
    _notes(root)
    with Vault.open(dsn, root=root, name="notes") as vault:
        vault.sync()
        assert vault.search("note", mode="keyword").hits
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("VACUUM ANALYZE")
        positions = int(con.execute("SELECT sum(length) FROM search_docs").fetchone()[0])
        tables = [
            r[0]
            for r in con.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
                "AND (c.relname LIKE 'search%postings' "
                "OR c.relname IN ('search_doc_terms', 'search_live_terms', 'search_terms'))"
            )
        ]
        size = sum(int(con.execute("SELECT pg_total_relation_size(%s::regclass)", (t,)).fetchone()[0]) for t in tables)
    assert positions > 30_000 and tables  # something measured
    assert size / positions < BYTES_PER_POSITION, (tables, size, positions)


@pytest.mark.parametrize("vectors", ["pgvector", "python"])
def test_each_vector_is_kept_once(tmp_path: Path, vectors: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg
    from support.pg_live import VECTOR_COLUMNS

    from vaultsync.store.pg.vectors import ENV

    if vectors == "python":
        monkeypatch.setenv(ENV, "python")
    dsn = pgserver.fresh_or_skip(f"pgsizevec{vectors}")
    root = tmp_path / "notes"
    root.mkdir()
    _notes(root, 3)
    with Vault.open(dsn, root=root, name="notes") as vault:
        vault.sync()
        (root / "note 1.md").write_text("# Note 1\n\nEdited.\n", encoding="utf-8")
        vault.sync()
        assert vault.search("edited", mode="vector").hits
    with psycopg.connect(dsn) as con:
        found = con.execute(VECTOR_COLUMNS).fetchone()[0]
    assert found == ["search_vectors.embedding"] + (["search_vectors.vec"] if vectors == "pgvector" else [])

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


def _notes(root: Path, count: int = 150, words: int = 4000) -> None:
    rng = random.Random(52)
    vocabulary = ["".join(rng.choice("abcdefghijklmnoprstuvw") for _ in range(rng.randint(3, 9))) for _ in range(words)]
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
                "OR c.relname IN ('search_doc_terms', 'search_live_terms', 'search_terms', 'search_term_blocks'))"
            )
        ]
        size = sum(int(con.execute("SELECT pg_total_relation_size(%s::regclass)", (t,)).fetchone()[0]) for t in tables)
    assert positions > 30_000 and tables  # something measured
    assert size / positions < BYTES_PER_POSITION, (tables, size, positions)


@pytest.mark.parametrize("vectors", ["pgvector", "python"])
def test_each_vector_is_kept_once_in_one_form(tmp_path: Path, vectors: str, monkeypatch: pytest.MonkeyPatch) -> None:
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
        rows, held = con.execute("SELECT count(*), count(embedding) FROM search_vectors").fetchone()
    assert sorted(found) == ["search_vectors.embedding"] + (["search_vectors.vec"] if vectors == "pgvector" else [])
    # one form: with pgvector the ``halfvec`` alone (the bytes written made into it), without it the bytes
    assert rows >= 3 and held == (0 if vectors == "pgvector" else rows), (rows, held)


def test_the_postings_indexes_are_smaller_than_indexes_of_the_term_ids(tmp_path: Path) -> None:
    """The postings' GIN indexes (m015) hold each doc's buckets of term ids, not the ids: a few thousand keys with long
    compressed lists of rows instead of one key per distinct term, most of them in a handful of docs. Beside GIN
    indexes of the ids on the same rows (m013's), each built whole, they take a good part less."""
    import psycopg

    from vaultsync.store.pg import postings

    dsn = pgserver.fresh_or_skip("pgbuckets")
    root = tmp_path / "notes"
    root.mkdir()
    _notes(root, count=300, words=30_000)  # (a history's tens of thousands of terms, most of them rare)
    with Vault.open(dsn, root=root, name="notes") as vault:
        vault.sync()
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("VACUUM ANALYZE")
        indexes = [
            r[0]
            for r in con.execute(
                "SELECT indexrelid::regclass::text FROM pg_index i JOIN pg_am a ON a.oid = "
                "(SELECT relam FROM pg_class WHERE oid = i.indexrelid) "
                "WHERE a.amname = 'gin' AND indrelid = ANY(%s::regclass[])",
                (list(postings.BOTH),),
            )
        ]
        for table in postings.BOTH:
            con.execute(f"REINDEX TABLE {table}")  # (grown batch by batch, a GIN index holds more)
            con.execute(f"CREATE INDEX {table}_ids ON {table} USING gin (terms)")

        def size(names: list[str]) -> int:
            return sum(int(con.execute("SELECT pg_relation_size(%s::regclass)", (n,)).fetchone()[0]) for n in names)

        kept, ids = size(indexes), size([f"{table}_ids" for table in postings.BOTH])
    assert len(indexes) == 2 and ids > 100_000, (indexes, ids)  # something measured
    assert kept < ids * 0.75, (indexes, kept, ids)

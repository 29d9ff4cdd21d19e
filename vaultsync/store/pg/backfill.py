"""Vectors filled after their batch, on PostgreSQL: ``search.backfill``'s steps with this engine's tables.

A step's vectors go into ``search_vectors`` (pgvector's ``vec`` is generated from them), in one transaction: the
one copy search reads, now (through the live set, ``pg/live.py``) and at a past cutoff (through the spans of
visibility, ``pg/spans.py``).
"""

from __future__ import annotations

from typing import Any

from ..search.backfill import Progress, Wanted

HAS_VECTOR = "SELECT 1 FROM search_vectors x WHERE x.doc_id = r.doc_id"
"""``search.backfill.CURRENT``'s test of a current text's vector on this engine (every vector is in one table)."""


def store(con: Any, done: list[Wanted]) -> None:
    """``Filler.store`` on this engine (the vectors checked by their doc's hash)."""
    with con.raw.cursor() as cur:
        cur.executemany(
            "INSERT INTO search_vectors (doc_id, embedding) SELECT %s, %s "
            "WHERE EXISTS (SELECT 1 FROM search_docs WHERE id = %s AND hash = %s) ON CONFLICT DO NOTHING",
            [(w.doc_id, w.blob, w.doc_id, w.hash) for w in done if w.blob is not None],
        )


def progress(con: Any, vault_id: int, embedder: str) -> Progress:
    """How many of the vault's live docs (``search_live``) have their vector."""
    total, filled = con.raw.execute(
        "SELECT count(*), count(v.doc_id) FROM search_live l LEFT JOIN search_vectors v ON v.doc_id = l.doc_id "
        "WHERE l.vault_id = %s",
        (vault_id,),
    ).fetchone()
    return Progress(embedder, int(filled), int(total))

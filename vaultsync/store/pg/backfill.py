"""Vectors filled after their batch, on PostgreSQL: ``search.backfill``'s steps with this engine's tables.

A step's vectors go into ``search_vectors`` (pgvector's ``vec`` is generated from them), then into the current
vectors of every vault whose live set holds their docs (``search_live_vectors``, ``pg/live.py``) and into the
spans of visibility that past cutoffs read (``search_doc_spans``, ``pg/spans.py``), in one transaction.
"""

from __future__ import annotations

from typing import Any

from ..search.backfill import Progress, Wanted
from . import live, spans


def store(con: Any, done: list[Wanted]) -> None:
    """``Filler.store`` on this engine (the vectors checked by their doc's hash; the current and span vectors)."""
    raw = con.raw
    with raw.cursor() as cur:
        cur.executemany(
            "INSERT INTO search_vectors (doc_id, embedding) SELECT %s, %s "
            "WHERE EXISTS (SELECT 1 FROM search_docs WHERE id = %s AND hash = %s) ON CONFLICT DO NOTHING",
            [(w.doc_id, w.blob, w.doc_id, w.hash) for w in done if w.blob is not None],
        )
    docs = [w.doc_id for w in done]
    schema = live.pgvector_schema(raw)
    vec, value = ("", "") if schema is None else (", vec", f', v.vec::"{schema}".halfvec')
    raw.execute(
        f"INSERT INTO search_live_vectors (vault_id, doc_id, embedding{vec}) "
        f"SELECT l.vault_id, l.doc_id, v.embedding{value} FROM search_live l "
        "JOIN search_vectors v ON v.doc_id = l.doc_id WHERE l.doc_id = ANY(%s) ON CONFLICT DO NOTHING",
        (docs,),
    )
    if schema is not None and raw.execute("SELECT to_regclass(%s)", (spans.TABLE,)).fetchone()[0] is not None:
        raw.execute(
            f'UPDATE {spans.TABLE} s SET vec = v.vec::"{schema}".halfvec FROM search_vectors v '
            "WHERE v.doc_id = s.doc_id AND s.doc_id = ANY(%s) AND s.vec IS NULL",
            (docs,),
        )


def progress(con: Any, vault_id: int, embedder: str) -> Progress:
    """How many of the vault's live docs (``search_live``) have their current vector."""
    raw = con.raw
    total = raw.execute("SELECT count(*) FROM search_live WHERE vault_id = %s", (vault_id,)).fetchone()[0]
    filled = raw.execute("SELECT count(*) FROM search_live_vectors WHERE vault_id = %s", (vault_id,)).fetchone()[0]
    return Progress(embedder, int(filled), int(total))

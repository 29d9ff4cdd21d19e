"""Whole-index work outside the batch writer: a full rebuild of the search index, and taking out of an old
index the chunk rows it should never have held (migration ``m004_contentless_out``)."""

from __future__ import annotations

import json
import logging

import apsw

from ...embed.tokenizer import indexable, indexed_text
from ..codec import unpack
from .index import SearchIndexer
from .schema import has_schema, live_table

logger = logging.getLogger(__name__)


def rebuild_search(con: apsw.Connection) -> dict[int, int]:
    """Drop every search table (FTS5 shadow tables with them) and index every vault again with the
    same embedder, then compact each FTS5 index; return the batches indexed per vault id."""
    from ...embed.embedders import EMBEDDERS, get_embedder
    from . import schema as search_schema

    if not search_schema.has_schema(con):
        return {}
    name = search_schema.meta(con, "embedder")
    search_schema.drop_schema(con)
    search_schema.create(con)
    indexer = SearchIndexer(con, get_embedder(name) if name in EMBEDDERS else None)
    done = {
        vault_id: indexer.catch_up(con, vault_id)
        for (vault_id,) in con.execute("SELECT id FROM vaults ORDER BY id").fetchall()
    }
    for (table,) in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5(%'"
    ).fetchall():
        con.execute(f'INSERT INTO "{table}" ("{table}") VALUES (\'optimize\')')  # one segment each: compact
    return done


def drop_unindexable(con: apsw.Connection) -> int:
    """Take out of an existing index the chunk rows ``text.indexable`` leaves out (blank, heading-only),
    as if they had never been indexed: live table, live vectors and per-batch statistics; return how many.

    Indexes written before that rule held them (migration ``m004_contentless_out``).
    """
    if not has_schema(con):
        return 0
    by_note: dict[int, list[tuple]] = {}
    for row in con.execute(
        """SELECT r.note_id, r.id, r.vault_id, r.doc_id, r.born, r.died, d.length, c.heading_path, t.body,
                      n.title, n.aliases
               FROM search_rows r JOIN search_docs d ON d.id = r.doc_id JOIN chunks c ON c.id = r.id
               JOIN texts t ON t.id = c.text_id JOIN notes n ON n.id = r.note_id ORDER BY r.note_id, c.ord"""
    ):
        by_note.setdefault(row[0], []).append(row[1:])
    dropped = 0
    for rows in by_note.values():
        texts = [unpack(row[7]) for row in rows]
        for row, text, keep in zip(rows, texts, indexable(texts)):
            if keep:
                continue
            row_id, vault_id, doc_id, born, died, length, heading_path, _, title, aliases = row
            deltas = [(born, -1, -length)] + ([(died, 1, length)] if died is not None else [])
            for batch_id, n, tokens in deltas:
                con.execute(
                    "UPDATE search_stats SET rows = rows + ?, tokens = tokens + ? WHERE vault_id = ? AND batch_id = ?",
                    (n, tokens, vault_id, batch_id),
                )
            if died is None:
                live = live_table(vault_id)
                full = indexed_text(title, json.loads(aliases or "[]"), json.loads(heading_path), text)
                con.execute(f"INSERT INTO {live} ({live}, rowid, indexed_text) VALUES ('delete', ?, ?)", (row_id, full))
                con.execute(
                    "UPDATE search_live_vectors SET refs = refs - 1 WHERE vault_id = ? AND doc_id = ?",
                    (vault_id, doc_id),
                )
                con.execute(
                    "DELETE FROM search_live_vectors WHERE vault_id = ? AND doc_id = ? AND refs <= 0",
                    (vault_id, doc_id),
                )
            con.execute("DELETE FROM search_rows WHERE id = ?", (row_id,))
            dropped += 1
    if dropped:
        logger.info("search index: %d blank or heading-only chunk rows taken out", dropped)
    return dropped

"""What thinning a vault's history frees, in bytes of the database: an estimate from per-table accounting.

Removing revisions shrinks far more than the compressed text only they used: their revision rows, chunk rows,
link lists and the search index's rows, docs, vectors and keyword postings (FTS5 on SQLite, posting tables on
PostgreSQL) go too, with each table's indexes, and batches merged away take their rows and statistics. So the
estimate counts, for each table, the share of its rows (or of its bytes or tokens, where rows differ much in size)
that the thinning removes, and takes that share of the bytes the table and each of its indexes occupy now, in
whole pages: on SQLite the pages ``dbstat`` counts for each b-tree (overflow pages included; FTS5's shadow tables
under their FTS5 table), on PostgreSQL ``pg_relation_size`` of each table, index and TOAST relation.

On SQLite the purge's compaction gives back more than what goes: VACUUM and the WAL checkpoint free the free
pages and the WAL, and merging each FTS5 index it touches into one segment (``search.repair``) drops the space
its older segments and deletion markers took. That holds for the vault's live index too, though no row of it
goes, whenever the thinning rewrites current revisions. A merged FTS5 index's size is estimated from its distinct
terms and postings (``TERM_BYTES``, ``POSTING_BYTES``, read through a temporary ``fts5vocab`` table).

Measured against the real purge with its VACUUM (SQLite), or followed by VACUUM FULL (PostgreSQL, where the
space is otherwise only made reusable), the estimate lies within ``BOUND`` of the bytes actually freed
(benchmarks/bench_retention.py; tests/vault/test_retention_bytes.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

BOUND = 0.25
"""The stated accuracy of the estimate: within this share of the bytes a real thinning frees (measured)."""

Share = tuple[float, float]
"""(what goes, the whole) of one table: rows, bytes or tokens."""


def _ids(values: Any) -> str:
    return json.dumps(sorted(values))


def _one(con: Any, sql: str, *args: object) -> tuple[float, float]:
    row = con.execute(sql, args).fetchone()
    return float(row[0] or 0), float(row[1] or 0)


def shares(con: Any, removed: set[int], batches_removed: int, tables: set[str]) -> dict[str, Share]:
    """For each shrinking table, (how much goes, how much there is), by rows or a better size measure;
    ``tables``: the tables the database has."""
    ids = _ids(removed)
    gone = "(SELECT value FROM json_each(?))"
    notes = _one(con, f"SELECT (SELECT count(*) FROM notes WHERE id IN {gone}), count(*) FROM notes", ids)
    chunks = _one(con, f"SELECT (SELECT count(*) FROM chunks WHERE note_id IN {gone}), count(*) FROM chunks", ids)
    ends = _one(con, f"SELECT (SELECT count(*) FROM note_ends WHERE note_id IN {gone}), count(*) FROM note_ends", ids)
    texts = _one(
        con,
        f"""SELECT (SELECT sum(length(t.body)) FROM texts t
                    WHERE t.id IN (SELECT c.text_id FROM chunks c WHERE c.note_id IN {gone})
                      AND t.id NOT IN (SELECT k.text_id FROM chunks k WHERE k.note_id NOT IN {gone})),
                   sum(length(body)) FROM texts""",
        ids,
        ids,
    )
    blobs = _one(
        con,
        f"""SELECT (SELECT sum(length(b.body)) FROM blobs b
                    WHERE b.id IN (SELECT c.links_id FROM chunks c WHERE c.note_id IN {gone})
                      AND b.id NOT IN (SELECT k.links_id FROM chunks k
                                       WHERE k.links_id IS NOT NULL AND k.note_id NOT IN {gone})),
                   sum(length(body)) FROM blobs""",
        ids,
        ids,
    )
    batches = (float(batches_removed), float(con.execute("SELECT count(*) FROM batches").fetchone()[0]))
    out: dict[str, Share] = {
        "notes": notes,
        "note_ends": ends,
        "chunks": chunks,
        "texts": texts,
        "blobs": blobs,
        "batches": batches,
        "search_stats": batches,
    }
    if "search_rows" in tables:
        rows = _one(
            con, f"SELECT (SELECT count(*) FROM search_rows WHERE note_id IN {gone}), count(*) FROM search_rows", ids
        )
        docs = con.execute(
            f"""SELECT count(*), coalesce(sum(d.length), 0) FROM search_docs d WHERE d.id IN
                    (SELECT r.doc_id FROM search_rows r WHERE r.note_id IN {gone})
                  AND NOT EXISTS (SELECT 1 FROM search_rows o WHERE o.doc_id = d.id AND o.note_id NOT IN {gone})""",
            (ids, ids),
        ).fetchone()
        all_docs = con.execute("SELECT count(*), coalesce(sum(length), 0) FROM search_docs").fetchone()
        by_count, by_tokens = (float(docs[0]), float(all_docs[0])), (float(docs[1]), float(all_docs[1]))
        out |= {
            "search_rows": rows,
            "search_bounded": rows,
            "search_spans": rows,
            "search_docs": by_count,
            "search_vectors": by_count,
            "search_fts": by_tokens,  # the FTS5 index (SQLite): its size follows the tokens it holds
            "search_postings": by_tokens,  # the keyword index's postings (PostgreSQL before compact_index)
            "search_doc_terms": by_tokens,  # a doc's postings row (PostgreSQL): its size follows its tokens
        }
    return out


TERM_BYTES = 5.75
POSTING_BYTES = 4.2
"""An FTS5 index merged into one segment (as a purge leaves the ones it touched) takes about this many bytes a
distinct term and a (term, doc) posting (fitted on the Help history's and constructed histories' indexes after a
purge: within 3% on the large ones)."""


@dataclass(frozen=True, slots=True)
class Sizes:
    """An engine's bytes, b-tree by b-tree (or relation by relation), where a thinning can free some."""

    parts: list[tuple[str, str, int]]
    """(the table it belongs to, its name, its bytes) of each table, index or FTS5 shadow table."""
    page: int
    """The unit space is given back in: a part keeps a whole number of pages, at least one."""
    database: int
    """The database's size (SQLite: file and WAL; PostgreSQL: the schema's tables, indexes and TOAST)."""
    slack: int = 0
    """Bytes given back whatever is removed (SQLite: free pages and the WAL)."""
    fts: dict[str, tuple[int, int]] = field(default_factory=dict)
    """An FTS5 index's data table (``search_fts_data``, the vault's ``search_live_N_data``) → its distinct
    terms and (term, doc) postings: what it takes once merged into one segment (``TERM_BYTES``)."""


def _fts_counts(con: Any, table: str) -> tuple[int, int]:
    """(distinct terms, postings) of an FTS5 table, by a temporary ``fts5vocab`` table (read, never written)."""
    vocab = f"temp.vaultsync_vocab_{table}"
    con.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {vocab} USING fts5vocab(main, {table}, 'row')")
    try:
        terms, postings = con.execute(f"SELECT count(*), coalesce(sum(doc), 0) FROM {vocab}").fetchone()
    finally:
        con.execute(f"DROP TABLE {vocab}")
    return int(terms), int(postings)


def sqlite_sizes(con: Any, vault_id: int, database: int, wal: int) -> Sizes:
    """Each b-tree's bytes by ``dbstat`` (an index under its table, FTS5's shadow tables under their FTS5 table),
    with the free pages and ``wal`` bytes of WAL, which the purge's VACUUM and checkpoint give back, and the
    counts that say how large the FTS5 indexes a thinning of vault ``vault_id`` merges become."""
    owner = {name: table for name, table in con.execute("SELECT name, tbl_name FROM sqlite_master")}
    live = f"search_live_{vault_id}"
    parts = []
    for name, size in con.execute("SELECT name, pgsize FROM dbstat WHERE aggregate = 1"):
        table = owner.get(name, name)
        for index in ("search_fts", live):
            table = index if table.startswith(index + "_") else table
        parts.append((table, name, int(size)))
    fts = {f"{t}_data": _fts_counts(con, t) for t in ("search_fts", live) if t in owner}
    page_size = int(con.execute("PRAGMA page_size").fetchone()[0])
    free = int(con.execute("PRAGMA freelist_count").fetchone()[0])
    return Sizes(parts, page_size, database, page_size * free + wal, fts)


def estimate(sizes: Sizes, share: dict[str, Share], live_touched: bool) -> int:
    """The bytes the thinning frees: each part's share of its bytes, an FTS5 index the purge merges its size
    once merged, in whole pages (at least one kept); and the slack. ``live_touched``: the thinning changes
    revisions of the current state (so the vault's live index is merged too)."""
    total = sizes.slack
    for table, name, size in sizes.parts:
        part, whole = share.get(table, (0.0, 0.0))
        merged = part > 0 if name == "search_fts_data" else live_touched  # the FTS5 indexes the purge merges
        if name in sizes.fts and merged:
            terms, postings = sizes.fts[name]
            left = postings * (1.0 - min(part / whole, 1.0)) if whole > 0 else postings
            kept = min(float(size), TERM_BYTES * terms + POSTING_BYTES * left)
        else:
            if not (whole > 0 and part > 0):
                continue
            kept = size * (1.0 - min(part / whole, 1.0))
        total += max(0, size - max(1, math.ceil(kept / sizes.page)) * sizes.page)
    return total

"""Each doc's spans of visibility per vault on PostgreSQL: what vector search at a past cutoff reads (migration m007).

A past cutoff's visible docs were found from ``search_rows``: every chunk row born by the cutoff read to keep
the few still alive then (on the Hub's whole history, at its middle commit, 63,775 rows read for 8,977 visible
ones, using 8,941 docs), then hashed against the vectors of every doc written by then. ``search_doc_spans``
holds one entry per doc, vault and stretch of batches during which at least one chunk row of the vault used
the doc: ``born``, the batch its first row appeared, and ``died``, the batch after which none is left
(``OPEN`` while one is). A row's lifetime and the next row's that starts as it ends (a chunk unchanged by an
edit, a rename) make one span, so there are about as many spans as docs (99,845 for 99,143 docs there); the
docs visible at batch ``b`` are the spans with ``born <= b < died``, found by a scan of the index
``(vault_id, born, died) INCLUDE (doc_id)`` (``by_index``: never a scan of the whole table), and their vectors
are read from ``search_vectors`` by its key (``visible``). (m007 to m013 kept a copy
of each doc's vector in every span, as a ``halfvec``, and m007 another in the index; m013 made the index again
without them, ``INDEX``, and m014 dropped the column: the vectors are kept once, in ``search_vectors``.)

The spans follow the live set (``pg/live.py``): a doc entering a vault's live set at batch ``b`` opens a span
(or reopens the one that ended at ``b``, when its rows changed within the batch), and leaving it closes the
open span at ``b`` (or removes a span opened in the same batch: it was never visible at a cutoff), in the
statements that keep ``search_live``. A purge or reindex rebuilds them with the rest of the index, and m007
computes them from an existing index (``FROM_ROWS``: the definition the tests compare the kept table with).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..search.schema import OPEN

TABLE = "search_doc_spans"


def from_rows(where: str = "true") -> str:
    """``FROM_ROWS`` for the rows ``where`` selects (of one vault, say)."""
    return f"""
WITH r AS (SELECT vault_id, doc_id, born, coalesce(died, {OPEN}) AS died FROM search_rows
           WHERE (died IS NULL OR died > born) AND {where}),
e AS (SELECT *, max(died) OVER (PARTITION BY vault_id, doc_id ORDER BY born, died
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before FROM r),
i AS (SELECT *, count(*) FILTER (WHERE before IS NULL OR born > before)
                    OVER (PARTITION BY vault_id, doc_id ORDER BY born, died ROWS UNBOUNDED PRECEDING) AS span FROM e)
SELECT vault_id, doc_id, min(born) AS born, max(died) AS died FROM i GROUP BY vault_id, doc_id, span
"""


FROM_ROWS = from_rows()
"""The spans computed from ``search_rows`` alone: the rows' lifetimes ``[born, died)`` (empty ones left out) of
each doc and vault, merged where one starts before or as the ones before it end."""


ENTER = f""",
            so AS (UPDATE {TABLE} s SET died = {OPEN} WHERE s.vault_id = %(v)s AND s.died = %(b)s
                   AND s.doc_id IN (SELECT doc_id FROM k WHERE inserted) RETURNING s.doc_id),
            sn AS (INSERT INTO {TABLE} (vault_id, doc_id, born, died)
                   SELECT %(v)s, k.doc_id, %(b)s, {OPEN} FROM k
                   WHERE k.inserted AND k.doc_id NOT IN (SELECT doc_id FROM so))"""
"""More CTEs for ``live.add``'s statement (a comma first): a span opened at batch ``%(b)s`` for each doc of ``k``
just inserted into ``search_live`` (``inserted``) in vault ``%(v)s``, or the one that ended at that batch
reopened."""


LEAVE = f""",
            sc AS (UPDATE {TABLE} s SET died = %(b)s WHERE s.vault_id = %(v)s AND s.died = {OPEN}
                   AND s.born < %(b)s AND s.doc_id IN (SELECT doc_id FROM gone)),
            se AS (DELETE FROM {TABLE} s WHERE s.vault_id = %(v)s AND s.died = {OPEN} AND s.born = %(b)s
                   AND s.doc_id IN (SELECT doc_id FROM gone))"""
"""More CTEs for ``live.remove``'s statement (a comma first): the open span of each doc of ``gone`` (the docs that
just left the vault's ``search_live``) closed at batch ``%(b)s``, or removed when it opened in that batch."""


def rebuild(raw: Any) -> None:
    """The whole table computed from ``search_rows``, in (vault, born) order."""
    raw.execute(f"DELETE FROM {TABLE}")
    insert(raw)


def insert(raw: Any, where: str = "true", params: Any = None) -> None:
    """The spans of the rows ``where`` selects (with ``params``) computed and added, in (vault, born) order."""
    raw.execute(
        f"INSERT INTO {TABLE} (vault_id, doc_id, born, died) SELECT s.vault_id, s.doc_id, s.born, s.died "
        f"FROM ({from_rows(where)}) s ORDER BY s.vault_id, s.born, s.doc_id",
        params,
    )


def create(raw: Any) -> None:
    """m007's table, filled from the existing index. (m007 gave it each doc's vector too, which m014 drops: it is not
    made now, as m014 runs right after it on any database that lacks m007.)"""
    raw.execute(f"""
    CREATE TABLE {TABLE} (
        vault_id bigint NOT NULL,
        doc_id   bigint NOT NULL,
        born     bigint NOT NULL,                 -- the batch the first of the span's rows was born in
        died     bigint NOT NULL,                 -- the batch the last one died in ({OPEN}: still visible)
        PRIMARY KEY (vault_id, doc_id, born)
    )""")
    rebuild(raw)
    raw.execute(INDEX)
    raw.execute(f"ANALYZE {TABLE}")


INDEX = f"CREATE INDEX {TABLE}_at ON {TABLE} (vault_id, born, died) INCLUDE (doc_id)"
"""The spans by batch (the doc in the index: which docs were visible is read without the table)."""


def slim_index(raw: Any) -> None:
    """Inside m013: the index made again without the vectors m007 put in it (``INDEX``)."""
    raw.execute(f"DROP INDEX IF EXISTS {TABLE}_at")
    raw.execute(INDEX)


def drop_vectors(raw: Any) -> None:
    """Inside m014: the spans without their copy of each doc's vector (m007's ``vec``, where the store's vectors use
    pgvector), the table written anew in the order of its index (a dropped column's bytes stay in every row until it
    is: ``CLUSTER`` writes each row again without them, with its indexes)."""
    raw.execute(f"ALTER TABLE {TABLE} DROP COLUMN IF EXISTS vec")
    raw.execute(f"CLUSTER {TABLE} USING {TABLE}_at")
    raw.execute(f"ALTER TABLE {TABLE} SET WITHOUT CLUSTER")


@contextlib.contextmanager
def by_index(raw: Any) -> Iterator[None]:
    """Statements on the spans planned without a whole-table scan, inside the caller's transaction. PostgreSQL
    estimates ``born <= b AND died > b`` as if the two were independent (twice the rows there are at the Hub's
    middle commit) and costs the index-only scan by the visibility map (empty until VACUUM sets it: just after
    m007 it had not), so on a table whose rows updates have spread it chose a parallel scan of the whole table
    (45-50 ms, against 5 for the index)."""
    (before,) = raw.execute("SELECT current_setting('enable_seqscan')").fetchone()
    raw.execute("SELECT set_config('enable_seqscan', 'off', true)")
    try:
        yield
    finally:
        raw.execute("SELECT set_config('enable_seqscan', %s, true)", (before,))


def visible(snap: Any, distance: str | None) -> tuple[str, dict[str, Any]]:
    """SQL (the store's ``:name`` parameters) selecting ``(doc_id, d)``, ``distance`` (of ``v.vec``, the doc's row of
    ``search_vectors``) of each doc visible at the snapshot's batch that has a vector, or without pgvector
    (``distance`` None) ``(doc_id, embedding)``; and its parameters. The batch alone: not for a validity overlay or a
    filter. The docs come from the spans' index (``by_index``), their vectors from ``search_vectors`` by its key
    (``by_key``)."""
    params = {"vault": snap.vault_id, "b": snap.batch}
    column = "v.embedding" if distance is None else f"{distance} AS d"
    docs = f"SELECT s.doc_id FROM {TABLE} s WHERE s.vault_id = :vault AND s.born <= :b AND s.died > :b"
    return f"SELECT v.doc_id, {column} {by_key(docs)}", params


def by_key(docs: str) -> str:
    """The rows of ``search_vectors`` (``v``) of the docs ``docs`` selects, from a table bounded by the vault (the
    visible spans, the live set), read by the table's key: the docs made an array first (an ``InitPlan``), whose
    size the planner does not guess, so it reads their vectors through the key in the key's order, never every
    vector of the history. (Joined instead, PostgreSQL may hash or merge every vector of the history with them; one
    lookup per doc in a nested loop made a vector search "now" take 57 ms where this takes 38 ms, on the Hub's whole
    history of 573 commits: ``benchmarks/pg_size.py`` run before and after, results/pg_size.jsonl.)"""
    return f"FROM search_vectors v WHERE v.doc_id = ANY(ARRAY({docs}))"

"""The live set on PostgreSQL: what search "now" reads, kept apart from the whole history (migration m006).

Search cost would otherwise grow with everything ever written: a term's postings and the vectors of every
text any revision ever had. The SQLite engine keeps a live FTS5 table and ``search_live_vectors`` for this;
here, inside each batch's transaction, with the rows the indexer writes (``pg/keyword.py``):

- ``search_live``: each vault's docs used by at least one current chunk row (``search_rows.died IS NULL``),
  how many such rows use each, and its length (what BM25 reads per doc, in one place); a vector search "now"
  reads the vectors of these docs from ``search_vectors`` by its key (``pg/vectors.py``);
- ``search_live_terms`` (m013, ``pg/postings.py``): the postings row of every doc in ``search_live`` (for any
  vault), moved there from ``search_doc_terms`` as the doc enters the live set and back as it leaves it, under a
  GIN index of its own: what a keyword search "now" reads (m006 to m013 kept ``search_live_postings``, a second
  copy of the live docs' postings).

(m006 to m013 also kept ``search_live_vectors``, a second copy of the live docs' vectors; m014 dropped it.)

A doc enters when its first current row is written and leaves when its last one dies (a later revision, a
deletion, a rename); a purge or reindex rebuilds them with the rest of the index, and m006 computes them from an
existing index (``rebuild``, which is also the definition the tests compare the kept tables with).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from . import spans
from .catalog import remembered
from .postings import COLUMNS, LEAVE_ALL, enter


def pgvector_schema(con: Any) -> str | None:
    """The schema of the pgvector extension when this vaultsync schema's vectors use it (None: the fallback); asked
    once per connection when found (``catalog.remembered``: every vector search needs it)."""

    def ask() -> str | None:
        row = con.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'vector' AND EXISTS (SELECT 1 FROM pg_attribute "
            "WHERE attrelid = to_regclass('search_vectors') AND attname = 'vec' AND NOT attisdropped)"
        ).fetchone()
        return None if row is None else row[0]

    return remembered(con, "pgvector schema", ask)


def _raw(con: Any) -> Any:
    """The psycopg connection under a store connection (or the connection itself)."""
    return con.raw if hasattr(con, "raw") else con


def add(con: Any, vault_id: int, batch_id: int, docs: list[int], lengths: dict[int, int]) -> None:
    """Rows using ``docs`` (one entry per row) became current in the vault at batch ``batch_id``; ``lengths``: each
    doc's length in tokens. One statement: the counts, with the new docs' postings rows (moved to
    ``search_live_terms`` when live in no other vault) and spans (``pg/spans.py``)."""
    if not docs:
        return
    counts = Counter(docs)
    ids = list(counts)
    con.raw.execute(
        f"""WITH k AS (INSERT INTO search_live (vault_id, doc_id, rows, length)
                SELECT %(v)s, d, n, k FROM unnest(%(d)s::bigint[], %(n)s::bigint[], %(k)s::integer[]) AS u(d, n, k)
                ON CONFLICT (vault_id, doc_id) DO UPDATE SET rows = search_live.rows + excluded.rows
                RETURNING doc_id, (xmax = 0) AS inserted),
            lt AS (DELETE FROM search_doc_terms t WHERE t.doc IN (SELECT doc_id FROM k WHERE inserted)
                RETURNING {COLUMNS}),
            li AS (INSERT INTO search_live_terms ({COLUMNS}) SELECT {COLUMNS} FROM lt){spans.ENTER}
            SELECT count(*) FROM k""",
        {"v": vault_id, "b": batch_id, "d": ids, "n": list(counts.values()), "k": [lengths[d] for d in ids]},
    )


def remove(con: Any, vault_id: int, batch_id: int, docs: list[int]) -> None:
    """Rows using ``docs`` (one entry per row) stopped being current in the vault at batch ``batch_id``: one
    statement (a doc whose last row it was leaves, its postings row moved back to ``search_doc_terms`` when it is
    live in no other vault, and its span ends)."""
    if not docs:
        return
    counts = Counter(docs)
    con.raw.execute(
        f"""WITH u AS (SELECT d, n FROM unnest(%(d)s::bigint[], %(n)s::bigint[]) AS u(d, n)),
                gone AS (DELETE FROM search_live l USING u WHERE l.vault_id = %(v)s AND l.doc_id = u.d
                         AND l.rows <= u.n RETURNING l.doc_id),
                less AS (UPDATE search_live l SET rows = l.rows - u.n FROM u WHERE l.vault_id = %(v)s
                         AND l.doc_id = u.d AND l.rows > u.n),
                gt AS (DELETE FROM search_live_terms t WHERE t.doc IN (SELECT doc_id FROM gone) AND NOT EXISTS
                       (SELECT 1 FROM search_live o WHERE o.doc_id = t.doc AND o.vault_id <> %(v)s)
                       RETURNING {COLUMNS}),
                gi AS (INSERT INTO search_doc_terms ({COLUMNS}) SELECT {COLUMNS} FROM gt){spans.LEAVE}
           SELECT count(*) FROM gone""",
        {"d": list(counts), "n": list(counts.values()), "v": vault_id, "b": batch_id},
    )


def clear(con: Any) -> None:
    raw = _raw(con)
    raw.execute("DELETE FROM search_live")
    if _has_terms(raw):  # (its rows are the live docs' postings: moved back, never dropped)
        raw.execute(LEAVE_ALL)
    if raw.execute("SELECT to_regclass(%s)", (spans.TABLE,)).fetchone()[0] is not None:  # m007's
        raw.execute(f"DELETE FROM {spans.TABLE}")


LIVE_FROM_ROWS = """
INSERT INTO search_live (vault_id, doc_id, rows, length)
    SELECT r.vault_id, r.doc_id, count(*), min(d.length) FROM search_rows r JOIN search_docs d ON d.id = r.doc_id
    WHERE r.died IS NULL GROUP BY r.vault_id, r.doc_id;
"""
"""The live docs computed from ``search_rows`` alone."""


def _has_terms(raw: Any) -> bool:
    """Whether the database has m013's ``search_live_terms`` (m006 runs before it)."""
    return raw.execute("SELECT to_regclass('search_live_terms') IS NOT NULL").fetchone()[0]


def rebuild(con: Any) -> None:
    """The tables computed from the rest of the index (m006 fills them so; the tests compare with it)."""
    raw = _raw(con)
    clear(raw)
    raw.execute(LIVE_FROM_ROWS)
    if _has_terms(raw):
        raw.execute(enter("SELECT doc_id FROM search_live"))


def create(con: Any) -> None:
    """m006's table, filled from the existing index. (m006 made ``search_live_vectors`` too, which m014 drops: it
    is not made now, as m014 runs right after it on any database that lacks m006.)"""
    from .ranking import SHORT_BYTES

    con.execute("""
    CREATE TABLE search_live (
        vault_id bigint NOT NULL,
        doc_id   bigint NOT NULL,
        rows     bigint NOT NULL,                 -- current chunk rows of the vault using the doc
        length   integer NOT NULL,                -- the doc's tokens (search_docs.length), read with the rows
        PRIMARY KEY (vault_id, doc_id)
    );
    CREATE INDEX search_live_by_doc ON search_live (doc_id);
    """)
    rebuild(con)
    if con.execute("SELECT to_regclass('search_postings')").fetchone()[0] is not None:  # (none once m013 ran)
        con.execute(f"""
        CREATE TABLE search_live_postings (term text COLLATE "C" NOT NULL, doc bigint NOT NULL, tf integer NOT NULL);
        INSERT INTO search_live_postings (term, doc, tf) SELECT p.term, p.doc, p.tf FROM search_postings p
            WHERE p.doc IN (SELECT doc_id FROM search_live);
        CREATE INDEX search_live_postings_by_term_doc ON search_live_postings (term, doc) INCLUDE (tf)
            WHERE octet_length(term) <= {SHORT_BYTES};
        CREATE INDEX search_live_postings_long ON search_live_postings (left(term, 256), doc)
            WHERE octet_length(term) > {SHORT_BYTES};
        CREATE INDEX search_live_postings_by_doc ON search_live_postings (doc);
        """)
    con.execute("ANALYZE search_live, search_stats")

"""Vector search on PostgreSQL: the SQLite engine's vectors, ranked to the same answers at any cutoff.

Each distinct indexed text (``search_docs``) has one int8 vector, made by the store's embedder exactly as
the SQLite engine makes it (``search.embedding.write_vectors``) and written to ``search_vectors.embedding``
(``bytea``, migration m004); ``search_meta`` names the embedder, as in SQLite. It is kept in one form: with pgvector,
a ``halfvec`` in ``vec`` (m017: a trigger turns each written ``embedding`` into it and leaves ``embedding`` empty;
before m017 ``vec`` was generated beside the bytes), without pgvector the bytes.

Ranking at a cutoff, over the docs of exactly the visible chunk rows (of the allowed notes):

- **with pgvector** (the extension could be created when m004 ran): ``search_vectors.vec`` is a pgvector
  ``halfvec`` generated from ``embedding`` (m004 made it a ``vector``, twice the bytes; m013 halved it), and
  pgvector's exact ``cosine_distance`` (a sequential scan of the visible docs, no approximate index) picks the
  candidates: the ``limit`` nearest and every doc within ``MARGIN`` of the last of them;
- **without pgvector** (``VAULTSYNC_PG_VECTORS=python`` when the migration ran, or no extension to create):
  every visible doc is a candidate, its ``embedding`` read and compared in Python.

Each vector is kept once, in ``search_vectors`` (m014 dropped the copies m006 and m007 kept beside the live docs
and in the spans), and what is read is bounded by the vault, not the history: "now" (unfiltered) the current
docs (``search_live``, ``pg/live.py``, m006), a past cutoff (unfiltered, no validity overlay) the docs visible
then (their spans of visibility, ``pg/spans.py``, m007), each doc's vector then read from ``search_vectors`` by
its key (``spans.by_key``); with a filter or an overlay, the docs of the visible rows up
to ``search_stats.max_doc``.

Either way the candidates' scores are then computed by ``search.vector.similarity``, sqlite-vec's own
arithmetic in Python (pgvector sums and divides in another order, so its distances can differ from
sqlite-vec's in the last float32 bit), and the rows are ordered as the SQLite engine orders them
(``search.vector.best_rows``): same chunks, same order, same scores, bit for bit, on both paths.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from array import array
from typing import Any

from ...embed.embedders import Embedder
from ..search.keyword import Scored
from ..search.snapshot import Snapshot, rows_source
from ..search.vector import best_rows, query_vector, searchable, similarity
from . import spans
from .live import pgvector_schema
from .ranking import max_doc

MARGIN = 1e-5
"""How far past the ``limit``-th pgvector distance candidates are taken: pgvector's and sqlite-vec's
distances differ by less than a float32 rounding of a number at most 2 (about 2.4e-7), so any doc
sqlite-vec would rank in the best ``limit`` is within twice that of pgvector's edge."""

logger = logging.getLogger(__name__)

ENV = "VAULTSYNC_PG_VECTORS"
"""``python``: a migration run with it set stores no pgvector column (the fallback), whatever is installed."""


def add_pgvector(con: Any) -> bool:
    """Inside migration m004: create the extension if it can be, and the ``vec`` column generated from each
    doc's int8 vector; False (the fallback) when it cannot or ``VAULTSYNC_PG_VECTORS=python``."""
    import psycopg

    if os.environ.get(ENV, "").strip().lower() == "python":
        return False
    try:
        with con.transaction():  # a savepoint: a refusal leaves the migration's transaction usable
            con.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:  # not installed, or the extension is untrusted and this role may not create it
        why = getattr(getattr(exc, "diag", None), "message_primary", None) or str(exc).strip().splitlines()[0]
        logger.warning(
            "vector search compares every vector in Python: the pgvector extension could not be created "
            "(%s); this database keeps that choice (have an administrator run CREATE EXTENSION vector "
            "before the first import to use it)",
            why,
        )
        return False
    schema = con.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    ).fetchone()[0]
    kind = f'"{schema}".vector'
    con.execute(f"""
    CREATE FUNCTION vaultsync_int8_vector(b bytea) RETURNS {kind} LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
    $$ SELECT (array_agg(((get_byte(b, i) + 128) % 256) - 128 ORDER BY i))::integer[]::{kind}
       FROM generate_series(0, length(b) - 1) AS i $$;
    ALTER TABLE search_vectors ADD COLUMN vec {kind} GENERATED ALWAYS AS (vaultsync_int8_vector(embedding)) STORED;
    """)
    return True


def halve(con: Any) -> None:
    """Inside migration m013: ``search_vectors.vec`` generated as a ``halfvec`` (int8 components are exact in half
    precision: the same distances from half the bytes of m004's ``vector``), where the store's vectors use pgvector.
    The function names nothing outside ``pg_catalog`` unqualified: ``pg_restore`` runs it with an empty
    ``search_path`` while it fills the generated column."""
    schema = pgvector_schema(con)
    if schema is None:
        return
    half = f'"{schema}".halfvec'
    con.execute(f"""
    CREATE OR REPLACE FUNCTION vaultsync_int8_halfvec(b bytea) RETURNS {half} LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
    $$ SELECT (array_agg(((get_byte(b, i) + 128) % 256) - 128 ORDER BY i))::integer[]::"{schema}".vector::{half}
       FROM generate_series(0, length(b) - 1) AS i $$;
    ALTER TABLE search_vectors DROP COLUMN vec;
    ALTER TABLE search_vectors ADD COLUMN vec {half} GENERATED ALWAYS AS (vaultsync_int8_halfvec(embedding)) STORED;
    """)


HELD = "v.vec::real[]"
"""A doc's vector as pgvector holds it (``v``: its row of ``search_vectors``), its int8 components as reals (exact in
half precision), read where the store's vectors use pgvector: m017 left no bytes beside it."""


def int8(held: Any) -> bytes:
    """A vector's int8 bytes, from the bytes (without pgvector) or from the reals of ``HELD``."""
    return array("b", map(int, held)).tobytes() if isinstance(held, list) else bytes(held)


def one_form(con: Any) -> None:
    """Inside migration m017: each vector kept in one form. Where the store's vectors use pgvector, ``vec`` (a
    ``halfvec``, m013) becomes a plain column and the bytes it was generated from are dropped (the table written
    anew: a dropped column keeps its bytes in every row until then), and a trigger makes each written ``embedding``
    into ``vec`` and leaves ``embedding`` empty: writers write the int8 bytes as before, with or without pgvector.
    Without pgvector the bytes are the one form, and the trigger lets them through. Its function names its schema's
    function in full (the trigger runs under any ``search_path``)."""
    schema = pgvector_schema(con)
    here = con.execute("SELECT current_schema()").fetchone()[0]
    into = f'NEW.vec := "{here}".vaultsync_int8_halfvec(NEW.embedding); NEW.embedding := NULL;' if schema else ""
    con.execute(f"""
    CREATE OR REPLACE FUNCTION vaultsync_one_vector() RETURNS trigger LANGUAGE plpgsql AS
    $$ BEGIN {into} RETURN NEW; END $$;
    DROP TRIGGER IF EXISTS search_vectors_one_form ON search_vectors;
    CREATE TRIGGER search_vectors_one_form BEFORE INSERT ON search_vectors
        FOR EACH ROW EXECUTE FUNCTION vaultsync_one_vector();
    """)
    generated = (
        "SELECT attgenerated <> '' FROM pg_attribute WHERE attrelid = 'search_vectors'::regclass AND attname = 'vec'"
    )
    if schema is None or not con.execute(generated).fetchone()[0]:  # (safe to run again)
        return
    con.execute("""
    ALTER TABLE search_vectors ALTER COLUMN vec DROP EXPRESSION;
    ALTER TABLE search_vectors ALTER COLUMN vec SET NOT NULL;
    ALTER TABLE search_vectors DROP COLUMN embedding;
    ALTER TABLE search_vectors ADD COLUMN embedding bytea;
    CLUSTER search_vectors USING search_vectors_pkey;
    """)


def _ints(blob: bytes) -> list[int]:
    return [b - 256 if b > 127 else b for b in blob]


def rank(
    con: Any, snap: Snapshot, embedder: Embedder, query: str, allowed: set[int] | None, limit: int
) -> list[Scored]:
    """``search.vector.rank`` on this engine: the ``limit`` visible chunks (of allowed notes) nearest the query."""
    q = searchable(embedder, query, allowed, limit)
    if q is None:
        return []
    schema = pgvector_schema(con.raw)
    by_key = allowed is None and not snap.removed and not snap.added  # the docs from a table bounded by the vault
    if by_key:  # now: the live docs (m006); a past cutoff: the docs visible then, from their spans (m007)
        distance = None if schema is None else _distance(schema, f'v.vec::"{schema}".halfvec', "halfvec")
        distances, params = live_docs(snap, distance) if snap.live else spans.visible(snap, distance)
    else:
        distances, params = _visible(con, snap, allowed, schema)
    with spans.by_index(con.raw) if by_key else contextlib.nullcontext():
        if schema is None:
            docs = con.execute(distances, params).fetchall()
        else:  # distances of every visible doc; the int8 vectors of the few candidates alone leave the database
            near = _nearest(con, distances, {**params, "q": _ints(q)}, limit)
    if schema is not None:
        docs = con.raw.execute(
            f"SELECT doc_id, {HELD} FROM search_vectors v WHERE doc_id = ANY(%s)", (near,)
        ).fetchall()
    scores = sorted(((similarity(int8(blob), q), int(doc)) for doc, blob in docs), reverse=True)
    if len(scores) > limit:  # every doc tied with the ``limit``-th stays until rows are ordered
        edge = scores[limit - 1][0]
        scores = [s for s in scores if s[0] >= edge]
    return best_rows(con, snap, allowed, {doc: score for score, doc in scores}, limit) if scores else []


def _distance(schema: str, column: str, kind: str) -> str:
    """pgvector's cosine distance of ``column`` (of type ``kind``) to the query ``:q``, made a vector once: a
    subquery (an InitPlan), as a prepared statement's generic plan would convert the parameter again for every
    row (psycopg prepares a statement run five times; PostgreSQL then plans it once for any parameters)."""
    return f'"{schema}".cosine_distance({column}, (SELECT :q::integer[]::"{schema}".vector::"{schema}".{kind}))'


def live_docs(snap: Snapshot, distance: str | None) -> tuple[str, dict[str, Any]]:
    """SQL selecting ``(doc_id, d)``, ``distance`` (of ``v.vec``) of each current doc of the vault that has a vector,
    or without pgvector (``distance`` None) ``(doc_id, embedding)``; and its parameters. The docs come from the live
    set (``search_live``, m006), their vectors from ``search_vectors`` by its key (``spans.by_key``:
    a scan of every vector of the history would cost what the history holds)."""
    column = "v.embedding" if distance is None else f"{distance} AS d"
    docs = "SELECT l.doc_id FROM search_live l WHERE l.vault_id = :vault"
    return f"SELECT v.doc_id, {column} {spans.by_key(docs)}", {"vault": snap.vault_id}


def _visible(con: Any, snap: Snapshot, allowed: set[int] | None, schema: str | None) -> tuple[str, dict[str, Any]]:
    """SQL selecting ``(doc_id, d)`` (the distance) of the visible docs of the allowed notes, or with a validity
    overlay (from their rows); without pgvector (``schema`` None) ``(doc_id, embedding)``."""
    source, params = rows_source(snap, allowed)
    bound = max_doc(con, snap)  # docs written after the cutoff cannot be visible at it (doc ids grow with time)
    visible = f"FROM search_vectors v WHERE v.doc_id IN (SELECT doc_id FROM ({source}) s)"
    if bound is not None:
        visible, params = visible + " AND v.doc_id <= :maxdoc", {**params, "maxdoc": bound}
    if schema is None:
        return f"SELECT v.doc_id, v.embedding {visible}", params
    # halfvec: m013 made every doc's so (m004's ``vector`` read as one before it)
    distance = _distance(schema, f'v.vec::"{schema}".halfvec', "halfvec")
    if not snap.live and allowed is None:  # the visible docs up to the cutoff's highest, nearest first (in this
        # form PostgreSQL hashes the visible docs and sorts only their distances, top-N; as one flat query it
        # sorted every vector with its distance, on disk)
        upto = "" if "maxdoc" not in params else " WHERE v.doc_id <= :maxdoc"
        return (
            f"SELECT c.doc_id, c.d FROM (SELECT v.doc_id, {distance} AS d FROM search_vectors v{upto} "
            f"OFFSET 0) AS c WHERE c.doc_id IN (SELECT doc_id FROM ({source}) s)"
        ), params
    return f"SELECT v.doc_id, {distance} AS d {visible}", params


SPARE = 32
"""Nearest docs read past the ``limit``-th in one go (more are read only when all of them are within ``MARGIN``)."""


def _nearest(con: Any, distances: str, params: dict[str, Any], limit: int) -> list[int]:
    """The docs of ``distances`` (doc_id, d) among the ``limit`` nearest, and every doc within ``MARGIN`` of the
    last of them: the nearest ``limit + SPARE`` by one top-N sort (no table of every distance), and all those
    within the margin by a second statement in the rare case the spare ones are all within it."""
    found = con.execute(f"{distances} ORDER BY d LIMIT :n", {**params, "n": limit + SPARE}).fetchall()
    if len(found) < limit:
        return [int(doc) for doc, _ in found]
    edge = float(found[limit - 1][1]) + MARGIN
    if len(found) == limit + SPARE and float(found[-1][1]) <= edge:
        found = con.execute(
            f"SELECT doc_id, d FROM ({distances}) AS c WHERE d <= :edge", {**params, "edge": edge}
        ).fetchall()
    return [int(doc) for doc, d in found if float(d) <= edge]


def similarities(con: Any, embedder: Embedder, query: str, row_ids: list[int]) -> dict[int, float]:
    """``search.vector.similarities`` on this engine: row id → cosine similarity (rows without a vector left out)."""
    q = query_vector(embedder, query)
    if not any(q) or not row_ids:
        return {}
    held = "v.embedding" if pgvector_schema(con.raw) is None else HELD
    rows = con.execute(
        f"""SELECT r.id, {held} FROM search_rows r JOIN search_vectors v ON v.doc_id = r.doc_id
                          WHERE r.id IN (SELECT value FROM json_each(:ids))""",
        {"ids": json.dumps(row_ids)},
    )
    return {int(row_id): similarity(int8(blob), q) for row_id, blob in rows}


def set_meta(con: Any, key: str, value: str) -> None:
    con.raw.execute(
        "INSERT INTO search_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def catch_up(con: Any, embedder: Embedder) -> int:
    """Give ``embedder``'s vectors to every indexed text that has none yet (those indexed before m004, or all
    after ``reembed`` emptied the table); return how many were embedded. In the caller's transaction."""
    from ..search.embedding import doc_texts, write_vectors

    have = {int(r[0]) for r in con.raw.execute("SELECT doc_id FROM search_vectors")}
    docs = [(int(doc), text) for doc, text in doc_texts(con) if doc not in have]
    for start in range(0, len(docs), 512):
        write_vectors(con, embedder, docs[start : start + 512])
    con.raw.execute("DELETE FROM search_meta WHERE key = 'vectors_pending'")
    return len(docs)


def reembed(con: Any, embedder: Embedder) -> int:
    """Replace every vector with ``embedder``'s and record it as the store's embedder (the caller's transaction)."""
    con.raw.execute("SELECT set_config('vaultsync.purging', 'on', true)")
    con.raw.execute("DELETE FROM search_vectors")
    # a background embedder's are filled after (``backfill``): none of the old ones is left anywhere
    count = 0 if embedder.background else catch_up(con, embedder)
    set_meta(con, "embedder", embedder.embedder_id)
    set_meta(con, "embedder_signature", embedder.signature)
    con.raw.execute("SELECT set_config('vaultsync.purging', 'off', true)")
    return count


def drop_copies(con: Any) -> None:
    """Inside migration m014: the second copies of the vectors dropped (``search_live_vectors``, m006's, and the
    spans' ``vec``, m007's): search reads each doc's vector from ``search_vectors`` alone."""
    con.execute("DROP TABLE IF EXISTS search_live_vectors")
    if con.execute("SELECT to_regclass(%s)", (spans.TABLE,)).fetchone()[0] is not None:
        spans.drop_vectors(con)

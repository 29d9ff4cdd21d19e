"""What a reader's connection has found of the schema (``pg/catalog.py``): a relation a migration adds is asked of the
catalog until it is there, then never again on that connection (a search used to ask on every call)."""

from __future__ import annotations

import pytest

pgserver = pytest.importorskip("support.pgserver")
pytestmark = pytest.mark.pg


def test_a_relation_is_asked_for_until_found_then_remembered_per_connection() -> None:
    import psycopg

    from vaultsync.store.pg.catalog import has

    dsn = pgserver.fresh_or_skip("catalog")
    with psycopg.connect(dsn, autocommit=True) as con, psycopg.connect(dsn, autocommit=True) as other:
        assert not has(con, "added_later")
        other.execute("CREATE TABLE added_later (x integer)")  # a migration, from another connection
        assert has(con, "added_later")  # a no is asked again
        other.execute("DROP TABLE added_later")
        assert has(con, "added_later")  # a yes is remembered: not asked again on this connection
        assert not has(other, "added_later")  # each connection finds for itself


def test_the_vectors_pgvector_schema_is_asked_once_per_connection_when_found() -> None:
    """Every vector search needs pgvector's schema (``live.pgvector_schema``): found once, a connection remembers it."""
    import psycopg

    from vaultsync.store.pg.live import pgvector_schema
    from vaultsync.store.pg.schema import migrate

    dsn = pgserver.fresh_or_skip("catalogvec")
    with psycopg.connect(dsn) as con:
        migrate(con)
        con.commit()
    with psycopg.connect(dsn, autocommit=True) as con, psycopg.connect(dsn, autocommit=True) as other:
        schema = pgvector_schema(con)
        if schema is None:
            pytest.skip("no pgvector in this server")
        other.execute("ALTER TABLE search_vectors DROP COLUMN vec")  # (no migration does: here, to see it not asked)
        assert pgvector_schema(con) == schema  # remembered: not asked again on this connection
        assert pgvector_schema(other) is None  # asked on another

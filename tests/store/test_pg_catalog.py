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

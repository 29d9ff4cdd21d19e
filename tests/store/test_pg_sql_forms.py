"""tests/store/sql_forms.json is what a run on a real PostgreSQL server gives: the statements the store's shared
code hands to ``store/pg/compat.py``, each run there, with its PostgreSQL text (tests/support/sql_forms.py).

After changing a statement of the shared code, or compat itself, rewrite the file from a run:
``VAULTSYNC_WRITE_SQL_FORMS=1 .venv/bin/python -m pytest -q tests/store/test_pg_sql_forms.py``; the fast tier's
tests/store/test_sql_forms.py fails until then."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import pgserver, sql_forms

pytestmark = pytest.mark.pg


def test_the_recorded_forms_are_those_a_postgresql_run_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dsn = pgserver.fresh_or_skip("sqlforms")
    with sql_forms.on_postgres(monkeypatch) as on_postgres:
        sql_forms.run_vault(dsn, tmp_path / "pg")
    with sql_forms.on_sqlite() as on_sqlite:
        sql_forms.run_vault(tmp_path / "db" / "vaultsync.db", tmp_path / "sqlite")
    found = sql_forms.forms(on_sqlite, on_postgres)
    assert found["postgres"] and found["functions"]
    if os.environ.get(sql_forms.WRITE_ENV) == "1":
        sql_forms.dump(found)
    assert found == sql_forms.load(), (
        f"{sql_forms.FORMS} differs from this run: rewrite it with {sql_forms.WRITE_ENV}=1 and read the diff"
    )

"""Every statement the store's shared code runs on SQLite has its PostgreSQL form, checked on a real server: without
a server, in the fast tier (tests/support/sql_forms.py; the forms: tests/store/sql_forms.json, rewritten by
tests/store/test_pg_sql_forms.py). ``store/pg/compat.py`` rewrites statements by their text, so a statement edited
without a run on PostgreSQL would otherwise pass every SQLite test."""

from __future__ import annotations

from pathlib import Path

from support import sql_forms

from vaultsync.store.pg.compat import translate

REWRITE = f"{sql_forms.WRITE_ENV}=1 .venv/bin/python -m pytest -q tests/store/test_pg_sql_forms.py"


def test_every_statement_of_the_shared_code_has_its_checked_postgresql_form(tmp_path: Path) -> None:
    forms = sql_forms.load()
    with sql_forms.on_sqlite() as recorded:
        sql_forms.run_vault(tmp_path / "db" / "vaultsync.db", tmp_path / "vault")
    shared = {sql_forms.normal(sql): by for sql, by in sql_forms.shared(recorded, set(forms["functions"])).items()}
    assert shared, "the run went through none of the shared functions: tests/support/sql_forms.py is out of step"
    unchecked = {sql: sorted(by) for sql, by in shared.items() if sql not in forms["postgres"]}
    unchecked = {sql: by for sql, by in unchecked.items() if sql not in forms["sqlite_only"]}
    assert not unchecked, f"statements never run on PostgreSQL (then rewrite the forms: {REWRITE}): {unchecked}"


def test_compat_still_gives_each_checked_form() -> None:
    forms = sql_forms.load()["postgres"]
    changed = {sql: translate(sql)[0] for sql, pg in forms.items() if translate(sql)[0] != pg}
    assert not changed, f"store/pg/compat.py now translates these otherwise (then rewrite the forms: {REWRITE})"

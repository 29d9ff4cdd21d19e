"""``check`` reads a vault's revisions a page at a time (a few statements for thousands of revisions), not one
statement a revision: on a database far away (or freshly restored, without statistics) that was minutes."""

from __future__ import annotations

from pathlib import Path

import pytest

from vaultsync import Vault
from vaultsync.store import Store

REVISIONS = 1300
"""More than one page of ``store.view.CHECK_PAGE`` (1000)."""


@pytest.mark.slow
def test_check_reads_thousands_of_revisions_in_a_few_statements(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    count = REVISIONS
    for i in range(count):
        (root / f"n{i:04d}.md").write_text(f"# Note {i}\n\nabout topic {i % 7}\n", encoding="utf-8")
    db = tmp_path / "v.db"
    with Vault.open(db, root=root) as vault:
        vault.sync()
    damaged = count // 2
    store = Store(db, readonly=True)
    statements: list[str] = []

    def traced(cursor: object, sql: str, bindings: object) -> bool:
        statements.append(sql)
        return True

    store.db.con.exec_trace = traced  # every statement the connection runs
    with Vault(store, "notes", store.vault("notes").id, root) as vault:  # type: ignore[union-attr]
        assert vault.check() == []
    assert 0 < len(statements) < 100, len(statements)  # (the schema check reads each table once)
    import apsw

    con = apsw.Connection(str(db))  # one revision's recorded hash no longer matches its text: found, by name
    con.execute("DROP TRIGGER notes_no_update")
    con.execute("UPDATE notes SET content_hash = 'x' WHERE path = ?", (f"n{damaged:04d}.md",))
    con.close()
    with Vault.open(db, name="notes", readonly=True) as vault:
        problems = vault.check()
    assert any(f"n{damaged:04d}.md does not match its content hash" in p for p in problems), problems

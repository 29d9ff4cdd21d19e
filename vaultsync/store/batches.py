"""Batches as units: what one batch was (its source and detail) and which revisions it wrote, for undo."""

from __future__ import annotations

from typing import Any

import apsw

from .read import _NOTE_COLUMNS, Revision, _revision


def batch_info(con: apsw.Connection, vault_id: int, batch_id: int) -> dict[str, Any] | None:
    """The batch's id, known_at, source and detail (None: no such batch in the vault)."""
    row = con.execute("SELECT id, known_at, source, detail FROM batches WHERE vault_id = ? AND id = ?",
                      (vault_id, batch_id)).fetchone()
    return None if row is None else dict(zip(("batch_id", "known_at", "source", "detail"), row))


def written_by(con: apsw.Connection, vault_id: int, batch_id: int) -> list[Revision]:
    """Every revision the batch wrote (rename tombstones included), by path."""
    rows = con.execute(f"""SELECT {_NOTE_COLUMNS} FROM notes n JOIN batches b ON b.id = n.batch_id
                           WHERE n.vault_id = ? AND n.batch_id = ? ORDER BY n.path, n.id""",
                       (vault_id, batch_id)).fetchall()
    return [_revision(r) for r in rows]


def by_source(con: apsw.Connection, vault_id: int, source: str, limit: int) -> list[dict[str, Any]]:
    """The vault's last ``limit`` batches of ``source``, oldest first, each with its paths."""
    rows = con.execute("""SELECT b.id, b.known_at, b.source, b.detail, group_concat(n.path, char(10))
                          FROM batches b JOIN notes n ON n.batch_id = b.id
                          WHERE b.vault_id = ? AND b.source = ? GROUP BY b.id ORDER BY b.id DESC LIMIT ?""",
                       (vault_id, source, limit)).fetchall()
    return [{"batch_id": i, "known_at": k, "source": s, "detail": d, "paths": sorted(set(p.split("\n")))}
            for i, k, s, d, p in reversed(rows)]

"""Batches as units: what one batch was (its source and detail) and which revisions it wrote, for undo."""

from __future__ import annotations

from typing import Any

import apsw

from .read import _NOTE_COLUMNS, Revision, _revision


def batch_info(con: apsw.Connection, vault_id: int, batch_id: int, callers: bool = True) -> dict[str, Any] | None:
    """The batch's id, known_at, source, detail and caller (None: no such batch in the vault; ``callers``
    False: a database read as it is from before ``m007``, whose batches name no caller)."""
    row = con.execute(
        f"SELECT b.id, b.known_at, b.source, b.detail, {_caller(callers)} FROM batches b "
        "WHERE b.vault_id = ? AND b.id = ?",
        (vault_id, batch_id),
    ).fetchone()
    return None if row is None else dict(zip(("batch_id", "known_at", "source", "detail", "caller"), row))


def written_by(con: apsw.Connection, vault_id: int, batch_id: int) -> list[Revision]:
    """Every revision the batch wrote (rename tombstones included), by path."""
    rows = con.execute(
        f"""SELECT {_NOTE_COLUMNS} FROM notes n JOIN batches b ON b.id = n.batch_id
                           WHERE n.vault_id = ? AND n.batch_id = ? ORDER BY n.path, n.id""",
        (vault_id, batch_id),
    ).fetchall()
    return [_revision(r) for r in rows]


def by_source(
    con: apsw.Connection, vault_id: int, source: str | None, caller: str | None, limit: int, callers: bool = True
) -> list[dict[str, Any]]:
    """The vault's last ``limit`` batches of ``source`` and/or done for the MCP ``caller``, oldest first, each
    with its paths. ``source`` "mcp" means every batch an MCP tool wrote: those naming a caller, and the
    write tools' batches of a database from before callers were recorded (source ``write``)."""
    column = _caller(callers)
    where = ["b.vault_id = ?"]
    args: list[int | str] = [vault_id]
    if source == "mcp":
        where.append(f"({column} IS NOT NULL OR b.source = 'write')")
    elif source is not None:
        where.append("b.source = ?")
        args.append(source)
    if caller is not None:
        where.append(f"{column} = ?")
        args.append(caller)
    rows = con.execute(
        f"""SELECT b.id, b.known_at, b.source, b.detail, {column}, group_concat(n.path, char(10))
                           FROM batches b JOIN notes n ON n.batch_id = b.id
                           WHERE {" AND ".join(where)} GROUP BY b.id ORDER BY b.id DESC LIMIT ?""",
        (*args, limit),
    ).fetchall()
    return [
        {"batch_id": i, "known_at": k, "source": s, "detail": d, "caller": c, "paths": sorted(set(p.split("\n")))}
        for i, k, s, d, c, p in reversed(rows)
    ]


def _caller(callers: bool) -> str:
    return "b.caller" if callers else "NULL"

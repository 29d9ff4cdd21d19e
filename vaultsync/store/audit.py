"""Audit log heads: where each hardened-mode audit log's hash chain ends, kept in the store.

The log itself is a JSON-lines file (``vaultsync/hardened/audit.py``) that anyone with write access
to it could shorten or rewrite consistently; the head here (record count and the SHA-256 of the last
record) is moved forward in the same step as each append, so ``vaultsync audit verify`` can tell a
truncated tail or a re-chained log from an intact one. A head is keyed by the log's id (carried by
every record) and remembers the path it was last appended at.

Only ``Store`` calls these, on its own connection.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from .schema import has_table
from .values import AuditHead


def head(con: apsw.Connection, *, log_id: str | None = None, path: str | None = None) -> AuditHead | None:
    """The head of the log ``log_id``, else the one last appended at ``path``; None when the store has none
    (also for a database from before audit heads, opened read-only)."""
    if not has_table(con, "audit_heads"):
        return None
    cols = "log_id, path, records, head, updated_at"
    row = None
    if log_id is not None:
        row = con.execute(f"SELECT {cols} FROM audit_heads WHERE log_id = ?", (log_id,)).fetchone()
    if row is None and path is not None:
        row = con.execute(
            f"SELECT {cols} FROM audit_heads WHERE path = ? AND records > 0 ORDER BY updated_at DESC LIMIT 1", (path,)
        ).fetchone()
    return None if row is None else AuditHead(*row)


def advance(con: apsw.Connection, log_id: str, path: str, now: int, write: Callable[[int, str], str]) -> AuditHead:
    """Inside the caller's transaction: take the write lock, read the head, let ``write(records, head)``
    append the next record (and return its hash), then move the head past it.

    The first statement writes, so SQLite takes its write lock before reading the head: two processes
    appending to one log take turns, each building on the other's last record.
    """
    con.execute(
        "INSERT INTO audit_heads (log_id, path, records, head, updated_at) VALUES (?, ?, 0, '', ?) "
        "ON CONFLICT (log_id) DO NOTHING",
        (log_id, path, now),
    )
    records, last = con.execute("SELECT records, head FROM audit_heads WHERE log_id = ?", (log_id,)).fetchone()
    new_head = write(int(records), str(last))
    con.execute(
        "UPDATE audit_heads SET path = ?, records = ?, head = ?, updated_at = ? WHERE log_id = ?",
        (path, records + 1, new_head, now, log_id),
    )
    return AuditHead(log_id, path, int(records) + 1, new_head, now)

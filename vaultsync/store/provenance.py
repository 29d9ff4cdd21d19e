"""The reads a provenance receipt needs: which stored revision an answer came from, that revision by its id,
and the vault's purge records (the only way a revision leaves the store or changes its content)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import apsw

from .read import Revision, revision_by_id
from .schema import has_table
from .values import PurgeRecord


def locate(con: apsw.Connection, vault_id: int, keys: Sequence[tuple[str, str, int]]) -> list[int | None]:
    """The id of the revision stored at each ``(path, content hash, known_at)`` (None when none is).

    Within a vault a note never records the same content twice in a row, so a revision is one of these
    triples; should a note go A, B, A within one ``known_at``, the latest of those (the visible one) wins.
    """
    if not keys:
        return []
    rows = con.execute(
        """SELECT j.key, max(n.id) FROM json_each(:keys) j
           CROSS JOIN notes n ON n.vault_id = :v AND n.path = json_extract(j.value, '$[0]')
                              AND n.content_hash = json_extract(j.value, '$[1]')
           JOIN batches b ON b.id = n.batch_id AND b.known_at = json_extract(j.value, '$[2]')
           GROUP BY j.key""",
        {"v": vault_id, "keys": json.dumps([list(k) for k in keys])},
    ).fetchall()
    found = {int(key): note_id for key, note_id in rows}
    return [found.get(i) for i in range(len(keys))]


def revision_in_vault(con: apsw.Connection, vault_id: int, note_id: int) -> Revision | None:
    """Revision ``note_id`` if it exists and belongs to the vault."""
    row = con.execute("SELECT vault_id FROM notes WHERE id = ?", (note_id,)).fetchone()
    if row is None or row[0] != vault_id:
        return None
    return revision_by_id(con, note_id)


def purge_records(con: apsw.Connection, vault_id: int) -> list[PurgeRecord]:
    """The vault's purges, oldest first (none before the purges table existed)."""
    if not has_table(con, "purges"):
        return []
    return [
        PurgeRecord(*row)
        for row in con.execute(
            """SELECT id, at, command, horizon, revisions_changed, revisions_removed FROM purges
           WHERE vault_id = ? ORDER BY id""",
            (vault_id,),
        )
    ]

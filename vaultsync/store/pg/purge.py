"""Purge on PostgreSQL: the SQLite engine's rewrite (``store/purge.py``), run in one transaction here.

The rewriting steps are the SQLite engine's own functions (through ``pg.compat.Con``), so a purge
changes the same revisions in the same way on both engines. What differs: the append-only triggers
are not dropped but let through by ``vaultsync.purging``, a setting local to the purge's transaction;
the keyword index is rebuilt from the purged history inside the same transaction (``pg/keyword.py``); the
foreign keys its deletes check are indexed for good, not for the purge's transaction only (schema m008: a
``DROP INDEX`` here would lock every other server's readers out until the purge commits).

What a purge cannot promise here, and says: the old bytes stay in PostgreSQL's WAL, in WAL archives,
on streaming standbys and in backups until those are rotated; dead rows stay in the table files until
VACUUM reuses their space.
"""

from __future__ import annotations

import time
from typing import Any

from ...retention import Policy
from ...times import now_micros
from .. import purge as purging
from ..values import PurgeResult
from ..write import BatchWriter

LIMITS = (
    "PostgreSQL keeps the purged bytes in its WAL, in WAL archives, on standbys and in backups until they "
    "are rotated, and in dead rows until VACUUM reuses them"
)
"""What the engine says after every purge."""


def run(
    con: Any,
    vault_id: int,
    *,
    strings: list[str],
    note: str | None,
    before: int | None,
    policy: Policy | None = None,
    now: int | None = None,
    reindex: Any = None,
) -> PurgeResult:
    """Carry out one purge inside the caller's transaction (exactly one of the four kinds)."""
    started = time.perf_counter()
    command = purging.kind_of(strings, note, before, policy)
    result = PurgeResult(command)
    con.raw.execute("SELECT set_config('vaultsync.purging', 'on', true)")
    if strings and purging.paths_containing(con, vault_id, strings):
        from ...errors import ConfigError

        raise ConfigError(
            "that text is part of a note's path, which a text purge does not rename; "
            "remove that note with a note purge",
            argument="note",
        )
    writer = BatchWriter(con, vault_id, 0, "purge")
    if strings:
        purging.purge_strings(con, writer, vault_id, strings, result)
    elif note is not None:
        purging.purge_note(con, vault_id, note, result)
    elif before is not None:
        purging.purge_before(con, vault_id, before, result)
    elif policy is not None:
        before = purging.thin_by_policy(con, vault_id, policy, now, result, None)
    result.batches_removed = purging._collect_garbage(con, vault_id)
    if result.revisions_changed or result.revisions_removed:
        result.dictionary_retrained = purging._retrain_dictionary(con, writer, strings if strings else None)
        if reindex is not None:
            reindex(con)
    con.execute(
        """INSERT INTO purges (vault_id, at, command, detail, horizon, revisions_changed, revisions_removed, notes,
               batches_removed, scrubbed_at) VALUES (?,?,?,?,?,?,?,?,?,?)""",
        (
            vault_id,
            now_micros(),
            command,
            purging.detail_of(strings, before, policy),
            before,
            result.revisions_changed,
            result.revisions_removed,
            result.notes,
            result.batches_removed,
            now_micros(),
        ),
    )
    con.raw.execute("SELECT set_config('vaultsync.purging', 'off', true)")
    result.seconds = time.perf_counter() - started
    return result

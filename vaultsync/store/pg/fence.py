"""Never two writers: each batch proves, inside its own transaction, that its process still holds the vault's writer
lock (migration m009).

The advisory lock (``pg/lock.py``) lives as long as its session: when that session is lost (a restart, a failover,
``pg_terminate_backend``, a network drop) the server frees the lock, and another process may take it while the
first one still believes it holds it. So taking the lock also raises the vault's **writer epoch**
(``vault_heads.writer_epoch``) on the lock's session, and every batch, when it locks its vault's head row
``FOR UPDATE`` (as batches always did, to keep their order), compares that row's epoch with the one its process
got, and asks ``pg_locks`` whether the lock's session still holds the lock. Either differs: the batch rolls back
(``LockLost``) and that process writes nothing more until it has taken the lock again.

The epoch is raised by an ``UPDATE`` of the head row, so a process taking the lock over waits for a batch of the
previous holder still in flight (it holds the row): that batch commits before the new holder reads anything, and
the previous holder's next batch finds a newer epoch. Batches of a store that took no lock for the vault (the
store's contract tests, ``copy`` into a new database) are not fenced, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import LockLost


@dataclass(frozen=True)
class Fence:
    """What a batch checks: the epoch its process got, and the backend whose session holds the advisory lock."""

    epoch: int
    backend_pid: int
    key: int
    """The lock's key (``lock.lock_key``)."""
    vault: str = ""
    """The vault's name (for messages)."""


LOST = Fence(-1, -1, 0)
"""The lock's session was lost: every batch of the vault is refused until the lock is taken again."""

MIGRATION = "ALTER TABLE vault_heads ADD COLUMN IF NOT EXISTS writer_epoch bigint NOT NULL DEFAULT 0"
"""m009: each vault's writer epoch, raised by every process that takes its writer lock."""


def raise_epoch(lock_con: Any, vault: str, key: int) -> tuple[int, Fence] | None:
    """On the lock's session, right after taking the advisory lock: raise the vault's epoch; its id and the fence of
    its batches (None when the vault is not registered yet: its batches are not fenced)."""
    row = lock_con.execute(
        "INSERT INTO vault_heads (vault_id, writer_epoch) SELECT id, 1 FROM vaults WHERE name = %s "
        "ON CONFLICT (vault_id) DO UPDATE SET writer_epoch = vault_heads.writer_epoch + 1 "
        "RETURNING vault_id, writer_epoch, pg_backend_pid()",
        (vault,),
    ).fetchone()
    if row is None:
        return None
    return int(row[0]), Fence(int(row[1]), int(row[2]), key, vault)


def hold_head(raw: Any, vault_id: int, fence: Fence | None) -> None:
    """Lock the vault's head row ``FOR UPDATE`` inside the caller's transaction and, with a ``fence``, check it
    (``LockLost``: the transaction must roll back)."""
    raw.execute("INSERT INTO vault_heads (vault_id) VALUES (%s) ON CONFLICT DO NOTHING", (vault_id,))
    if fence is None:
        raw.execute("SELECT last_batch FROM vault_heads WHERE vault_id = %s FOR UPDATE", (vault_id,))
        return
    if fence is LOST:
        raise LockLost(
            "this process lost the vault's writer lock (its database session ended); nothing was "
            "written until it takes the lock again"
        )
    classid, objid = (fence.key >> 32) & 0xFFFF_FFFF, fence.key & 0xFFFF_FFFF
    epoch, holding = raw.execute(
        """SELECT h.writer_epoch, EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.pid = %s
                  AND l.granted AND l.classid = %s::oid AND l.objid = %s::oid AND l.objsubid = 1
                  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
           FROM vault_heads h WHERE h.vault_id = %s FOR UPDATE OF h""",
        (fence.backend_pid, classid, objid, vault_id),
    ).fetchone()
    named = f"vault '{fence.vault}'" if fence.vault else "the vault"
    if int(epoch) != fence.epoch:
        raise LockLost(
            f"another process took {named}'s writer lock after this one lost its database session; nothing was written"
        )
    if not holding:
        raise LockLost(
            f"this process lost {named}'s writer lock (its database session ended); nothing was "
            "written until it takes the lock again"
        )


__all__ = ["LOST", "MIGRATION", "Fence", "hold_head", "raise_epoch"]

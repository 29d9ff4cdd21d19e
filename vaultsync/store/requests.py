"""Write requests: how a process that does not hold a vault's writer lock asks the one that does to write.

One row of ``write_requests`` (the migration of that name in both engines) per request, in SQL both engines speak. Its
life: ``asked`` (the asker inserted it) → ``taken`` (the writer claimed it: a conditional update, so a
request is carried out at most once) → ``done`` (set inside the transaction of the batch that carried it
out, ``mark_done``) or ``failed``; or ``asked`` → ``dropped`` (the asker gave up before any writer took it,
by the same kind of conditional update, so the asker and the writer never both win). The asker deletes its
row once it has read the outcome; ``tidy`` removes what askers that died left behind.

Nothing here decides what a request means: ``vaultsync.live.handoff`` asks, carries out and recovers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import LockedError
from ..times import now_micros

STATES = ("asked", "taken", "done", "failed", "dropped")
FINAL = ("done", "failed", "dropped")

KEEP_FINISHED_US = 3600 * 1_000_000
"""Finished requests nobody read (the asker died) are deleted this long after they finished."""

_COLUMNS = (
    "id, kind, args, asker, caller, asked_at, take_by, state, taken_by, taken_at, steps, batch_id, answer, finished_at"
)


@dataclass(slots=True)
class Request:
    """One write request as stored (JSON columns decoded)."""

    id: int
    kind: str
    args: dict[str, Any]
    asker: dict[str, Any]
    caller: str | None
    asked_at: int
    take_by: int
    state: str
    taken_by: dict[str, Any] | None
    taken_at: int | None
    steps: list[dict[str, Any]] | None
    batch_id: int | None
    answer: dict[str, Any] | None
    finished_at: int | None

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> Request:
        (
            rid,
            kind,
            args,
            asker,
            caller,
            asked_at,
            take_by,
            state,
            taken_by,
            taken_at,
            steps,
            batch_id,
            answer,
            finished_at,
        ) = row
        return cls(
            int(rid),
            kind,
            _load(args) or {},
            _load(asker) or {},
            caller,
            int(asked_at),
            int(take_by),
            state,
            _load(taken_by),
            taken_at,
            _load(steps),
            batch_id,
            _load(answer),
            finished_at,
        )

    @property
    def final(self) -> bool:
        return self.state in FINAL


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class RequestTable:
    """The write requests of one vault in a store (either engine: ``store.db`` is its database)."""

    def __init__(self, store: Any, vault_id: int) -> None:
        self.store = store
        self.db = store.db
        self.vault_id = vault_id

    # ------------------------------------------------------------ the asker's side

    def ask(self, kind: str, args: dict[str, Any], *, asker: dict[str, Any], caller: str | None, take_by: int) -> int:
        """Insert a request (``asked``) and return its id; the writer is woken where the engine can (PostgreSQL)."""
        with self.db.atomic() as con:
            rows = con.execute(
                "INSERT INTO write_requests (vault_id, kind, args, asker, caller, asked_at, take_by, state) "
                "VALUES (?,?,?,?,?,?,?,'asked') RETURNING id",
                (self.vault_id, kind, _dump(args), _dump(asker), caller, now_micros(), take_by),
            ).fetchall()
            rid = int(rows[0][0])
            channel = getattr(self.store, "channel", None)
            if channel is not None:  # PostgreSQL: delivered when this commits, to the writer's LISTEN
                con.execute("SELECT pg_notify(?, ?)", (channel, json.dumps({"request": rid})))
        return rid

    def get(self, rid: int) -> Request | None:
        row = self.db.one(f"SELECT {_COLUMNS} FROM write_requests WHERE id = ? AND vault_id = ?", (rid, self.vault_id))
        return None if row is None else Request.of(row)

    def drop(self, rid: int) -> bool:
        """Give up a request no writer took yet (True); False when a writer took it first."""
        with self.db.atomic() as con:
            return bool(
                con.execute(
                    "UPDATE write_requests SET state = 'dropped', finished_at = ? "
                    "WHERE id = ? AND state = 'asked' RETURNING id",
                    (now_micros(), rid),
                ).fetchall()
            )

    def forget(self, rid: int) -> None:
        """Delete a request whose outcome the asker has read (it may hold note text)."""
        with self.db.atomic() as con:
            con.execute("DELETE FROM write_requests WHERE id = ? AND state IN ('done', 'failed', 'dropped')", (rid,))

    # ------------------------------------------------------------ the writer's side

    def waiting(self) -> list[int]:
        """The requests asked and not taken yet, oldest first."""
        return [
            int(r[0])
            for r in self.db.query(
                "SELECT id FROM write_requests WHERE vault_id = ? AND state = 'asked' ORDER BY id", (self.vault_id,)
            )
        ]

    def interrupted(self) -> list[Request]:
        """Requests taken by a writer that did not finish them (called by the holder of the writer lock: the
        writer that took them is gone)."""
        return [
            Request.of(r)
            for r in self.db.query(
                f"SELECT {_COLUMNS} FROM write_requests WHERE vault_id = ? AND state = 'taken' ORDER BY id",
                (self.vault_id,),
            )
        ]

    def take(self, rid: int, taker: dict[str, Any]) -> Request | None:
        """Claim a request for this writer; None when it is no longer asked (taken, or dropped by its asker) or
        its asker's deadline passed."""
        now = now_micros()
        with self.db.atomic() as con:
            taken = con.execute(
                "UPDATE write_requests SET state = 'taken', taken_by = ?, taken_at = ? "
                "WHERE id = ? AND vault_id = ? AND state = 'asked' AND take_by > ? RETURNING id",
                (_dump(taker), now, rid, self.vault_id, now),
            ).fetchall()
            if not taken:
                return None
            row = con.execute(f"SELECT {_COLUMNS} FROM write_requests WHERE id = ?", (rid,)).fetchone()
        return Request.of(row)

    def set_steps(self, rid: int, steps: list[dict[str, Any]]) -> None:
        """What the writer is about to write (path, hash before, hash after), before it writes: a writer that
        takes over after a crash puts those files back."""
        with self.db.atomic() as con:
            con.execute("UPDATE write_requests SET steps = ? WHERE id = ? AND state = 'taken'", (_dump(steps), rid))

    def finish(self, rid: int, state: str, answer: dict[str, Any] | None) -> None:
        """Record the outcome: ``failed`` (from ``taken``) or the answer of a ``done`` request (``done`` set here
        when no batch was written, else already set by ``mark_done``)."""
        assert state in ("done", "failed")
        with self.db.atomic() as con:
            con.execute(
                "UPDATE write_requests SET state = ?, answer = ?, finished_at = ? "
                "WHERE id = ? AND state IN ('taken', ?)",
                (state, _dump(answer), now_micros(), rid, state),
            )

    def tidy(self) -> int:
        """Drop asked requests whose asker's deadline passed (the asker died or gave up without saying so) and
        delete finished ones nobody read for ``KEEP_FINISHED_US``; how many rows were touched."""
        now = now_micros()
        with self.db.atomic() as con:
            dropped = con.execute(
                "UPDATE write_requests SET state = 'dropped', finished_at = ? "
                "WHERE vault_id = ? AND state = 'asked' AND take_by <= ? RETURNING id",
                (now, self.vault_id, now),
            ).fetchall()
            deleted = con.execute(
                "DELETE FROM write_requests WHERE vault_id = ? AND state IN ('done', 'failed', "
                "'dropped') AND finished_at < ? RETURNING id",
                (self.vault_id, now - KEEP_FINISHED_US),
            ).fetchall()
            return len(dropped) + len(deleted)


def mark_done(batch: Any, rid: int) -> None:
    """Inside a batch's transaction (``batch``: the engine's ``BatchWriter``): the request ``rid`` is done by this
    batch, so the request is marked carried out if and only if its batch commits."""
    batch.finish()  # the batch's id is known once its revisions are written
    if batch.batch_id is None:
        return
    marked = batch.con.execute(
        "UPDATE write_requests SET state = 'done', batch_id = ?, finished_at = ? "
        "WHERE id = ? AND state = 'taken' RETURNING id",
        (batch.batch_id, now_micros(), rid),
    )
    if not marked.fetchall():
        # another process put the request right meanwhile (this writer had lost its lock): the batch must not land
        raise LockedError(f"write request {rid} is no longer this process's to carry out; nothing was recorded")

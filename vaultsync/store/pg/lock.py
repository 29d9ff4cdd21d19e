"""One writer per vault on PostgreSQL: a session advisory lock, held on a connection of its own.

The key is a 64-bit hash of the schema and the vault's name. The holding session says who it is through
its ``application_name`` (what ``pg_stat_activity`` shows an operator) and, whole, in the ``writers``
table (pid, command, start, whether it watches), which ``holder_info`` reads for the backend that holds
the lock now. The server releases the lock when the holder's session ends (a killed process, a lost
connection), so another writer can take over at once. Each batch also locks its vault's head row
(``vault_heads``), so batch order holds whoever writes, and checks there that its process still holds this
lock (``pg/fence.py``): a writer whose session was lost writes nothing more until it has taken the lock again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from typing import Any

from ...dsn import command_line
from ...errors import LockedError
from .db import translated
from .fence import LOST, raise_epoch
from .session import lost


def lock_key(schema: str, vault: str) -> int:
    """The advisory lock key of a vault: signed 64 bits of blake2b over schema and name."""
    digest = hashlib.blake2b(f"vaultsync/{schema}/{vault}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PgWriterLock:
    """The ``Lock`` of the contract for the PostgreSQL engine."""

    def __init__(self, store: Any, vault: str) -> None:
        self.store = store
        self.vault = vault
        self.command: str | None = None
        self._con: Any = None
        self._vault_id: int | None = None

    @property
    def held(self) -> bool:
        """Held, as far as this process knows without asking the server (``alive`` asks): a session found lost,
        or a batch refused by the fence, lets it go."""
        if self._con is not None and (lost(self._con) or self.store.fences.get(self._vault_id) is LOST):
            self._forget()
        return self._con is not None

    def alive(self) -> bool:
        """Whether the lock's session still answers (one round trip); a lost one is let go (``held`` turns False and
        the vault's batches are refused until the lock is taken again)."""
        if not self.held:
            return False
        try:
            self._con.execute("SELECT 1")
        except Exception:
            self._forget()
            return False
        return True

    def _forget(self) -> None:
        """The session holding the lock is gone (and the lock with it): every batch is refused until it is retaken."""
        con, self._con = self._con, None
        if self._vault_id is not None:
            self.store.fences[self._vault_id] = LOST
        try:
            con.close()
        except Exception:
            pass

    def acquire(self, command: str | None = None, *, watching: bool = False) -> None:
        if not self.try_acquire(command, watching=watching):
            raise LockedError(
                f"vault '{self.vault}' is already being written by {self.holder() or 'another process'}; stop it first"
            )

    def try_acquire(self, command: str | None = None, *, watching: bool = False) -> bool:
        if self.held:
            return True
        described = command_line([command or self.command or " ".join(["vaultsync", *sys.argv[1:]])])
        con = self.store.connect(application_name=f"vaultsync writer: {described}"[:63])
        try:
            with translated(self.store.db.path, self.store.db.reach):
                fenced = self._take(con, described, watching)
        except BaseException:
            con.close()
            raise
        if fenced is False:
            con.close()
            return False
        self._con = con
        if fenced is not None:
            self._vault_id, self.store.fences[fenced[0]] = fenced
        return True

    def _take(self, con: Any, described: str, watching: bool) -> Any:
        """On the new session ``con``: the lock (False: another session holds it), the raised writer epoch (the
        vault's id and fence, None for a vault not registered yet), and who holds it, in ``writers``."""
        key = lock_key(self.store.schema, self.vault)
        if not con.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            return False
        fenced = raise_epoch(con, self.vault, key)  # waits for a batch of a previous holder still in flight
        info = {
            "pid": os.getpid(),
            "command": described,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "watching": watching,
        }
        con.execute(  # the heartbeat published before (``beat``) is kept until this holder publishes its own
            "INSERT INTO writers (vault, backend_pid, info) VALUES (%s, pg_backend_pid(), %s) "
            "ON CONFLICT (vault) DO UPDATE SET backend_pid = excluded.backend_pid, info = CASE "
            "WHEN writers.info::jsonb ? 'beat' THEN (excluded.info::jsonb || "
            "jsonb_build_object('beat', writers.info::jsonb -> 'beat'))::text ELSE excluded.info END",
            (self.vault, json.dumps(info)),
        )
        return fenced

    def publish(self, facts: dict[str, Any] | None) -> None:
        """The holder's heartbeat (None: none), in its ``writers`` row under ``beat``, stamped ``at`` with the
        database's clock (readers on other machines age it by the same clock); nothing while not held."""
        con = self._con
        if con is None:
            return
        if facts is None:
            con.execute(
                "UPDATE writers SET info = (info::jsonb - 'beat')::text "
                "WHERE vault = %s AND backend_pid = pg_backend_pid()",
                (self.vault,),
            )
            return
        con.execute(
            "UPDATE writers SET info = jsonb_set(info::jsonb, '{beat}', %s::jsonb || "
            "jsonb_build_object('at', extract(epoch FROM clock_timestamp())::float8))::text "
            "WHERE vault = %s AND backend_pid = pg_backend_pid()",
            (json.dumps(facts), self.vault),
        )

    def beat(self) -> tuple[dict[str, Any], float] | None:
        """The heartbeat last published for the vault and its age in seconds by the database's clock (None: none
        was)."""
        with self.store.db.atomic() as con:
            row = con.raw.execute(
                "SELECT info::jsonb -> 'beat', extract(epoch FROM clock_timestamp())::float8 "
                "- (info::jsonb -> 'beat' ->> 'at')::float8 FROM writers WHERE vault = %s AND info::jsonb ? 'beat'",
                (self.vault,),
            ).fetchone()
        if row is None or not isinstance(row[0], dict):
            return None
        facts = {k: v for k, v in row[0].items() if k != "at"}
        return facts, max(0.0, float(row[1]))

    def holder(self) -> str | None:
        info = self.holder_info()
        if info is None:
            return None
        try:
            return f"pid {info['pid']} ({info['command']}, since {info['started']})"
        except KeyError:
            return "another process"

    def holder_info(self) -> dict[str, object] | None:
        """What the session holding the lock recorded ({} if nothing), None when the lock is free or ours."""
        if self._con is not None:
            return None
        key = lock_key(self.store.schema, self.vault)
        classid, objid = (key >> 32) & 0xFFFF_FFFF, key & 0xFFFF_FFFF
        with self.store.db.atomic() as con:
            row = con.raw.execute(
                """SELECT l.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                   WHERE l.locktype = 'advisory' AND l.classid = %s::oid AND l.objid = %s::oid AND l.objsubid = 1
                     AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())""",
                (classid, objid),
            ).fetchone()
            if row is None:
                return None
            found = con.raw.execute(
                "SELECT info FROM writers WHERE vault = %s AND backend_pid = %s", (self.vault, row[0])
            ).fetchone()
        if found is None:
            return {"command": row[1]}
        info = json.loads(found[0])
        return info if isinstance(info, dict) else {}

    def release(self) -> None:
        if self._con is None:
            return
        if self._vault_id is not None:
            self.store.fences.pop(self._vault_id, None)
        try:
            try:  # free it, then say so: a process waiting to take over (``pg.follow.Wakeup``) tries at once
                self._con.execute("SELECT pg_advisory_unlock(%s)", (lock_key(self.store.schema, self.vault),))
                self._con.execute(
                    "SELECT pg_notify(%s, %s)", (self.store.channel, json.dumps({"released": self.vault}))
                )
            except Exception:  # the session is already gone: so is the lock
                pass
            self._con.close()  # ends the session: the server releases the advisory lock
        finally:
            self._con = None

    def __enter__(self) -> PgWriterLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

"""Learning of new batches on PostgreSQL without waiting out a poll: LISTEN on the schema's channel.

Each batch sends ``pg_notify(channel, {"vault_id", "batch_id"})`` inside its own transaction, so a
notification arrives if and only if the batch committed; a writer giving its lock up sends
``{"released": vault}`` (``pg/lock.py``), so a process waiting to take over tries at once. ``Wakeup`` is
the engine's ``contract.Wakeup``: its ``wait`` ends as soon as one arrives. Notifications are not stored:
one sent while the listening session was lost is gone, so a ``wait`` that had to connect again ends at
once too (True: look now), and callers read the batch log itself (``Follow.batches_after``) to learn what
is new, so nothing is missed. On a streaming standby, which refuses LISTEN and never delivers a
notification, ``wait`` waits its time out and the caller polls, as on SQLite.
"""

from __future__ import annotations

import time
from typing import Any

from ..read import BatchNews

SLICE_S = 0.1
"""With a ``stop`` event, how often a wait looks at it."""
RETRY_LISTEN_S = 30.0
"""After LISTEN was refused (a standby) or no session could be opened, how long before trying again."""


class Wakeup:
    """Wait for a commit announced on the schema's channel (any vault's batch, or a writer lock given up)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.reconnects = 0
        self.listening = False
        """Whether the last attempt to LISTEN succeeded (False on a standby: the caller polls)."""
        self._con: Any = None
        self._retry_at = 0.0
        self._lost = False

    def _connect(self) -> Any:
        """The listening session (None when none can listen now); notes a reconnect."""
        if self._con is not None and not self._con.closed:
            return self._con
        if self._con is not None:
            self._con, self._lost = None, True
        if time.monotonic() < self._retry_at:
            return None
        try:
            con = self.store.connect(application_name="vaultsync follower")
        except Exception:  # the database is away: poll, try again later
            self._retry_at = time.monotonic() + SLICE_S * 10
            return None
        try:
            con.execute(f'LISTEN "{self.store.channel}"')
        except Exception:  # a standby refuses LISTEN: poll the batch log there
            con.close()
            self.listening, self._retry_at = False, time.monotonic() + RETRY_LISTEN_S
            return None
        if self._lost:
            self.reconnects += 1
        self._con, self.listening = con, True
        return con

    def wait(self, timeout_s: float, stop: Any = None) -> bool:
        """True as soon as a notification arrives, or when the listening session had to be made again
        (what was announced meanwhile is lost: look now); False after ``timeout_s`` (or once ``stop``, a
        ``threading.Event``, is set) with none."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop.is_set()):
                return False
            step = min(left, SLICE_S) if stop is not None else left
            con = self._connect()
            if self._lost and con is not None:
                self._lost = False
                return True
            if con is None:
                stop.wait(step) if stop is not None else time.sleep(step)
                continue
            try:
                for _ in con.notifies(timeout=step, stop_after=1):
                    return True
            except Exception:  # the session was lost: the next look reconnects and says so
                try:
                    con.close()
                except Exception:
                    pass

    def drop_session(self) -> None:
        """Close the listening session as a lost one ends (the server restarted, the network dropped, an
        administrator's ``pg_terminate_backend``): the next ``wait`` connects again, counts a reconnect and
        ends at once, since what was announced meanwhile is gone. For an operator's failover hook, and for
        tests of the catch-up."""
        if self._con is not None:
            self._con.close()

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


class Listener:
    """Wait for batches of one vault written by any process, from ``after`` on."""

    def __init__(self, store: Any, vault_id: int, after: int, *, poll_s: float = 1.0) -> None:
        self.store = store
        self.vault_id = vault_id
        self.after = after
        self.poll_s = poll_s
        self.wakeup = Wakeup(store)

    @property
    def reconnects(self) -> int:
        return self.wakeup.reconnects

    def drop_session(self) -> None:
        """``Wakeup.drop_session``: the next ``wait`` reconnects and catches up from the batch log."""
        self.wakeup.drop_session()

    def wait(self, timeout_s: float) -> list[BatchNews]:
        """The vault's batches after the last reported one, waiting up to ``timeout_s`` for one to commit."""
        found = self.store.batches_after(self.vault_id, self.after)  # catch up first: what came while away
        deadline = time.monotonic() + timeout_s
        while not found and time.monotonic() < deadline:
            self.wakeup.wait(min(self.poll_s, max(0.0, deadline - time.monotonic())))
            found = self.store.batches_after(self.vault_id, self.after)
        if found:
            self.after = found[-1].batch_id
        return found

    def close(self) -> None:
        self.wakeup.close()

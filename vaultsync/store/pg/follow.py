"""Learning of new batches on PostgreSQL without polling: LISTEN on the schema's channel.

Each batch sends ``pg_notify(channel, {"vault_id", "batch_id"})`` inside its own transaction, so a
notification arrives if and only if the batch committed. Notifications are not stored: one sent while
a listener was disconnected is lost. So ``Listener.wait`` answers with the batches themselves, read from
the batch log after the last one it reported (``Follow.batches_after``): after a reconnect, or on a
streaming standby (where no notification is ever delivered, and ``wait`` simply polls), nothing is missed.
"""

from __future__ import annotations

import time
from typing import Any

from ..read import BatchNews


class Listener:
    """Wait for batches of one vault written by any process, from ``after`` on."""

    def __init__(self, store: Any, vault_id: int, after: int, *, poll_s: float = 1.0) -> None:
        self.store = store
        self.vault_id = vault_id
        self.after = after
        self.poll_s = poll_s
        self.reconnects = 0
        self._con: Any = None

    def _connect(self) -> Any:
        if self._con is None or self._con.closed:
            con = self.store.connect(application_name="vaultsync follower")
            try:
                con.execute(f'LISTEN "{self.store.channel}"')
            except Exception:  # a standby refuses LISTEN: poll the batch log there
                con.close()
                return None
            if self._con is not None:
                self.reconnects += 1
            self._con = con
        return self._con

    def wait(self, timeout_s: float) -> list[BatchNews]:
        """The vault's batches after the last reported one, waiting up to ``timeout_s`` for one to commit."""
        found = self.store.batches_after(self.vault_id, self.after)  # catch up first: what came while away
        deadline = time.monotonic() + timeout_s
        while not found and time.monotonic() < deadline:
            con = self._connect()
            left = max(0.0, deadline - time.monotonic())
            if con is None:
                time.sleep(min(self.poll_s, left))
            else:
                try:
                    for _ in con.notifies(timeout=left, stop_after=1):
                        break
                except Exception:  # the connection was lost: reconnect, and the batch log says what was missed
                    self._con = None
            found = self.store.batches_after(self.vault_id, self.after)
        if found:
            self.after = found[-1].batch_id
        return found

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

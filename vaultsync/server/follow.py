"""Following the batch log: every server tells its subscribers about every batch, whoever wrote it.

The contract: after ``start()``, each batch of the vault is told to the notifier exactly once, in
order, whether this process wrote it (``catch_up()`` right after the batch) or another process did
(``poll()`` notices it: SQLite's ``PRAGMA data_version`` on the reader's connection changes when any
other connection commits, and reading it touches no table). What is told comes from the batch log
itself, so a server that takes over watching tells the last batches of the previous watcher before
its own, and a batch noticed twice is still told once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from ..store import BatchNews
from ..vault import Vault

logger = logging.getLogger(__name__)

POLL_S = 0.5
"""How often a server checks whether another process wrote a batch (one ``PRAGMA data_version``)."""

Reading = Callable[[], contextlib.AbstractContextManager[Vault]]
Tell = Callable[[list[BatchNews]], None]


class BatchFollower:
    """Tells ``tell`` about the vault's batches after the last one told, once each, oldest first."""

    def __init__(self, reading: Reading, tell: Tell) -> None:
        self._reading = reading
        self._tell = tell
        self._lock = threading.Lock()
        self.told: int | None = None
        """The last batch told (None before ``start``: nothing is told)."""
        self._version: int | None = None

    def start(self) -> None:
        """From now on: batches already in the log are not news."""
        with self._reading() as vault:
            version, last = vault.data_version(), vault.last_batch_id
        with self._lock:
            self._version, self.told = version, last

    def poll(self) -> None:
        """Tell what other processes wrote since the last look (cheap when nothing did)."""
        if self.told is None:
            return
        with self._reading() as vault:
            version = vault.data_version()
        if version != self._version:
            self._version = version  # a commit after this read changes it again: the next poll sees it
            self.catch_up()

    def catch_up(self) -> None:
        """Tell every batch after the last one told (call after writing one; any thread)."""
        with self._lock:
            while self.told is not None:
                with self._reading() as vault:
                    news = vault.batches_after(self.told)
                    last = vault.last_batch_id if not news else self.told
                if not news:
                    if last < self.told:  # a purge removed the last batches told: their ids come back
                        self.told = last
                    return
                try:
                    self._tell(news)
                except Exception:  # the event loop is gone: nobody is left to tell
                    logger.debug("could not tell subscribers about batches %d..%d", news[0].batch_id,
                                 news[-1].batch_id, exc_info=True)
                self.told = news[-1].batch_id

"""The writer role: which process records a vault's batches, and how every other one waits, takes over or writes.

One process at a time holds a vault's writer lock (an OS file lock, freed when the holder exits or is
killed); every batch is written under it. ``WriterRole`` is one process's part, and the only code
that decides it (``watch``, ``watch --wait``, ``serve --watch``, the write tools and ``Watcher`` all
ask it):

* ``take()``: hold the lock for good if it is free (never waits): this process is the **watcher**;
  ``take_for_watching()`` is the same for a starting ``Watcher``, refusing with the holder named;
* ``wait(stop)``: hold it, waiting while another process does (``watch --wait``);
* ``stand_by()`` then ``take_over()`` now and then: asked to watch while another process does,
  this process is a **reader** in standby and takes the lock once that process stops
  (``serve --watch``);
* ``write(path, text)``: write a note and record it. While another process holds the lock and
  watches the vault, that process writes and records it (``live.handoff``: this one waits for the
  batch, and does it itself if that process stops before taking it); while one holds it without
  watching (an import), wait up to ``handoff.WAIT_FOR_LOCK_S``, then refuse, naming what it does,
  before touching the file.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..disk.paths import writable_note_path
from ..errors import VaultsyncError
from ..sync import BatchSummary
from .handoff import perform, public_holder

if TYPE_CHECKING:
    from ..vault import Note, Vault

logger = logging.getLogger(__name__)

TAKE_OVER_EVERY_S = 1.0
"""How often a process standing by tries the writer lock (one non-blocking flock)."""

OnBatch = Callable[[BatchSummary], None]
Read = Callable[[str], "Note"]
Check = Callable[[bytes], None]
"""A check of the bytes a write replaces (``vaultsync.revisions.expecting``): raising refuses the write."""


class WriterRole:
    """This process's part in writing ``vault``: the holder of its writer lock (``role`` "watcher"), or
    not ("reader"), possibly standing by to take the lock over.

    ``on_batch`` is called after each batch a write here records (not the watcher's: it has its own).
    """

    def __init__(self, vault: Vault, *, on_batch: OnBatch | None = None) -> None:
        self.vault = vault
        self.on_batch = on_batch
        self.standby = False
        """Asked to watch: takes the lock over when the process holding it stops."""
        self.took_over_at: float | None = None
        """When this process took the lock over from another one (``time.time()``)."""
        self._holding = False
        self._next_try = 0.0

    # ------------------------------------------------------------ the lock

    @property
    def holding(self) -> bool:
        """True while this process holds the writer lock for good (it is the watcher)."""
        return self._holding

    @property
    def role(self) -> str:
        """``watcher`` (this process records the folder's changes) or ``reader`` (it only reads the store)."""
        return "watcher" if self._holding else "reader"

    def take(self) -> bool:
        """Hold the writer lock for good if it is free (never waits); True when held afterwards."""
        if not self._holding:
            self._holding = self.vault.lock.hold()
        return self._holding

    def take_for_watching(self) -> bool:
        """Hold the lock for a ``Watcher`` that starts: True when this call took it (the watcher frees it
        with ``release`` when it stops), False when this process already held it; LockedError naming
        the holder when another process does."""
        took = self.vault.lock.take()
        self._holding = True
        return took

    def retake(self) -> bool:
        """The watcher's lock went with a lost database session: take it again if it is free (True); False while
        another process holds it (StoreError while the database is away). This process keeps its role meanwhile."""
        return self.vault.lock.hold()

    def release(self) -> None:
        """Give the lock up (between batches of this process)."""
        if self._holding:
            self.vault.lock.release()
            self._holding = False

    def holder(self) -> dict[str, object] | None:
        """What the other process holding the lock says it does ({} if unreadable); None when free or ours."""
        return self.vault.lock.holder_info()

    # ------------------------------------------------------------ waiting and standing by

    def wait(
        self,
        stop: threading.Event,
        *,
        say: Callable[[str], object] = logger.warning,
        every_s: float = TAKE_OVER_EVERY_S,
    ) -> bool:
        """Hold the lock, waiting while another process does (trying it every ``every_s``) until it is
        free or ``stop`` is set; True when held. ``say`` gets one line when waiting starts and ends."""
        if self.take():
            return True
        say(
            f"vault '{self.vault.name}' is being watched by {self.vault.lock.holder() or 'another process'}; "
            "waiting to take over when it stops"
        )
        wakeup = self.vault.wakeup()  # PostgreSQL: a writer giving the lock up says so, and this tries at once
        try:
            while not self.take():
                wakeup.wait(every_s, stop)
                if stop.is_set():
                    return False
        finally:
            wakeup.close()
        say(f"the other watcher stopped; taking over vault '{self.vault.name}'")
        return True

    def stand_by(self) -> bool:
        """Ask to watch: take the lock if it is free (True: this process is the watcher); otherwise stand
        by (``take_over``)."""
        self.standby = True
        return self.take()

    def take_over(self) -> bool:
        """Standing by: try the lock (at most every ``TAKE_OVER_EVERY_S``); True when this call took it."""
        if not self.standby or self._holding or time.monotonic() < self._next_try:
            return False
        self.back_off(TAKE_OVER_EVERY_S)
        try:
            taken = self.take()
        except (OSError, VaultsyncError) as exc:  # the database is away: try again later
            logger.debug("could not try the writer lock: %s", exc)
            return False
        if taken:
            logger.warning("vault '%s': the watching process stopped; this server watches it now", self.vault.name)
            self.took_over_at = time.time()
        return taken

    def back_off(self, seconds: float) -> None:
        """Try the lock again no sooner than ``seconds`` from now (after a watcher failed to start)."""
        self._next_try = time.monotonic() + seconds

    def stop(self) -> None:
        """Stop standing by and give the lock up."""
        self.release()
        self.standby = False

    def status(self) -> dict[str, Any]:
        """``role`` and ``standby``, and ``took_over_at`` once this process took the lock over."""
        status: dict[str, Any] = {"role": self.role, "standby": self.standby}
        if self.took_over_at is not None:
            status["took_over_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.took_over_at))
        return status

    def describe_standby(self) -> str | None:
        """One line for the operator while this process stands by as a reader (None otherwise)."""
        if not self.standby or self._holding:
            return None
        holder = self.vault.lock.holder() or "another process"
        return (
            f"vault '{self.vault.name}' is being watched by {holder}; serving it as a reader, "
            "and watching it here if that process stops"
        )

    # ------------------------------------------------------------ writing

    def write(
        self, path: str, text: str, *, append: bool, read: Read | None = None, expected: str | None = None
    ) -> Note:
        """Create (or append to) a note and return it as recorded; ``read`` reads a recorded note back
        (default: this vault's ``read``); ``expected``: the revision the note must be at (``revisions``).
        See the module docstring for who records, and when a write is refused (LockedError, one line)."""
        rel = writable_note_path(path)  # a bad path is refused before anything else
        done = perform(
            self.vault, "write", {"path": rel, "text": text, "append": append, "expected": expected}, public=True
        )
        if done.here is not None:
            summary, note = done.here
            self._told(summary)
            return note
        return (read or self.vault.read)(done.answer["path"])

    def _told(self, summary: BatchSummary) -> None:
        if self.on_batch is not None:
            self.on_batch(summary)


__all__ = ["WriterRole", "public_holder"]

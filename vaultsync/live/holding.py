"""The paths a watcher holds back: a deletion that no add joined, or a copy of a note still on disk, waits a while
(``Watcher.hold_s``) and is re-checked with every flush meanwhile, so that an add arriving in a later flush still
joins it into a rename (``Plan.held``). What waits holds back the rest of its batch too (a batch is a state that
existed), so a hold is bounded: once the first of a run of holds is ``HOLD_ROUNDS`` holds old, nothing more is held
and the burst is recorded."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

logger = logging.getLogger("vaultsync.live.watcher")  # the watcher's lines, under its name

HOLD_ROUNDS = 3
"""A run of holds (each new deletion of a burst may start its own) ends this many holds after it began."""


class HeldPaths:
    """Held paths, the monotonic time until which each may be held, and when the burst they belong to began."""

    def __init__(self) -> None:
        self.until: dict[str, float] = {}
        self.first: float | None = None
        """``time.monotonic()`` of the first change of the burst held (delays are told from here)."""
        self._ends: float | None = None
        """When the run of holds ends, whatever joins it meanwhile."""
        self.resting: dict[str, float] = {}
        """Files left out while being written (``Plan``'s ``unsettled``), and since when: they wait as long as a
        run of holds at most, and are then recorded as read."""
        self._longest = 0.0

    def __len__(self) -> int:
        return len(self.until)

    def __iter__(self) -> Iterator[str]:
        return iter(self.until)

    def due_times(self) -> list[float]:
        """When each hold ends (the flushing thread wakes up then)."""
        return list(self.until.values())

    def expired(self) -> bool:
        """Whether a hold ended: its path is due for a batch now."""
        return bool(self.until) and min(self.until.values()) <= time.monotonic()

    def may_hold(self, path: str) -> bool:
        """Whether ``path`` may be left for a later batch: not held yet, or held less than its hold, and the run
        of holds it would join not over."""
        now = time.monotonic()
        if self._ends is not None and now >= self._ends:
            return False
        resting = self.resting.get(path)
        if resting is not None and now - resting >= self._longest:
            return False
        until = self.until.get(path)
        return until is None or until > now

    def keep(self, held: list[str], everything: bool, hold_s: float, first: float, unsettled: list[str]) -> None:
        """After a batch whose burst began at ``first``: what it held stays held (until its first hold ends), the
        rest was recorded; what it left out while being written keeps its first time."""
        now = time.monotonic()
        self._longest = HOLD_ROUNDS * hold_s
        self.resting = {path: self.resting.get(path, now) for path in unsettled}
        kept = {path: self.until.get(path, now + hold_s) for path in held} if not everything else {}
        if kept and not self.until:
            self._ends, self.first = now + HOLD_ROUNDS * hold_s, first
        elif kept and self.first is not None:
            self.first = min(self.first, first)
        elif not kept:
            self._ends = self.first = None
        self.until = kept
        if held:
            logger.debug("holding %s for a matching add", ", ".join(held))

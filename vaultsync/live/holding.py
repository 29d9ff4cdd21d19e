"""The paths a watcher holds back: a deletion that no add joined, or a copy of a note still on disk, waits a while
(``Watcher.hold_s``) and is re-checked with every flush meanwhile, so that an add arriving in a later flush still
joins it into a rename (``Plan.held``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

logger = logging.getLogger("vaultsync.live.watcher")  # the watcher's lines, under its name


class HeldPaths:
    """Held paths and the monotonic time until which each may be held."""

    def __init__(self) -> None:
        self.until: dict[str, float] = {}

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
        """Whether ``path`` may be left for a later batch: not held yet, or held less than its hold."""
        until = self.until.get(path)
        return until is None or until > time.monotonic()

    def keep(self, held: list[str], everything: bool, hold_s: float) -> None:
        """After a batch: what it held stays held (until its first hold ends), the rest was recorded."""
        until = time.monotonic() + hold_s
        kept = {path: self.until.get(path, until) for path in held}
        if not everything:
            self.until = kept
        else:  # a full scan recorded whatever was held
            self.until = {}
        if held:
            logger.debug("holding %s for a matching add", ", ".join(held))

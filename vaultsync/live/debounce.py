"""Collect dirty paths and release them as one set after a quiet period or a maximum wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(slots=True)
class Pending:
    """A set of dirty vault-relative paths and when they started and stopped arriving."""

    paths: set[str] = field(default_factory=set)
    """Vault-relative POSIX paths (files or folders) that may have changed."""
    first: float = 0.0
    """``time.monotonic()`` of the first change in the set (latency is measured from here)."""
    last: float = 0.0
    """``time.monotonic()`` of the latest change in the set."""


def collapse(paths: Iterable[str]) -> list[str]:
    """Sorted paths without those under another path of the set (a folder stands for its contents)."""
    out: list[str] = []
    for path in sorted(paths, key=lambda p: p.split("/")):
        if out and path.startswith(out[-1] + "/"):
            continue
        out.append(path)
    return out


class Debouncer:
    """Thread-safe dirty set: ``add`` from any thread, ``get`` from the one flushing thread.

    A set is released after ``step_s`` without new paths (quiet period) or ``max_s`` after its first
    path (maximum wait), whichever comes first, so constant writes cannot starve a batch. Modelled on
    ``watchdog/utils/event_debouncer.py`` with watchfiles' upper bound.
    """

    def __init__(self, step_s: float, max_s: float) -> None:
        self.step_s = step_s
        self.max_s = max(max_s, step_s)
        self._cv = threading.Condition()
        self._pending = Pending()
        self._closed = False

    def add(self, paths: Iterable[str]) -> None:
        paths = list(paths)
        if not paths:
            return
        now = time.monotonic()
        with self._cv:
            before = len(self._pending.paths)
            self._pending.paths.update(paths)
            if len(self._pending.paths) == before and before:
                self._pending.last = now
                return
            if not before:
                self._pending.first = now
            self._pending.last = now
            self._cv.notify()

    def put_back(self, pending: Pending) -> None:
        """Return a set whose batch failed; its paths stay dirty and keep their first time."""
        with self._cv:
            if self._pending.paths:
                pending.first = min(pending.first, self._pending.first)
                pending.last = max(pending.last, self._pending.last)
                pending.paths |= self._pending.paths
            self._pending = pending
            self._cv.notify()

    def get(self, timeout: float | None = None) -> Pending | None:
        """Wait for a due set; None when ``timeout`` passes first or the debouncer is closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while not self._closed:
                now = time.monotonic()
                if self._pending.paths:
                    due = min(self._pending.last + self.step_s, self._pending.first + self.max_s)
                    if now >= due:
                        return self._take()
                    wait = due - now
                else:
                    wait = None
                if deadline is not None:
                    if now >= deadline:
                        return None
                    wait = deadline - now if wait is None else min(wait, deadline - now)
                self._cv.wait(wait)
            return None

    def drain(self) -> Pending | None:
        """Take whatever is pending now, due or not."""
        with self._cv:
            return self._take() if self._pending.paths else None

    def close(self) -> None:
        """Wake ``get`` for good (pending paths stay available to ``drain``)."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    def snapshot(self) -> tuple[int, float | None]:
        """(number of pending paths, monotonic time of the first of them or None)."""
        with self._cv:
            return len(self._pending.paths), self._pending.first if self._pending.paths else None

    def _take(self) -> Pending:
        taken, self._pending = self._pending, Pending()
        return taken

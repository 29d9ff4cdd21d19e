"""How each watchdog observer says it lost events, turned into one call: ``DirtyHandler.lost`` (a full scan now).

watchdog 7.1 tells handlers nothing when events are lost, so each native observer is listened to where
it does notice:

- inotify (Linux): past ``fs.inotify.max_queued_events`` the kernel drops events and queues
  ``IN_Q_OVERFLOW``; watchdog logs WARNING ``INOTIFY_OVERFLOW`` on the logger
  ``watchdog.observers.inotify_c``, rebuilds its watches and sends no event. A filter on that
  logger hears it (``tests/live/test_overflow.py`` checks the text is still in watchdog's source).
- Windows: when its 64 kB buffer overflows, ``ReadDirectoryChangesW`` returns zero bytes; watchdog's
  ``DirectoryChangeReader`` queues the empty buffer and ``get_events`` skips it. Our reader's queue
  (``EmptyBufferQueue``) calls back on every empty buffer after the first (which only marks the reader
  started). This reaches into a private attribute (``_buf_queue``): there is no other way in.
- FSEvents (macOS): events flagged ``must_scan_subdirs``, ``is_user_dropped`` or ``is_kernel_dropped``
  mean "rescan"; ``FSEventsEmitter.queue_events`` ignores those flags. Our emitter checks them first.
- kqueue and polling: no signal (polling loses nothing; kqueue is only used where FSEvents is not).

Only the inotify path has run (on Linux, with a real overflow); the Windows and FSEvents classes are
defined only where watchdog can import them, and have never run here.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

logger = logging.getLogger(__name__)

INOTIFY_LOGGER = "watchdog.observers.inotify_c"
INOTIFY_OVERFLOW = "Inotify queue overflowed; filesystem events were lost"


class Listener(Protocol):
    root: str

    def lost(self) -> None: ...


_listeners: set[Any] = set()
_guard = threading.Lock()


def listen(handler: Listener) -> None:
    """Tell ``handler`` when its observer lost events (until ``forget``)."""
    with _guard:
        _listeners.add(handler)
        _install_inotify_filter()


def forget(handler: Listener) -> None:
    with _guard:
        _listeners.discard(handler)


def lost_under(path: str | bytes | None = None) -> None:
    """Events under the watched folder ``path`` (None: any, as inotify does not say which) were lost."""
    with _guard:
        chosen = list(_listeners)
    wanted = None if path is None else os.fsdecode(path).rstrip(os.sep)
    for handler in chosen:
        if wanted is None or handler.root.rstrip(os.sep) == wanted:
            handler.lost()


class _InotifyOverflow(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == INOTIFY_OVERFLOW:
            lost_under(None)
        return True  # the warning is still logged


_filter = _InotifyOverflow()


def _install_inotify_filter() -> None:
    target = logging.getLogger(INOTIFY_LOGGER)
    if _filter not in target.filters:
        target.addFilter(_filter)


class EmptyBufferQueue(queue.Queue):
    """A ``DirectoryChangeReader`` buffer queue calling ``on_overflow`` for every empty buffer after the first."""

    def __init__(self, on_overflow: Callable[[], None]) -> None:
        super().__init__()
        self._on_overflow = on_overflow
        self._started = False

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        if isinstance(item, tuple) and item and item[0] == b"":
            if self._started:
                self._on_overflow()
            self._started = True
        super().put(item, block, timeout)


def dropped(events: Iterable[Any]) -> bool:
    """Whether a batch of FSEvents native events says events were dropped (rescan needed)."""
    return any(
        getattr(e, "must_scan_subdirs", False)
        or getattr(e, "is_user_dropped", False)
        or getattr(e, "is_kernel_dropped", False)
        for e in events
    )


def native_observer() -> Any:
    """watchdog's native observer for this system, where it can lose events in a subclass that says so."""
    from watchdog.observers import Observer

    name = getattr(Observer, "__name__", "")
    if name == "FSEventsObserver":
        return _fsevents_observer()
    if name == "WindowsApiObserver":
        return _windows_observer()
    return Observer()


def _fsevents_observer() -> Any:  # pragma: no cover - macOS only
    from watchdog.observers.api import DEFAULT_OBSERVER_TIMEOUT, BaseObserver
    from watchdog.observers.fsevents import DEFAULT_FSEVENTS_LATENCY, FSEventsEmitter, FSEventsObserver

    class DropAwareFSEventsEmitter(FSEventsEmitter):
        def queue_events(self, timeout: Any, events: Any) -> None:  # type: ignore[override]  # macOS only; watchdog types it otherwise there
            if dropped(events):
                lost_under(self.watch.path)
            super().queue_events(timeout, events)

    class DropAwareFSEventsObserver(FSEventsObserver):
        def __init__(self) -> None:
            BaseObserver.__init__(
                self, DropAwareFSEventsEmitter, timeout=DEFAULT_OBSERVER_TIMEOUT, latency=DEFAULT_FSEVENTS_LATENCY
            )

    return DropAwareFSEventsObserver()


def _windows_observer() -> Any:  # pragma: no cover - Windows only
    from watchdog.observers.api import DEFAULT_OBSERVER_TIMEOUT, BaseObserver
    from watchdog.observers.read_directory_changes import WindowsApiEmitter, WindowsApiObserver
    from watchdog.observers.winapi import DirectoryChangeReader

    class DropAwareReader(DirectoryChangeReader):
        def __init__(self, path: str, *, recursive: bool) -> None:
            super().__init__(path, recursive=recursive)
            self._buf_queue = EmptyBufferQueue(lambda: lost_under(path))

    class DropAwareWindowsEmitter(WindowsApiEmitter):
        def on_thread_start(self) -> None:
            with self._lock:
                reader = DropAwareReader(self.watch.path, recursive=self.watch.is_recursive)
                self._reader = reader
            reader.start()

    class DropAwareWindowsApiObserver(WindowsApiObserver):
        def __init__(self) -> None:
            BaseObserver.__init__(self, DropAwareWindowsEmitter, timeout=DEFAULT_OBSERVER_TIMEOUT)

    return DropAwareWindowsApiObserver()

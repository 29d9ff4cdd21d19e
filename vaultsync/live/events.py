"""The one seam around watchdog: turn file-system events into dirty vault-relative paths.

Everything watchdog-specific lives here, so the watcher (and tests replaying scripted events) only
sees "these paths may have changed". Paths are re-checked on disk at flush time; event types are
never trusted beyond choosing which paths to mark.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserverVFS

from ..disk.capabilities import inotify_limit
from ..disk.ignore import recorded
from ..disk.paths import is_hidden, is_note_path, is_visible_folder
from . import overflow

logger = logging.getLogger(__name__)

# A folder moved out of the vault and back in keeps its inotify watch (same inode); watchdog then warns
# that it re-registers its own callback. Harmless for us (paths are re-checked on disk), so keep it quiet.
warnings.filterwarnings(
    "ignore", message="Callback with id .* already exists", category=RuntimeWarning, module="watchdog"
)

MarkDirty = Callable[[Iterable[str]], None]
"""Where dirty paths go (the debouncer's ``add``)."""

EVERYTHING = ""
"""The dirty "path" an observer records when it lost events: the watcher's next batch is a full scan."""

POLL_INTERVAL_S = 1.0
"""How often the polling observer walks the vault."""

_NOISE = frozenset({"opened", "closed_no_write"})
_WATCH_ERRORS = (errno.ENOSPC, errno.EMFILE, errno.ENFILE, errno.ENOMEM)


class NoteFilter:
    """Which event paths can matter: recorded files (notes and attachments) and folders, never dot-places,
    exactly as ``import`` sees them (``ignore.recorded``).

    Dot-files and dot-folders (``.obsidian/``, ``.trash/``, ``.git/``, ``.a.md.tmp``, ``.a.md.swp``), temporary
    names (``a.md~``, ``a.md.swp``, ``4913``) and what the vault's ``.vaultsyncignore`` names are ignored; an
    ignored name here that ``import`` stores would make the watcher and a reconcile scan disagree. Without a
    ``root``, only Markdown notes.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = root

    def __call__(self, rel: str, is_directory: bool) -> bool:
        if not rel or rel == "." or rel.startswith("../"):
            return False
        if is_directory:
            return is_visible_folder(rel)
        return is_note_path(rel) if self.root is None else recorded(self.root)(rel)


class DirtyHandler(FileSystemEventHandler):
    """Runs on watchdog's dispatcher thread: O(1) per event, marks paths dirty, nothing else.

    Every event arrives in ``on_any_event`` (no pattern handler: its default ignore policy drops an
    atomic save whose temp name is ignored). Moves mark both ends; a folder event marks the folder,
    which the batch re-scans (present) or treats as "everything under it is gone" (vanished).
    """

    def __init__(self, root: str | os.PathLike[str], mark: MarkDirty, accept: NoteFilter | None = None) -> None:
        self.root = os.fspath(root).rstrip(os.sep) + os.sep
        self.mark = mark
        self.accept = accept or NoteFilter(root)

    def rel(self, path: str | bytes) -> str | None:
        """The vault-relative path of an event's path, as named on disk (``Vault.sync`` normalises it)."""
        text = os.fsdecode(path)
        if not text.startswith(self.root):
            return None
        return text[len(self.root) :].replace(os.sep, "/").strip("/")

    def on_any_event(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        if kind in _NOISE or (event.is_directory and kind not in ("created", "deleted", "moved")):
            return
        dirty = []
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            rel = self.rel(raw) if raw else None
            if rel is not None and self.accept(rel, event.is_directory):
                dirty.append(rel)
        if dirty:
            self.mark(dirty)

    def lost(self) -> None:
        """The observer dropped events (a queue or buffer overflowed): everything may have changed."""
        logger.warning("the file-system observer lost events under %s; rescanning the vault", self.root)
        self.mark([EVERYTHING])


class RunningObserver(Protocol):
    """What the watcher needs from an observer: its kind, whether it still runs, and stopping it."""

    kind: str

    def alive(self) -> bool: ...

    def intact(self) -> bool: ...

    def stop(self) -> None: ...


ObserverFactory = Callable[[Path, MarkDirty, bool], RunningObserver]
"""``(root, mark, polling) -> a started observer``; the seam tests can replace."""


@dataclass
class WatchdogObserver:
    """A started watchdog observer and its handler."""

    observer: BaseObserver
    handler: DirtyHandler
    kind: str

    def alive(self) -> bool:
        return self.observer.is_alive()

    def intact(self) -> bool:
        """Whether it still watches every folder of the vault (Linux inotify; True where it cannot tell).

        watchdog drops the watch of a folder moved into a folder created just before (its delayed
        "moved out" removes the watch the folder keeps at its new place): events there are lost
        until the observer is started again.
        """
        return self.kind != "inotify" or _all_folders_watched(self.observer, Path(self.handler.root))

    def stop(self) -> None:
        """Stop and join every thread, then hand over events still queued for dispatch."""
        overflow.forget(self.handler)
        self.observer.stop()
        with contextlib.suppress(RuntimeError):
            self.observer.join(timeout=10)
        events = self.observer.event_queue
        while True:
            try:
                item = events.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, tuple):
                self.handler.dispatch(item[0])


def start_observer(root: Path, mark: MarkDirty, polling: bool = False) -> WatchdogObserver:
    """Start the native observer (inotify, FSEvents, kqueue, Windows) or, if it cannot watch, polling.

    A native observer that fails to start (watch or instance limit) or that watches fewer folders
    than the vault has is replaced by the polling observer, with one warning line saying why. Running
    out of inotify watches shows in three ways: the limit is below the folder count (known before
    starting), watchdog refuses to start (``ENOSPC`` while adding the first watches), or folders are
    skipped (added after the first watches, or skipped by older watchdogs) and the kernel's count for
    our inotify instance is short. Which one happens depends on what else holds watches and when, so
    all three give the same reason (``_not_all_watched``): the folder count and the limit.
    """
    handler = DirtyHandler(root, mark)
    if not polling:
        reason = _not_all_watched(root) if _too_many_folders(root) else None
        if reason is None:
            native = overflow.native_observer()
            overflow.listen(handler)
            try:
                native.schedule(handler, str(root), recursive=True)
                native.start()
            except OSError as exc:
                _stop_quietly(native)
                overflow.forget(handler)
                if exc.errno not in _WATCH_ERRORS:
                    raise
                reason = (
                    _not_all_watched(root) if exc.errno == errno.ENOSPC else f"{exc.strerror or exc} ({_limits_hint()})"
                )
            else:
                if _all_folders_watched(native, root):
                    return WatchdogObserver(native, handler, _kind(native))
                _stop_quietly(native)
                overflow.forget(handler)
                reason = _not_all_watched(root)
        logger.warning(
            "the native observer cannot watch %s: %s; falling back to polling every %.0f s",
            root,
            reason,
            POLL_INTERVAL_S,
        )
    poller = PollingObserverVFS(os.stat, _note_entries, polling_interval=POLL_INTERVAL_S)
    poller.schedule(handler, str(root), recursive=True)
    poller.start()
    return WatchdogObserver(poller, handler, "polling")


def _note_entries(path: str | None) -> Iterator[os.DirEntry[str]]:
    """The polling observer's listdir: only non-dot folders (not symlinked) and files (the handler filters them)."""
    with os.scandir(path) as entries:
        for entry in entries:
            if is_hidden(entry.name):
                continue
            try:
                if entry.is_dir(follow_symlinks=False) or not entry.is_dir():
                    yield entry
            except OSError:
                continue


def _kind(observer: BaseObserver) -> str:
    name = type(observer).__name__.removesuffix("Observer").removeprefix("DropAware").lower()
    return {"windowsapi": "windows", "fsevents": "fsevents"}.get(name, name)


def _stop_quietly(observer: BaseObserver) -> None:
    with contextlib.suppress(Exception):
        observer.stop()
    with contextlib.suppress(Exception):
        observer.join(timeout=10)


def _limits_hint() -> str:
    limit = inotify_limit()
    return f"fs.inotify.max_user_watches = {limit}" if limit is not None else "watch limit reached"


def count_folders(root: Path) -> int:
    """Folders an inotify observer needs a watch for: the root and every folder under it (no symlinks)."""
    count, stack = 0, [os.fspath(root)]
    while stack:
        count += 1
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
    return count


def _too_many_folders(root: Path) -> bool:
    limit = inotify_limit()  # None where there is no inotify
    return limit is not None and count_folders(root) > limit


def _all_folders_watched(observer: BaseObserver, root: Path) -> bool:
    """Linux only: whether the kernel's watch count for this observer covers the vault's folders
    (True where it cannot be told)."""
    # the emitter's inotify instance (watchdog 7.0 has none on the observer; 7.1 has one on both)
    fds = {getattr(getattr(e, "_inotify_fd", None), "_inotify_fd", None) for e in observer.emitters}
    fd = fds.pop() if len(fds) == 1 else None
    if not isinstance(fd, int):
        return True
    try:
        watches = Path(f"/proc/self/fdinfo/{fd}").read_text().count("inotify wd:")
    except OSError:
        return True
    if watches >= count_folders(root):
        return True
    return watches >= count_folders(root)  # recount: a folder may just have gone


def _not_all_watched(root: Path) -> str:
    """The one reason for every way of running out of inotify watches: the folder count and the limit."""
    folders, limit = count_folders(root), inotify_limit()
    if limit is None:
        return f"not all of its {folders} folders could be watched (inotify watch limit reached)"
    share = "fewer than its folders" if limit < folders else "for all of this user's programs together"
    return (
        f"not all of its {folders} folders could be watched "
        f"(inotify watches are limited to fs.inotify.max_user_watches = {limit}, {share})"
    )

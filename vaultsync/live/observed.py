"""The vault folder a watcher observes: its identity (device and inode) and its file-system observer, started
again when the folder comes back, is replaced by another, or the observer lost the watch of a moved folder."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from ..disk import vanished
from ..disk.paths import is_note_path
from ..errors import StoreError
from .events import EVERYTHING, MarkDirty, ObserverFactory, RunningObserver

logger = logging.getLogger("vaultsync.live.watcher")  # the watcher's lines, under its name

RECHECK_S = 1.0
"""After a folder went away, the observer's watches are counted again this much later (``lost_watches``)."""


class ObservedFolder:
    """A vault folder and the observer watching it (``factory``: ``events.start_observer`` or a test's own)."""

    def __init__(self, root: Path, factory: ObserverFactory, polling: bool) -> None:
        self.root = root
        self.factory = factory
        self.polling = polling
        self.observer: RunningObserver | None = None
        self.root_id: tuple[int, int] | None = None
        self.recheck_at: float | None = None
        """When to look once more whether the observer lost a moved folder's watch (``lost_watches``)."""
        self.restarting = False
        """The observer is being started afresh (the old one stopping may take a second): alive meanwhile."""

    @property
    def kind(self) -> str | None:
        return self.observer.kind if self.observer is not None else None

    def start(self, add: MarkDirty) -> None:
        """Note the folder's identity and start observing it (StoreError when it is gone, OSError from the
        observer)."""
        self.root_id = identity(self.root)
        if self.root_id is None:
            raise StoreError(f"the vault folder {self.root} is gone")
        self.observer = self.factory(self.root, add, self.polling)

    def stop(self) -> None:
        if self.observer is not None:
            self.observer.stop()
            self.observer = None

    def replaced(self) -> bool:
        """Whether the folder at the vault's path is gone, or another one than the one observed."""
        return identity(self.root) != self.root_id

    def alive(self) -> bool:
        return self.restarting or (self.observer is not None and self.observer.alive())

    def reattach(self, add: MarkDirty) -> None:
        """The vault folder is away, back or replaced: VaultUnavailable while it is away, else observe
        it again (a new folder, or an observer that stopped with the old one)."""
        vanished.check_root(self.root, None)
        root_id = identity(self.root)
        if root_id != self.root_id or not self.alive():
            self.restarting = True
            try:
                self.stop()
                self.observer = self.factory(self.root, add, self.polling)
                self.root_id = root_id
            finally:
                self.restarting = False

    def lost_watches(self, paths: list[str]) -> bool:
        """After a batch in which a folder went away: whether the observer lost the watch of a folder that is
        still in the vault (moved into a new folder: see ``RunningObserver.intact``). Looked at again a
        second later, in case the observer drops the watch after reporting the folder gone."""
        gone = any(not is_note_path(p) and not os.path.isdir(os.path.join(self.root, p)) for p in paths)
        if not gone or self.observer is None:
            return False
        self.recheck_at = time.monotonic() + RECHECK_S
        return not self.observer.intact()

    def recheck_due(self) -> bool:
        return self.recheck_at is not None and time.monotonic() >= self.recheck_at

    def recheck(self, add: MarkDirty) -> None:
        """The second look of ``lost_watches``: watch again if the observer lost a watch meanwhile."""
        self.recheck_at = None
        if self.observer is not None and not self.observer.intact():
            self.rewatch(add)

    def rewatch(self, add: MarkDirty) -> None:
        """Start the observer afresh and scan the whole vault (what it missed meanwhile)."""
        logger.info("the file-system observer lost the watch of a moved folder; watching %s again", self.root)
        self.recheck_at = None
        self.restarting = True  # ``watch``'s health check must not take the swap for an observer that stopped
        try:
            self.stop()
            add([EVERYTHING])
            try:
                self.observer = self.factory(self.root, add, self.polling)
            except OSError as exc:  # healthy() is False from now on: ``watch`` stops, saying the observer stopped
                logger.error("could not watch %s again: %s", self.root, exc)
        finally:
            self.restarting = False


def identity(root: os.PathLike[str]) -> tuple[int, int] | None:
    try:
        st = os.stat(root)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)

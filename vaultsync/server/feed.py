"""The change feed: every batch of the vault, whoever wrote it, told once to the clients subscribed to its notes.

The contract: once ``open()`` ran, each batch of the vault is told exactly once, in order, whether
this process wrote it (``catch_up()`` right after the batch) or another process did (``poll()``
notices it: SQLite's ``PRAGMA data_version`` on the reader's connection changes when any other
connection commits, and reading it touches no table). What is told comes from the batch log itself,
so a server that takes over watching tells the last batches of the previous watcher before its own,
and a batch noticed twice is still told once. Subscribers are 2026 ``subscriptions/listen`` streams
(the SDK's bus) and 2025-era ``resources/subscribe`` sessions (kept here, one per connection and URI);
notes are named by ``note://`` URIs.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged, ResourceUpdated
from mcp.shared.uri_template import UriTemplate

from ..store import BatchNews
from ..vault import Vault
from .sdk import connection_key

logger = logging.getLogger(__name__)

POLL_S = 0.5
"""How often a server checks whether another process wrote a batch (one ``PRAGMA data_version``)."""
MAX_SUBSCRIPTIONS = 1000
"""Legacy ``resources/subscribe`` subscriptions one client connection may hold."""
MAX_URI_CHARS = 2048
"""Longest URI a client may subscribe to."""

NOTE_TEMPLATE = "note://{+path}"
_TEMPLATE = UriTemplate.parse(NOTE_TEMPLATE)

Reading = Callable[[], contextlib.AbstractContextManager[Vault]]
Tell = Callable[[list[BatchNews]], None]


def note_uri(path: str) -> str:
    """The canonical ``note://`` URI of a vault path (RFC 6570 reserved expansion)."""
    return _TEMPLATE.expand({"path": path})


def uri_path(uri: str) -> str | None:
    """The vault path a ``note://`` URI names, or None for any other URI."""
    text = str(uri)
    if not text.startswith("note://") or len(text) <= len("note://"):
        return None
    return unquote(text[len("note://") :])


class ChangeFeed:
    """Follows the batch log through ``reading`` (the served vault's reader) and tells subscribers which
    notes each batch changed, after the last batch told, once each, oldest first (``tell``: to it
    instead, on the thread that found them)."""

    def __init__(self, reading: Reading, tell: Tell | None = None) -> None:
        self._reading = reading
        self._tell = tell or self._publish_soon
        self.bus = InMemorySubscriptionBus()
        self.legacy: dict[str, dict[int, ServerSession]] = {}
        self.per_connection: dict[int, int] = {}
        """How many legacy subscriptions each connection holds (bounded by MAX_SUBSCRIPTIONS)."""
        self.told: int | None = None
        """The last batch told (None until ``open``: nothing is told)."""
        self._token: Any = None
        self._lock = threading.Lock()
        self._version: int | None = None

    async def open(self, *, start: bool = True) -> None:
        """From now on (call inside the server's lifespan): batches already in the log are not news, and
        news is published on the current event loop, whatever thread finds it (``start`` False: a vault not
        in the database yet, whose follower calls ``start`` once it is)."""
        self._token = anyio.lowlevel.current_token()
        if start:
            await anyio.to_thread.run_sync(self.start)

    def start(self) -> None:
        """From now on: batches already in the log are not news."""
        with self._reading() as vault:
            version, last = vault.data_version(), vault.last_batch_id
        with self._lock:
            self._version, self.told = version, last

    def close(self) -> None:
        self._token = None
        self.legacy.clear()
        self.per_connection.clear()

    # ------------------------------------------------------------ following the batch log (any thread)

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
                    logger.debug(
                        "could not tell subscribers about batches %d..%d",
                        news[0].batch_id,
                        news[-1].batch_id,
                        exc_info=True,
                    )
                self.told = news[-1].batch_id

    def _publish_soon(self, news: list[BatchNews]) -> None:
        paths = list(dict.fromkeys(path for batch in news for path in batch.paths))
        if paths and self._token is not None:
            anyio.from_thread.run(self.publish, paths, any(b.listed for b in news), token=self._token)

    # ------------------------------------------------------------ subscribers (the event loop)

    async def publish(self, paths: list[str], list_changed: bool = False) -> None:
        """Send resource-updated events to 2026 listen streams and legacy subscribers."""
        for path in paths:
            uri = note_uri(path)
            await self.bus.publish(ResourceUpdated(uri=uri))
            if ("note://" + path) != uri:
                await self.bus.publish(ResourceUpdated(uri="note://" + path))
            for key, session in list(self.legacy.get(uri, {}).items()):
                try:
                    await session.send_resource_updated(uri)
                except Exception:
                    logger.debug("dropping a legacy subscriber of %s", uri, exc_info=True)
                    self._drop(uri, key)
        if list_changed:
            await self.bus.publish(ResourcesListChanged())

    def subscribe_legacy(self, uri: str, session: ServerSession) -> str:
        """Subscribe the connection behind ``session`` to a note; its canonical URI (ValueError if not a note)."""
        if len(uri) > MAX_URI_CHARS:
            raise ValueError(f"the URI is {len(uri)} characters long; at most {MAX_URI_CHARS}")
        path = uri_path(uri)
        if path is None:
            raise ValueError(f"{uri!r} is not a note:// URI")
        canonical = note_uri(path)
        key = connection_key(session)
        subscribers = self.legacy.setdefault(canonical, {})
        if key not in subscribers:
            if self.per_connection.get(key, 0) >= MAX_SUBSCRIPTIONS:
                if not subscribers:
                    del self.legacy[canonical]
                raise ValueError(
                    f"this connection already holds {MAX_SUBSCRIPTIONS} subscriptions (the most one "
                    "may hold); unsubscribe from some first"
                )
            self.per_connection[key] = self.per_connection.get(key, 0) + 1
        subscribers[key] = session
        return canonical

    def unsubscribe_legacy(self, uri: str, session: ServerSession) -> None:
        path = uri_path(uri)
        if path is not None:
            self._drop(note_uri(path), connection_key(session))

    def _drop(self, uri: str, key: int) -> None:
        subscribers = self.legacy.get(uri, {})
        if subscribers.pop(key, None) is not None:
            self.per_connection[key] -= 1
            if not self.per_connection[key]:
                del self.per_connection[key]
        if not subscribers:
            self.legacy.pop(uri, None)

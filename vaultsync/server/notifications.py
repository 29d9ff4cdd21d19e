"""``note://`` URIs and who to tell when notes change: 2026 listen streams and 2025-era subscribers."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote

import anyio.from_thread
import anyio.lowlevel
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged, ResourceUpdated
from mcp.shared.uri_template import UriTemplate

from ..store import BatchNews
from .sdk import connection_key

logger = logging.getLogger(__name__)

MAX_SUBSCRIPTIONS = 1000
"""Legacy ``resources/subscribe`` subscriptions one client connection may hold."""
MAX_URI_CHARS = 2048
"""Longest URI a client may subscribe to."""

NOTE_TEMPLATE = "note://{+path}"
_TEMPLATE = UriTemplate.parse(NOTE_TEMPLATE)


def note_uri(path: str) -> str:
    """The canonical ``note://`` URI of a vault path (RFC 6570 reserved expansion)."""
    return _TEMPLATE.expand({"path": path})


def uri_path(uri: str) -> str | None:
    """The vault path a ``note://`` URI names, or None for any other URI."""
    text = str(uri)
    if not text.startswith("note://") or len(text) <= len("note://"):
        return None
    return unquote(text[len("note://"):])


class Notifier:
    """Tells subscribers which notes a batch changed: the SDK's bus carries 2026 ``subscriptions/listen``
    streams; 2025-era ``resources/subscribe`` sessions are kept here, one per connection and URI."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.legacy: dict[str, dict[int, ServerSession]] = {}
        self.per_connection: dict[int, int] = {}
        """How many legacy subscriptions each connection holds (bounded by MAX_SUBSCRIPTIONS)."""
        self.token: Any = None
        """The server's event loop (set while it runs), so worker threads can publish on it."""

    def attach(self) -> None:
        """Publish on the current event loop from now on (call inside the server's lifespan)."""
        self.token = anyio.lowlevel.current_token()

    def detach(self) -> None:
        self.token = None
        self.legacy.clear()
        self.per_connection.clear()

    def tell(self, news: list[BatchNews]) -> None:
        """Called on any worker thread with the batches the store gained: tell subscribers which notes changed."""
        paths = list(dict.fromkeys(path for batch in news for path in batch.paths))
        if not paths or self.token is None:
            return
        anyio.from_thread.run(self.publish, paths, any(b.listed for b in news), token=self.token)

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
                raise ValueError(f"this connection already holds {MAX_SUBSCRIPTIONS} subscriptions (the most one "
                                 "may hold); unsubscribe from some first")
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

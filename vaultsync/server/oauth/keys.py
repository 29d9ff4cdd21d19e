"""The issuer's metadata and signing keys: discovered once, keys cached and refetched on rotation.

- ``discover``: the authorization server metadata (RFC 8414 ``/.well-known/oauth-authorization-server``, then
  OpenID ``/.well-known/openid-configuration``, inserted before the issuer's path, then appended to it), whose
  ``issuer`` must equal the configured one exactly; it names ``jwks_uri`` (and ``introspection_endpoint``).
- ``key(kid)``: the JWK with that key id. The set is fetched again when it is older than ``CACHE_S`` (a key the
  issuer withdrew is refused from the first fetch without it) and when a token names a key id not held, at most
  once per ``jwks_refresh_s`` (a token naming random key ids cannot make the server hammer the issuer).

Fetching is bounded and shared: a fetch (discovery included) has a total deadline of ``FETCH_DEADLINE_S``,
however slowly the issuer answers; one fetch runs at a time and the requests that need it wait for it and share
its result, while requests whose key is already held do not wait. After a failed fetch the keys held are kept,
and the requests that need a key not held are refused at once (``KeysUnavailable``, a 503 saying why) until the
next try, ``RETRY_MIN_S`` later, doubling up to ``RETRY_MAX_S``: an issuer that recovers is used again within
seconds. Each key of the set is read on its own: a malformed one is skipped (one warning), never the set. At
most ``MAX_KEYS`` keys are kept, each document at most ``MAX_DOCUMENT_BYTES``.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import jwt
from anyio.abc import TaskGroup

from ...errors import ConfigError, VaultsyncError
from ...hardened.access import OAuthSettings

logger = logging.getLogger(__name__)

CACHE_S = 60.0
"""How long fetched keys are used before the set is fetched again: the bound on a withdrawn key."""
FETCH_DEADLINE_S = 5.0
"""The whole of one fetch (connection, headers and body, discovery included): a key set that trickles or
hangs is given up on after this long."""
RETRY_MIN_S = 1.0
RETRY_MAX_S = 5.0
"""After a failed fetch, the next is tried ``RETRY_MIN_S`` later, doubling after each failure up to this."""
MAX_KEYS = 32
MAX_DOCUMENT_BYTES = 256 * 1024


class KeysUnavailable(VaultsyncError):
    """The OAuth issuer's signing keys cannot be fetched right now."""


def metadata_urls(issuer: str) -> list[str]:
    """Where the issuer's metadata may be (RFC 8414 §3.1, then OpenID Connect Discovery both ways)."""
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    urls = [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{issuer.rstrip('/')}/.well-known/openid-configuration",
    ]
    return list(dict.fromkeys(urls))


def usable_keys(document: Any) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The signing keys of a JWKS document by key id (``""``: a key without one), and why each other entry was
    skipped. Each key is read on its own: one malformed key costs only itself."""
    listed = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(listed, list):
        return {}, ["the key set has no keys list"]
    keys: dict[str, dict[str, Any]] = {}
    skipped: list[str] = []
    for i, entry in enumerate(listed):
        if len(keys) == MAX_KEYS:
            skipped.append(f"keys {i + 1}..{len(listed)}: more than {MAX_KEYS} keys")
            break
        problem = _key_problem(entry)
        if problem is None and entry.get("kid", "") in keys:
            problem = "a second key with the same kid"
        if problem is None:
            keys[entry.get("kid", "")] = entry
        elif problem != "not a signing key":
            skipped.append(f"key {i + 1}: {problem}")
    return keys, skipped


def _key_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return "not a JSON object"
    for name in ("kid", "kty", "alg", "use"):
        if name in entry and not isinstance(entry[name], str):
            return f"its {name} is not a string"
    if entry.get("use", "sig") != "sig":
        return "not a signing key"
    if "kty" not in entry:
        return "no kty"
    try:
        jwt.PyJWK(entry)
    except Exception as exc:  # untrusted input: whatever a malformed key raises, it is that key's problem only
        return f"not a usable key ({str(exc)[:80]})"
    return None


class IssuerKeys:
    """One issuer's metadata and key set, for one server process."""

    def __init__(self, settings: OAuthSettings, client: httpx2.AsyncClient | None = None) -> None:
        self.settings = settings
        self.client = client or httpx2.AsyncClient(timeout=FETCH_DEADLINE_S, follow_redirects=False)
        self.metadata: dict[str, Any] | None = None
        self.keys: dict[str, dict[str, Any]] = {}
        self.fetched = -1e18
        """When the key set was last fetched (monotonic)."""
        self.refetched = -1e18
        """When a key id not known caused the last fetch."""
        self.fetches = 0
        self.failure: str | None = None
        """Why the last fetch failed (None: it did not)."""
        self.failures = 0
        self.retry_at = 0.0
        """No fetch before this (monotonic): the backoff after a failed fetch."""
        self._inflight: anyio.Event | None = None
        self.background: TaskGroup | None = None
        """Where a refetch of a stale set runs while requests go on with the keys held (set by the server)."""
        self._skipped: list[str] = []

    async def _get(self, url: str) -> dict[str, Any] | None:
        """The JSON object at ``url`` (None: not found there)."""
        async with self.client.stream("GET", url, headers={"Accept": "application/json"}) as response:
            if response.status_code == 404:
                return None
            if response.status_code != 200:
                raise ConfigError(f"the OAuth issuer answered HTTP {response.status_code} for {url}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise ConfigError(f"the OAuth issuer's document at {url} is larger than {MAX_DOCUMENT_BYTES} bytes")
        try:
            data = json.loads(body)
        except ValueError:
            raise ConfigError(f"the OAuth issuer's document at {url} is not JSON") from None
        if not isinstance(data, dict):
            raise ConfigError(f"the OAuth issuer's document at {url} is not a JSON object")
        return data

    async def _get_within(self, url: str) -> dict[str, Any] | None:
        """``_get`` within the total deadline (ConfigError past it, or when the issuer cannot be reached)."""
        try:
            with anyio.fail_after(FETCH_DEADLINE_S):
                return await self._get(url)
        except TimeoutError:
            raise ConfigError(f"the OAuth issuer did not answer {url} within {FETCH_DEADLINE_S:g} s") from None
        except httpx2.HTTPError as exc:
            raise ConfigError(f"cannot reach the OAuth issuer {url}: {exc}") from None

    async def discover(self) -> dict[str, Any]:
        """The issuer's metadata, fetched once (ConfigError: unreachable, not found, or for another issuer)."""
        if self.metadata is not None:
            return self.metadata
        issuer = self.settings.issuer
        for url in metadata_urls(issuer):
            found = await self._get_within(url)
            if found is None:
                continue
            if found.get("issuer") != issuer:
                raise ConfigError(
                    f"the OAuth issuer's metadata at {url} names the issuer {found.get('issuer')!r}, "
                    f"not {issuer!r} (give the issuer exactly as it states it)"
                )
            if not isinstance(found.get("jwks_uri"), str):
                raise ConfigError(f"the OAuth issuer's metadata at {url} names no jwks_uri")
            self.metadata = found
            return found
        raise ConfigError(f"the OAuth issuer {issuer} publishes no metadata (tried {', '.join(metadata_urls(issuer))})")

    async def key(self, kid: str | None) -> dict[str, Any] | None:
        """The issuer's JWK with key id ``kid`` (None: the only key of a set that has one), or None when the
        issuer does not publish it (KeysUnavailable: it cannot be told, the keys cannot be fetched now)."""
        found = await self._fresh(kid)
        now = time.monotonic()
        if found is None and now - self.refetched >= self.settings.jwks_refresh_s and self._may_fetch():
            self.refetched = now
            await self._refresh()
            found = self._find(kid)
        if found is None and self.failure is not None:
            wait = max(0.0, self.retry_at - time.monotonic())
            raise KeysUnavailable(
                f"the OAuth issuer's signing keys cannot be fetched ({self.failure}); next try in {wait:.0f} s"
            )
        return found

    async def current(self, kid: str | None) -> bool:
        """Whether the key ``kid`` is still in the issuer's set (refetched when older than ``CACHE_S``): a token
        accepted earlier is taken again only while its key is."""
        return await self._fresh(kid) is not None

    async def _fresh(self, kid: str | None) -> dict[str, Any] | None:
        """The key ``kid`` of a set no older than ``CACHE_S`` (when the issuer answers). A key held while the set
        is being fetched is used at once (the fetch runs in ``background`` when there is one)."""
        if time.monotonic() - self.fetched > CACHE_S:
            held = self._find(kid)
            if held is not None and self._inflight is not None:
                return held
            if held is not None and self.background is not None:
                if time.monotonic() >= self.retry_at:
                    self.background.start_soon(self._shared_fetch, self._begin())
                return held
            await self._refresh()
        return self._find(kid)

    def _find(self, kid: str | None) -> dict[str, Any] | None:
        if kid is None and len(self.keys) == 1:
            return next(iter(self.keys.values()))
        return self.keys.get(kid) if kid is not None else None

    def _may_fetch(self) -> bool:
        return self._inflight is not None or time.monotonic() >= self.retry_at

    async def _refresh(self) -> None:
        """Fetch the key set, or wait for the fetch under way and share its outcome; nothing during the backoff
        after a failure."""
        if self._inflight is not None:
            await self._inflight.wait()
            return
        if time.monotonic() < self.retry_at:
            return
        await self._shared_fetch(self._begin())

    def _begin(self) -> anyio.Event:
        """Mark a fetch under way (before it starts: a request arriving meanwhile waits for it, or goes on)."""
        self._inflight = anyio.Event()
        return self._inflight

    async def _shared_fetch(self, done: anyio.Event) -> None:
        try:
            with anyio.CancelScope(shield=True):  # the waiters need its outcome even if this request goes away
                await self._fetch()
        finally:
            self._inflight = None
            done.set()

    async def _fetch(self) -> None:
        try:
            metadata = await self.discover()
            document = await self._get_within(metadata["jwks_uri"])
        except ConfigError as exc:
            self.failures += 1
            backoff = min(RETRY_MAX_S, RETRY_MIN_S * 2 ** (self.failures - 1))
            self.failure, self.retry_at = str(exc), time.monotonic() + backoff
            logger.warning("vaultsync: cannot fetch the OAuth issuer's keys (next try in %g s): %s", backoff, exc)
            return
        self.fetches += 1
        self.fetched, self.failure, self.failures, self.retry_at = time.monotonic(), None, 0, 0.0
        keys, skipped = usable_keys(document)
        if skipped and skipped != self._skipped:
            logger.warning("vaultsync: skipped %d of the OAuth issuer's keys: %s", len(skipped), "; ".join(skipped))
        self._skipped = skipped
        self.keys = keys
        logger.info("fetched %d signing keys of the OAuth issuer", len(self.keys))

    async def aclose(self) -> None:
        await self.client.aclose()

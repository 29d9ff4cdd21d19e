"""The issuer's metadata and signing keys: discovered once, keys cached and refetched on rotation.

- ``discover``: the authorization server metadata (RFC 8414 ``/.well-known/oauth-authorization-server``, then
  OpenID ``/.well-known/openid-configuration``, inserted before the issuer's path, then appended to it), whose
  ``issuer`` must equal the configured one exactly; it names ``jwks_uri`` (and ``introspection_endpoint``).
- ``key(kid)``: the JWK with that key id. Keys are cached for ``CACHE_S``; a key id not in the cache refetches the
  set, at most once per ``jwks_refresh_s`` (a token naming random key ids cannot make the server hammer the
  issuer), and only one fetch runs at a time; after a failed fetch the keys held are kept and the next try
  waits ``RETRY_S``. At most ``MAX_KEYS`` keys are kept, each document at most
  ``MAX_DOCUMENT_BYTES``.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2

from ...errors import ConfigError
from ...hardened.access import OAuthSettings

logger = logging.getLogger(__name__)

CACHE_S = 300.0
"""How long fetched keys are used before the set is fetched again."""
RETRY_S = 5.0
"""After a failed fetch, how long the keys held are used before the next try (an issuer that is down is not
asked on every request)."""
MAX_KEYS = 32
MAX_DOCUMENT_BYTES = 256 * 1024
FETCH_TIMEOUT_S = 10.0


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


class IssuerKeys:
    """One issuer's metadata and key set, for one server process."""

    def __init__(self, settings: OAuthSettings, client: httpx2.AsyncClient | None = None) -> None:
        self.settings = settings
        self.client = client or httpx2.AsyncClient(timeout=FETCH_TIMEOUT_S, follow_redirects=False)
        self.metadata: dict[str, Any] | None = None
        self.keys: dict[str | None, dict[str, Any]] = {}
        self.fetched = -1e18
        """When the key set was last fetched (monotonic)."""
        self.refetched = -1e18
        """When a key id not known caused the last fetch."""
        self.fetches = 0
        self._lock = anyio.Lock()

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

    async def discover(self) -> dict[str, Any]:
        """The issuer's metadata, fetched once (ConfigError: unreachable, not found, or for another issuer)."""
        if self.metadata is not None:
            return self.metadata
        issuer = self.settings.issuer
        for url in metadata_urls(issuer):
            try:
                found = await self._get(url)
            except httpx2.HTTPError as exc:
                raise ConfigError(f"cannot reach the OAuth issuer {issuer}: {exc}") from None
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
        """The issuer's JWK with key id ``kid`` (None: the only key of a set that has one), or None."""
        now = time.monotonic()
        if now - self.fetched > CACHE_S:
            await self._refresh(stale_before=now)
        found = self._find(kid)
        if found is None and now - self.refetched >= self.settings.jwks_refresh_s:
            self.refetched = now
            await self._refresh(stale_before=now)
            found = self._find(kid)
        return found

    def _find(self, kid: str | None) -> dict[str, Any] | None:
        if kid is None and len(self.keys) == 1:
            return next(iter(self.keys.values()))
        return self.keys.get(kid) if kid is not None else None

    async def _refresh(self, stale_before: float) -> None:
        async with self._lock:
            if self.fetched >= stale_before:  # another request fetched meanwhile
                return
            metadata = await self.discover()
            try:
                document = await self._get(metadata["jwks_uri"])
            except (httpx2.HTTPError, ConfigError) as exc:
                logger.warning("vaultsync: cannot fetch the OAuth issuer's keys: %s", exc)
                # keep the keys held, and try again after RETRY_S
                self.fetched = max(self.fetched, time.monotonic() - CACHE_S + RETRY_S)
                return
            self.fetches += 1
            self.fetched = time.monotonic()
            keys = (document or {}).get("keys")
            if not isinstance(keys, list):
                logger.warning("vaultsync: the OAuth issuer's key set has no keys list")
                return
            usable = [k for k in keys if isinstance(k, dict) and k.get("use", "sig") == "sig" and "kty" in k]
            if len(usable) > MAX_KEYS:
                logger.warning("vaultsync: the OAuth issuer has %d keys; using the first %d", len(usable), MAX_KEYS)
            self.keys = {k.get("kid"): k for k in usable[:MAX_KEYS]}
            logger.info("fetched %d signing keys of the OAuth issuer", len(self.keys))

    async def aclose(self) -> None:
        await self.client.aclose()

"""RFC 7662 token introspection, for access tokens that are not JWTs (opaque tokens).

The issuer's ``introspection_endpoint`` (from its metadata) is asked with HTTP Basic client credentials read from
``OAuthSettings.introspection_file`` (TOML ``client_id`` and ``client_secret``, mode 600). A token is accepted when
the answer says ``active: true``, names a ``sub``, an ``aud`` that includes this resource, an ``iss`` (when given)
that is the issuer, and an ``exp`` still ahead. Answers are cached by the token's SHA-256 until the sooner of its
expiry and ``CACHE_S``, for at most ``MAX_CACHED`` tokens. The issuer is given ``keys.FETCH_DEADLINE_S`` to answer
(else 503, ``verify.Unavailable``).
"""

from __future__ import annotations

import hashlib
import time
import tomllib
from collections import OrderedDict
from typing import Any

import anyio
import httpx2
from mcp.server.auth.provider import AccessToken

from ...errors import ConfigError
from ...hardened.access import OAuthSettings
from ...hardened.manifest import read_private
from .claims import groups_of, problem, scopes_of
from .keys import FETCH_DEADLINE_S, IssuerKeys
from .verify import Unavailable

CACHE_S = 60.0
MAX_CACHED = 1024


class Introspector:
    def __init__(self, settings: OAuthSettings, keys: IssuerKeys) -> None:
        self.settings = settings
        self.keys = keys
        self.endpoint = ""
        self.auth: tuple[str, str] = ("", "")
        self.cache: OrderedDict[str, tuple[float, AccessToken | str]] = OrderedDict()

    async def start(self) -> None:
        """Read the credentials and find the endpoint (ConfigError when either is missing)."""
        path = self.settings.introspection_file
        assert path is not None
        try:
            data = tomllib.loads(read_private(path, "introspection credentials file", readable=True))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"the introspection credentials file {path} is not valid TOML: {exc}") from None
        client_id, secret = data.get("client_id"), data.get("client_secret")
        if not (isinstance(client_id, str) and client_id and isinstance(secret, str) and secret):
            raise ConfigError(f"the introspection credentials file {path} needs client_id and client_secret")
        self.auth = (client_id, secret)
        endpoint = (await self.keys.discover()).get("introspection_endpoint")
        if not isinstance(endpoint, str):
            raise ConfigError(f"the OAuth issuer {self.settings.issuer} names no introspection_endpoint")
        self.endpoint = endpoint

    async def check(self, token: str, audience: str) -> AccessToken | str:
        key = hashlib.sha256(f"{audience}\n{token}".encode()).hexdigest()
        now = time.time()
        held = self.cache.get(key)
        if held is not None and held[0] > now:
            return held[1]
        try:
            with anyio.fail_after(FETCH_DEADLINE_S):
                response = await self.keys.client.post(self.endpoint, data={"token": token}, auth=self.auth)
            answer = response.json() if response.status_code == 200 else None
        except (httpx2.HTTPError, ValueError, TimeoutError):
            return Unavailable("the issuer could not be asked about the token")
        if not isinstance(answer, dict):
            return Unavailable("the issuer could not be asked about the token")
        result = self._judge(answer, token, audience, now)
        exp = answer.get("exp")
        until = min(now + CACHE_S, float(exp)) if isinstance(exp, int | float) else now + CACHE_S
        self.cache[key] = (until, result)
        while len(self.cache) > MAX_CACHED:
            self.cache.popitem(last=False)
        return result

    def _judge(self, answer: dict[str, Any], token: str, audience: str, now: float) -> AccessToken | str:
        if answer.get("active") is not True:
            return "the issuer says the token is not active"
        wrong = problem(answer, subject_claim=self.settings.subject_claim, groups_claim=self.settings.groups_claim)
        if wrong is not None:
            return wrong
        if "iss" in answer and answer["iss"] != self.settings.issuer:
            return "the token was issued by another issuer"
        aud = answer.get("aud")
        audiences = aud if isinstance(aud, list) else [aud]
        if audience not in audiences and f"{audience}/" not in audiences:
            return "the token was issued for another resource (audience)"
        exp = answer.get("exp")
        if not isinstance(exp, int | float) or exp + self.settings.leeway_s < now:
            return "the token has expired"
        subject = answer.get(self.settings.subject_claim)
        if not isinstance(subject, str) or not subject:
            return f"the issuer names no subject ({self.settings.subject_claim}) for the token"
        return AccessToken(
            token=token,
            client_id=str(answer.get("client_id") or subject),
            scopes=scopes_of(answer),
            expires_at=int(exp),
            resource=audience,
            subject=subject,
            claims={"iss": self.settings.issuer, "groups": groups_of(answer, self.settings.groups_claim)},
        )

"""Access tokens checked for one resource: JWTs against the issuer's keys, opaque tokens by introspection, and
the static tokens of local clients.

A JWT is accepted only when all of these hold (each refusal says which did not):

- its ``alg`` is one of the settings' public-key algorithms (never ``none``, never HS*: a token "signed" with a
  public key's bytes as an HMAC secret is refused before any key is looked at), and the key agrees: a JWK that
  names its ``alg`` must name this one, and the key type must fit the algorithm;
- its claims are of the types the specifications give them (``claims``: ``exp`` a number, not a numeric string;
  checked before the keys are fetched);
- its ``iss`` is the issuer (checked before the keys are fetched), the signature verifies with the issuer's
  key of that ``kid``, ``aud`` (a string or a list) names this resource's canonical URL (RFC 8707), ``exp`` is
  in the future and ``nbf``/``iat`` not (``leeway_s`` either way), and it names a ``sub``.

A JWT once accepted is remembered (by its SHA-256, for this audience) until it expires, for at most
``REMEMBER_S`` and ``REMEMBERED`` tokens: the next request with it costs a hash, not a signature check, and is
taken only while the key that signed it is still in the issuer's key set (``IssuerKeys.current``): a token of a
withdrawn key is refused from the first fetch of the set without it (at most ``keys.CACHE_S`` after the last).

When the issuer's keys cannot be fetched and the token's key is not held, the refusal is ``Unavailable`` (the
gate answers 503 with the reason), at once during the backoff after a failed fetch.

The result is the SDK's ``AccessToken``: ``subject`` the ``sub`` (or the settings' ``subject_claim``),
``scopes`` the ``scope`` (or ``scp``) claim, ``claims`` the issuer and the groups. Static tokens come back with
every scope and no subject (the operator's own clients). The token is never sent anywhere but, when it is
opaque, to the issuer's introspection endpoint.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from typing import Any, Protocol

import jwt
from mcp.server.auth.provider import AccessToken

from ...hardened.access import SCOPES, OAuthSettings
from .claims import groups_of, problem, scopes_of
from .keys import IssuerKeys, KeysUnavailable

logger = logging.getLogger(__name__)

Refusal = str
"""Why a token was refused, for ``error_description`` (never the token itself)."""

REMEMBER_S = 300.0
REMEMBERED = 4096


class TokenCheck(Protocol):
    async def verify_token(self, token: str) -> AccessToken | None: ...


class Introspection(Protocol):
    async def check(self, token: str, audience: str) -> AccessToken | Refusal: ...


_REASONS: list[tuple[type[Exception], str]] = [
    (jwt.ExpiredSignatureError, "the token has expired"),
    (jwt.ImmatureSignatureError, "the token is not valid yet"),
    (jwt.InvalidAudienceError, "the token was issued for another resource (audience)"),
    (jwt.InvalidIssuerError, "the token was issued by another issuer"),
    (jwt.InvalidSignatureError, "the token's signature does not verify"),
    (jwt.MissingRequiredClaimError, "the token lacks a required claim"),
    (jwt.InvalidAlgorithmError, "the token's algorithm does not fit the issuer's key"),
    (jwt.InvalidKeyError, "the token's algorithm does not fit the issuer's key"),
]


class Unavailable(str):
    """A refusal that is not the token's fault: its key cannot be checked now (the gate answers 503)."""


class TokenVerifier:
    """Checks a bearer token for one audience: static tokens first, then JWTs, then introspection."""

    def __init__(
        self,
        settings: OAuthSettings,
        keys: IssuerKeys,
        static: TokenCheck | None = None,
        introspection: Introspection | None = None,
    ) -> None:
        self.settings = settings
        self.keys = keys
        self.static = static
        self.introspection = introspection
        self.remembered: OrderedDict[str, tuple[float, str | None, AccessToken]] = OrderedDict()
        """Accepted JWTs: until when, the key id that signed each, the verified token."""

    async def check(self, token: str, audience: str) -> AccessToken | Refusal:
        """The verified token for ``audience``, or why it is refused."""
        if self.static is not None:
            local = await self.static.verify_token(token)
            if local is not None:
                return AccessToken(token=token, client_id=local.client_id, scopes=list(SCOPES))
        key = hashlib.sha256(f"{audience}\n{token}".encode()).hexdigest()
        held = self.remembered.get(key)
        if held is not None and held[0] > time.time() and await self.keys.current(held[1]):
            return held[2]
        self.remembered.pop(key, None)  # expired, or its key withdrawn: checked afresh
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            if self.introspection is not None:  # it keeps its own, shorter memory (a token may be revoked)
                return await self.introspection.check(token, audience)
            return "the token is not a JWT this server can verify"
        kid = header.get("kid") if isinstance(header.get("kid"), str) else None
        checked = await self._jwt(token, header, unverified, audience, kid)
        if isinstance(checked, AccessToken) and checked.expires_at is not None:
            self.remembered[key] = (min(float(checked.expires_at), time.time() + REMEMBER_S), kid, checked)
            while len(self.remembered) > REMEMBERED:
                self.remembered.popitem(last=False)
        return checked

    async def _jwt(
        self, token: str, header: dict[str, Any], unverified: dict[str, Any], audience: str, kid: str | None
    ) -> Any:
        settings = self.settings
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in settings.algorithms:
            return f"the token's algorithm {str(alg)[:20]!r} is not accepted (only {', '.join(settings.algorithms)})"
        if unverified.get("iss") != settings.issuer:
            return "the token was issued by another issuer"
        wrong = problem(unverified, subject_claim=settings.subject_claim, groups_claim=settings.groups_claim)
        if wrong is not None:
            return wrong
        try:
            jwk = await self.keys.key(kid)
        except KeysUnavailable as exc:
            return Unavailable(str(exc))
        if jwk is None:
            return "the token is signed by a key the issuer does not publish"
        if jwk.get("alg") not in (None, alg):
            return "the token's algorithm does not fit the issuer's key"
        try:
            key = jwt.PyJWK(jwk, algorithm=alg)
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=[audience, f"{audience}/"],
                issuer=settings.issuer,
                leeway=settings.leeway_s,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            return next((reason for kind, reason in _REASONS if isinstance(exc, kind)), "the token is not valid")
        subject = claims.get(settings.subject_claim)
        if not isinstance(subject, str) or not subject:
            return f"the token names no subject ({settings.subject_claim})"
        client = claims.get("client_id") or claims.get("azp") or claims["sub"]
        return AccessToken(
            token=token,
            client_id=str(client),
            scopes=scopes_of(claims),
            expires_at=int(claims["exp"]),
            resource=audience,
            subject=subject,
            claims={"iss": claims["iss"], "groups": groups_of(claims, settings.groups_claim)},
        )

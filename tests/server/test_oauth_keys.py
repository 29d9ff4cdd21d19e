"""The issuer's keys as the resource server holds them (``vaultsync.server.oauth.keys``), against a real issuer over
HTTP (``support.oauth_issuer``): discovery refuses metadata naming another issuer, the key set is bounded, a key id
not seen yet refetches at most once per interval, and tokens within the clock-skew leeway are taken."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.oauth_issuer import Issuer

from vaultsync.errors import ConfigError
from vaultsync.hardened.access import OAuthSettings
from vaultsync.server.oauth.keys import MAX_KEYS, IssuerKeys, metadata_urls
from vaultsync.server.oauth.verify import TokenVerifier

AUDIENCE = "http://127.0.0.1:1/mcp"


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with Issuer() as iss:
        iss.add_key("k1")
        yield iss


def test_metadata_urls_follow_rfc_8414_then_openid() -> None:
    assert metadata_urls("https://id.example.com/realms/x") == [
        "https://id.example.com/.well-known/oauth-authorization-server/realms/x",
        "https://id.example.com/.well-known/openid-configuration/realms/x",
        "https://id.example.com/realms/x/.well-known/openid-configuration",
    ]
    assert metadata_urls("https://tenant.example.com/") == [  # an issuer ending in a slash keeps it elsewhere
        "https://tenant.example.com/.well-known/oauth-authorization-server",
        "https://tenant.example.com/.well-known/openid-configuration",
    ]


@pytest.mark.anyio
async def test_metadata_naming_another_issuer_is_refused(issuer: Issuer) -> None:
    keys = IssuerKeys(OAuthSettings(issuer=f"{issuer.url}/", public_url="http://127.0.0.1:1"))
    with pytest.raises(ConfigError, match="names the issuer"):
        await keys.discover()
    await keys.aclose()


@pytest.mark.anyio
async def test_the_key_set_is_bounded_and_unknown_ids_refetch_once_per_interval(issuer: Issuer) -> None:
    for i in range(MAX_KEYS + 8):
        issuer.add_key(f"extra{i}", alg="ES256")
    keys = IssuerKeys(OAuthSettings(issuer=issuer.url, public_url="http://127.0.0.1:1", jwks_refresh_s=3600))
    try:
        assert await keys.key("k1") is not None
        assert len(keys.keys) == MAX_KEYS and issuer.jwks_fetches == 1
        assert await keys.key("never-published") is None  # one refetch
        assert await keys.key("nor-this") is None  # within the interval: none
        assert issuer.jwks_fetches == 2
    finally:
        await keys.aclose()


@pytest.mark.anyio
async def test_a_token_expired_within_the_leeway_is_taken_beyond_it_not(issuer: Issuer) -> None:
    settings = OAuthSettings(issuer=issuer.url, public_url="http://127.0.0.1:1", leeway_s=30)
    keys = IssuerKeys(settings)
    verifier = TokenVerifier(settings, keys)
    try:
        taken = await verifier.check(issuer.token("alice", AUDIENCE, ttl_s=-10), AUDIENCE)
        assert not isinstance(taken, str) and taken.subject == "alice" and taken.scopes == ["vault:read"]
        assert await verifier.check(issuer.token("alice", AUDIENCE, ttl_s=-60), AUDIENCE) == "the token has expired"
        token = issuer.token("alice", [AUDIENCE, "other"], without=("scope",), scp=["vault:write"])
        listed = await verifier.check(token, AUDIENCE)
        assert not isinstance(listed, str) and "vault:write" in listed.scopes
    finally:
        await keys.aclose()


@pytest.mark.anyio
async def test_the_subject_may_come_from_another_claim(issuer: Issuer) -> None:
    settings = OAuthSettings(issuer=issuer.url, public_url="http://127.0.0.1:1", subject_claim="preferred_username")
    keys = IssuerKeys(settings)
    verifier = TokenVerifier(settings, keys)
    try:
        named = await verifier.check(issuer.token("9f1c-opaque", AUDIENCE, preferred_username="alice"), AUDIENCE)
        assert not isinstance(named, str) and named.subject == "alice"
        unnamed = await verifier.check(issuer.token("9f1c-opaque", AUDIENCE), AUDIENCE)
        assert unnamed == "the token names no subject (preferred_username)"
    finally:
        await keys.aclose()

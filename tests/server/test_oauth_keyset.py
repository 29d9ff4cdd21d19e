"""The issuer's key set when it misbehaves, against a real issuer over loopback HTTP (``support.oauth_issuer``,
whose key set can trickle, hang or carry malformed keys): every fetch ends by its deadline, concurrent requests
share one fetch and are refused at once while fetching fails, tokens work again soon after the issuer recovers,
one malformed key costs only itself, and a key the issuer withdraws stops working at the next fetch of the set.

The deadline and the backoff are shortened here (the defaults are seconds); the slow test at the end runs the
real server with its defaults and prints what waiting requests get and when."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest
from support.mcp_helpers import free_port, history_under, start_http, stop
from support.oauth_issuer import Issuer
from support.oauth_rs import INIT, post, signing_issuer

from vaultsync.hardened.access import Grant, OAuthSettings
from vaultsync.server.oauth import keys as keyset
from vaultsync.server.oauth.keys import IssuerKeys
from vaultsync.server.oauth.verify import TokenVerifier, Unavailable

AUDIENCE = "http://127.0.0.1:1/mcp"
DEADLINE_S = 1.0
GUARD_S = 8 * DEADLINE_S
"""The longest a test waits for an answer: a request that hangs past it fails the test."""


@pytest.fixture
def issuer(monkeypatch: pytest.MonkeyPatch) -> Iterator[Issuer]:
    monkeypatch.setattr(keyset, "FETCH_DEADLINE_S", DEADLINE_S)
    monkeypatch.setattr(keyset, "RETRY_MIN_S", 0.2)
    monkeypatch.setattr(keyset, "RETRY_MAX_S", 0.5)
    with Issuer() as iss:
        iss.add_key("k1")
        iss.trickle_s = 0.2
        yield iss


def verifier_of(issuer: Issuer, **settings: object) -> TokenVerifier:
    oauth = OAuthSettings(issuer=issuer.url, public_url="http://127.0.0.1:1", jwks_refresh_s=0, **settings)  # type: ignore[arg-type]
    return TokenVerifier(oauth, IssuerKeys(oauth))


async def until_accepted(verifier: TokenVerifier, token: str) -> int:
    """Present ``token`` every 0.1 s until it is accepted (at most ``GUARD_S``); how many refusals came first."""
    refused = 0
    with anyio.fail_after(GUARD_S):
        while isinstance(await verifier.check(token, AUDIENCE), str):
            refused += 1
            await anyio.sleep(0.1)
    return refused


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["trickle", "hang"])
@pytest.mark.slow
async def test_a_key_set_that_trickles_or_hangs_is_given_up_on_then_tried_again(issuer: Issuer, mode: str) -> None:
    issuer.jwks_mode = mode
    verifier = verifier_of(issuer)
    token = issuer.token("alice", AUDIENCE)
    try:
        with anyio.fail_after(GUARD_S):
            first = await verifier.check(token, AUDIENCE)
        assert isinstance(first, Unavailable) and "did not answer" in first and "within 1 s" in first
        fetches = issuer.jwks_fetches
        with anyio.fail_after(DEADLINE_S / 4):  # during the backoff: refused at once, the issuer not asked
            again = await verifier.check(token, AUDIENCE)
        assert isinstance(again, Unavailable) and issuer.jwks_fetches == fetches
        issuer.jwks_mode = "serve"
        await until_accepted(verifier, token)
        assert issuer.jwks_fetches <= fetches + 2
    finally:
        await verifier.keys.aclose()


@pytest.mark.anyio
async def test_requests_behind_a_hanging_key_set_share_one_fetch_and_fail_together(issuer: Issuer) -> None:
    issuer.jwks_mode = "hang"
    verifier = verifier_of(issuer)
    answers: list[object] = []

    async def present(i: int) -> None:
        answers.append(await verifier.check(issuer.token(f"user{i}", AUDIENCE), AUDIENCE))

    try:
        with anyio.fail_after(GUARD_S):
            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(present, i)
        assert len(answers) == 8 and all(isinstance(a, Unavailable) for a in answers)
        assert issuer.jwks_fetches == 1
    finally:
        await verifier.keys.aclose()


@pytest.mark.anyio
async def test_a_held_key_is_used_at_once_while_the_stale_set_is_fetched_again_behind(
    issuer: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    verifier = verifier_of(issuer)
    keys = verifier.keys
    try:
        assert not isinstance(await verifier.check(issuer.token("alice", AUDIENCE), AUDIENCE), str)
        issuer.jwks_mode = "hang"
        monkeypatch.setattr(keyset, "CACHE_S", 0.05)
        time.sleep(0.1)
        async with anyio.create_task_group() as background:
            keys.background = background
            with anyio.fail_after(DEADLINE_S / 2):  # not behind the hanging fetch
                for i in range(4):
                    assert not isinstance(await verifier.check(issuer.token(f"u{i}", AUDIENCE), AUDIENCE), str)
            await anyio.sleep(DEADLINE_S / 2)
            assert issuer.jwks_fetches == 2  # one fetch behind, shared by every request
            issuer.jwks_mode = "serve"
        assert keys.failure is not None and list(keys.keys) == ["k1"]  # that fetch failed; the keys held stay
    finally:
        keys.background = None
        await keys.aclose()


@pytest.mark.anyio
async def test_a_malformed_key_is_skipped_with_one_warning_and_costs_no_other_key(
    issuer: Issuer, caplog: pytest.LogCaptureFixture
) -> None:
    good = issuer.jwks()["keys"][0]
    issuer.extra_keys = [
        {**good, "kid": ["k1", "k2"]},  # a kid that is a JSON array
        {"kty": "EC", "kid": "broken-ec", "crv": "P-256", "x": "not base64!", "y": ""},
        "not a key",
        {**good, "kid": "k1"},  # the same kid again
    ]
    verifier = verifier_of(issuer)
    try:
        with caplog.at_level(logging.WARNING, logger="vaultsync.server.oauth.keys"):
            accepted = await verifier.check(issuer.token("alice", AUDIENCE), AUDIENCE)
            await verifier.keys.key("never-published")  # fetches the same set again: no second warning
        assert not isinstance(accepted, str) and accepted.subject == "alice"
        assert issuer.jwks_fetches == 2 and list(verifier.keys.keys) == ["k1"]
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "skipped 4 of the OAuth issuer's keys" in warnings[0]
        assert "key 2: its kid is not a string" in warnings[0] and "key 5: a second key" in warnings[0]
    finally:
        await verifier.keys.aclose()


@pytest.mark.anyio
async def test_a_token_of_a_withdrawn_key_is_refused_from_the_next_fetch_of_the_set(
    issuer: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    issuer.add_key("k2")
    verifier = verifier_of(issuer)
    token = issuer.token("alice", AUDIENCE, kid="k2")
    try:
        assert not isinstance(await verifier.check(token, AUDIENCE), str)
        assert not isinstance(await verifier.check(token, AUDIENCE), str)  # remembered
        issuer.published.remove("k2")
        monkeypatch.setattr(keyset, "CACHE_S", 0.05)  # the set is older than this from now on
        time.sleep(0.1)
        assert await verifier.check(token, AUDIENCE) == "the token is signed by a key the issuer does not publish"
        assert not isinstance(await verifier.check(issuer.token("bob", AUDIENCE, kid="k1"), AUDIENCE), str)
    finally:
        await verifier.keys.aclose()


# ------------------------------------------------------------ claims of the wrong type, subjects and groups


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": str(int(time.time()) + 300)}, "the token's exp claim is not a number"),
        ({"nbf": "0"}, "the token's nbf claim is not a number"),
        ({"iat": True}, "the token's iat claim is not a number"),
        ({"scope": ["vault:read"]}, "the token's scope claim is not a space-separated string"),
        ({"groups": {"staff": True}}, "the token's groups claim is not a string or a list of strings"),
        ({"groups": ["staff", 7]}, "the token's groups claim is not a string or a list of strings"),
        ({"client_id": 12}, "the token's client_id claim is not a string"),
    ],
)
@pytest.mark.slow
async def test_a_claim_of_the_wrong_type_refuses_the_token(issuer: Issuer, claims: dict, reason: str) -> None:
    verifier = verifier_of(issuer)
    try:
        assert await verifier.check(issuer.token("alice", AUDIENCE, **claims), AUDIENCE) == reason
    finally:
        await verifier.keys.aclose()


@pytest.mark.anyio
async def test_a_groups_string_is_one_group_and_subjects_are_not_groups(issuer: Issuer) -> None:
    grant = Grant(admin=("group:staff",), read=("alice",))
    verifier = verifier_of(issuer)
    try:
        one = await verifier.check(issuer.token("mallory", AUDIENCE, groups="not staff"), AUDIENCE)
        assert not isinstance(one, str) and one.claims == {"iss": issuer.url, "groups": ["not staff"]}
        assert grant.level(one.subject, one.claims["groups"]) == 0
        named = await verifier.check(issuer.token("group:staff", AUDIENCE), AUDIENCE)
        assert not isinstance(named, str) and grant.level(named.subject, []) == 0
        member = await verifier.check(issuer.token("bob", AUDIENCE, groups=["staff"]), AUDIENCE)
        assert not isinstance(member, str) and grant.level(member.subject, member.claims["groups"]) == 3
        assert grant.level("alice", []) == 1 and grant.level("mallory", ["alice"]) == 0
        assert Grant(read=("*",)).level("group:staff", []) == 1
    finally:
        await verifier.keys.aclose()


# ------------------------------------------------------------ the real server, its defaults, timings printed


def _present_together(url: str, tokens: list[str]) -> list[tuple[int, float, str]]:
    """Each token posted at once (an ``initialize``): (status, seconds until answered, reason) each."""

    def one(token: str) -> tuple[int, float, str]:
        started = time.monotonic()
        answer = post(url, INIT, token)
        reason = answer.json().get("error_description", "") if answer.status_code != 200 else ""
        return answer.status_code, time.monotonic() - started, reason

    with ThreadPoolExecutor(len(tokens)) as pool:
        return list(pool.map(one, tokens))


def _show(phase: str, answers: list[tuple[int, float, str]]) -> None:
    times = ", ".join(f"{s:.1f}" for _, s, _ in answers)
    print(f"{phase}: HTTP {sorted({a[0] for a in answers})} after [{times}] s; {answers[0][2] or 'accepted'}")


@pytest.mark.slow
def test_the_server_under_a_key_set_that_trickles_hangs_then_recovers(tmp_path: Path) -> None:
    """``pytest -s`` prints what eight concurrent requests get in each phase, and how soon after the issuer
    recovers a token works again (the server's defaults: a fetch deadline of 5 s, retries after 1 s to 5 s)."""
    history = history_under(tmp_path)
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    with signing_issuer() as issuer:
        issuer.jwks_mode, issuer.trickle_s = "trickle", 4.0  # from the start: the first fetch trickles
        proc = start_http(history["db"], history["root"], port, "--oauth-issuer", issuer.url, "--public-url", public)
        try:
            url = f"{public}/mcp"
            tokens = [issuer.token(f"user{i}", url) for i in range(8)]
            trickled = _present_together(url, tokens)
            _show("trickle, 8 at once", trickled)
            during = _present_together(url, tokens[:1])
            _show("trickle, right after", during)
            assert {a[0] for a in trickled + during} == {503}
            assert all("did not answer" in a[2] for a in trickled)
            time.sleep(1.5)  # past the first backoff
            issuer.jwks_mode = "hang"
            hung = _present_together(url, tokens)
            _show("hang, 8 at once", hung)
            assert {a[0] for a in hung} == {503}
            issuer.jwks_mode = "serve"
            recovered = time.monotonic()
            refused = 0
            for _ in range(120):  # bounded: 30 s
                if post(url, INIT, tokens[0]).status_code == 200:
                    break
                refused += 1
                time.sleep(0.25)
            works = time.monotonic() - recovered
            print(f"recovered: a token works again {works:.1f} s after the issuer answers ({refused} refusals before)")
            after = _present_together(url, tokens)
            _show("recovered, 8 at once", after)
            assert {a[0] for a in after} == {200}
            print(f"key set requests the issuer saw: {issuer.jwks_fetches}")
        finally:
            stderr = stop(proc)
    assert "Traceback" not in stderr, stderr

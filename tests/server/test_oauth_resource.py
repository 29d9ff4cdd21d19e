"""``vaultsync serve --http --oauth-issuer URL --public-url URL`` as a real subprocess: an OAuth 2.1 resource server
taking the JWTs of a small issuer (``support.oauth_issuer``: metadata and keys over real HTTP). Its metadata
document, its 401/400/403 answers and their challenges, every refusal of a bad token, key rotation, scopes as
tool permissions (listed and called), the official MCP client with a bearer header, the subject recorded as the
writer, and the static token of local clients beside it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from support.hardened_helpers import authed
from support.mcp_helpers import T1, T2, free_port, history_under, hit_notes, sc, start_http, stop
from support.oauth_issuer import Issuer
from support.oauth_rs import HEADERS, INIT, WRITES, call, challenge, post, signing_issuer

READ_WRITE = "vault:read vault:write"
STATIC = "static-token-0123456789abcdef"


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with signing_issuer() as iss:
        yield iss


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, issuer: Issuer) -> Iterator[dict[str, Any]]:
    """One read-write server for the module, its public URL its own loopback address."""
    base = tmp_path_factory.mktemp("oauth-rs")
    history = history_under(base)
    token_file = base / "token"
    token_file.write_text(STATIC)
    token_file.chmod(0o600)
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    proc = start_http(
        history["db"],
        history["root"],
        port,
        "--allow-writes",
        "--token-file",
        str(token_file),
        "--oauth-issuer",
        issuer.url,
        "--public-url",
        public,
    )
    yield {**history, "url": f"{public}/mcp", "public": public, "proc": proc}
    stderr = stop(proc)
    assert "Traceback" not in stderr, stderr
    assert STATIC not in stderr  # no token is ever logged
    assert "WARNING: anyone the OAuth issuer signs in may use this vault; name who may with --oauth-allow" in stderr


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])
def test_the_metadata_document_names_the_issuer_and_the_resource(
    server: dict[str, Any], issuer: Issuer, path: str
) -> None:
    answer = httpx2.get(f"{server['public']}{path}", timeout=30)
    assert answer.status_code == 200
    assert answer.json() == {
        "resource": server["url"],
        "authorization_servers": [issuer.url],
        "scopes_supported": ["vault:read", "vault:write"],
        "bearer_methods_supported": ["header"],
        "resource_name": "vaultsync",
    }


def test_no_token_is_401_with_the_metadata_url_and_scope_but_no_error(server: dict[str, Any]) -> None:
    answer = post(server["url"], INIT)
    assert answer.status_code == 401
    www = challenge(answer)
    metadata = f"{server['public']}/.well-known/oauth-protected-resource/mcp"
    assert www == f'Bearer scope="vault:read vault:write", resource_metadata="{metadata}"'
    assert "error=" not in www


def test_a_new_signing_key_is_fetched_when_a_token_names_it(server: dict[str, Any], issuer: Issuer) -> None:
    """Rotation: the issuer publishes a new key after the server fetched its keys; a token signed with it is
    taken (one more fetch of the key set), and the old key still works."""
    assert post(server["url"], INIT, issuer.token("alice", server["url"])).status_code == 200
    before = issuer.jwks_fetches
    issuer.add_key("k2", alg="ES256")
    answer = post(server["url"], INIT, issuer.token("alice", server["url"], kid="k2"))
    assert answer.status_code == 200, challenge(answer)
    assert issuer.jwks_fetches == before + 1
    assert post(server["url"], INIT, issuer.token("alice", server["url"], kid="k1")).status_code == 200


def _bad_tokens(issuer: Issuer, url: str) -> dict[str, tuple[str, str]]:
    """name -> (token, what the refusal says)."""
    if "stranger" not in issuer.private:
        issuer.add_key("stranger", publish=False)
    return {
        "another audience": (issuer.token("alice", "http://127.0.0.1:1/mcp"), "another resource"),
        "expired": (issuer.token("alice", url, ttl_s=-120), "expired"),
        "not valid yet": (issuer.token("alice", url, nbf=int(time.time()) + 600), "not valid yet"),
        "wrong issuer": (issuer.token("alice", url, iss="http://127.0.0.1:2"), "another issuer"),
        "unknown key": (issuer.token("alice", url, kid="stranger"), "key the issuer does not publish"),
        "alg none": (issuer.unsigned("alice", url), "algorithm 'none' is not accepted"),
        "HS256 with the public key": (issuer.hs256_with_public_key("alice", url), "algorithm 'HS256' is not accepted"),
        "no subject": (issuer.token("alice", url, without=("sub",)), "lacks a required claim"),
        "not a JWT": ("opaque-token-without-introspection", "not a JWT"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "another audience",
        "expired",
        "not valid yet",
        "wrong issuer",
        "unknown key",
        "alg none",
        "HS256 with the public key",
        "no subject",
        "not a JWT",
    ],
)
def test_a_bad_token_is_401_invalid_token_saying_why(server: dict[str, Any], issuer: Issuer, case: str) -> None:
    token, reason = _bad_tokens(issuer, server["url"])[case]
    answer = post(server["url"], INIT, token)
    assert answer.status_code == 401, case
    www = challenge(answer)
    assert www.startswith('Bearer error="invalid_token"') and reason in www, www
    assert "resource_metadata=" in www
    assert reason in answer.json()["error_description"]


def test_a_token_in_the_query_string_is_refused_even_a_good_one(server: dict[str, Any], issuer: Issuer) -> None:
    good = issuer.token("alice", server["url"])
    for token in (None, good):
        answer = post(server["url"], INIT, token, access_token=good)
        assert answer.status_code == 400
        assert challenge(answer).startswith('Bearer error="invalid_request"')


def test_a_token_without_any_vault_scope_is_403_asking_for_read(server: dict[str, Any], issuer: Issuer) -> None:
    answer = post(server["url"], INIT, issuer.token("alice", server["url"], scope="openid profile"))
    assert answer.status_code == 403
    assert 'error="insufficient_scope"' in challenge(answer) and 'scope="vault:read"' in challenge(answer)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # auto negotiates 2026-07-28
async def test_a_read_only_token_sees_no_write_tool_and_a_call_is_403_naming_the_scope(
    server: dict[str, Any], issuer: Issuer, mode: str
) -> None:
    token = issuer.token("reader", server["url"], scope="vault:read")
    async with Client(authed(server["url"], token), mode=mode) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert "search_notes" in names and not names & WRITES
    answer = post(server["url"], call("create_note", {"path": "X.md", "content": "x"}), token)
    assert answer.status_code == 403
    www = challenge(answer)
    assert www.startswith('Bearer error="insufficient_scope"')
    assert 'scope="vault:write"' in www and "resource_metadata=" in www
    batch = [call("search_notes", {"query": "atlas"}), call("append_to_note", {"path": "Inbox.md", "text": "x"})]
    assert post(server["url"], batch, token).status_code == 403  # a batch is checked message by message


@pytest.mark.anyio
async def test_the_official_client_lists_searches_as_of_a_date_and_writes_as_its_subject(
    server: dict[str, Any], issuer: Issuer, cli: Any
) -> None:
    token = issuer.token("alice@example.com", server["url"], scope=READ_WRITE)
    async with Client(authed(server["url"], token)) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert WRITES <= names
        then = sc(await c.call_tool("search_notes", {"query": "kickoff", "as_of": T1}))
        assert hit_notes(then) == ["Projects/Atlas.md"]
        doomed = sc(await c.call_tool("search_notes", {"query": "deleted", "as_of": T2}))
        assert "Doomed.md" in hit_notes(doomed)
        sc(await c.call_tool("create_note", {"path": "From/Alice.md", "content": "# Alice\n\nwritten over OAuth\n"}))
    found = json.loads(cli("changes", "--caller", "alice@example.com", "--json", db=server["db"]).stdout)
    assert [(b["paths"], b["caller"]) for b in found] == [(["From/Alice.md"], "alice@example.com")]


@pytest.mark.anyio
async def test_the_static_token_of_local_clients_still_works(server: dict[str, Any]) -> None:
    async with Client(authed(server["url"], STATIC)) as c:
        assert WRITES <= {t.name for t in (await c.list_tools()).tools}


def test_the_probes_need_no_token(server: dict[str, Any]) -> None:
    assert httpx2.get(f"{server['public']}/health", timeout=30).status_code == 200


def test_a_malformed_body_with_a_good_token_reaches_the_mcp_handler(server: dict[str, Any], issuer: Issuer) -> None:
    """The gate reads the body only to find tool calls: what it cannot parse is answered by the MCP handler."""
    token = issuer.token("alice", server["url"])
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    answer = httpx2.post(server["url"], content=b"{not json", headers=headers, timeout=30)
    assert answer.status_code == 400 and "www-authenticate" not in answer.headers
    assert answer.json()["error"]["code"] == -32700  # JSON-RPC parse error

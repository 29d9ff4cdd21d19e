"""OAuth 2.1 end to end: the official MCP client's flow (``mcp.client.auth``) against ``vaultsync serve --http`` as a
resource server, with a real authorization server (panva's oidc-provider, a Node process; tests/support/oidc.py).

The client discovers the Protected Resource Metadata from the 401, then the issuer's metadata, registers by Dynamic
Client Registration, signs in (the issuer's development login: any subject) through authorization code + PKCE with
the resource indicator, and gets a JWT access token for this server's URL; it lists the tools and searches as of a
past date; with tokens that live two seconds, it refreshes without a second sign-in."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
import jwt
import pytest
from mcp import Client
from support.mcp_helpers import T2, free_port, history_under, hit_notes, sc, start_http, stop
from support.oidc import Browser, MemoryStorage, issuer_missing, oauth_client, start_issuer

pytestmark = [pytest.mark.client, pytest.mark.anyio]
SHORT_TTL = 2


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory):
    if (reason := issuer_missing()) is not None:
        pytest.skip(reason)
    found = start_issuer(tmp_path_factory.mktemp("issuer") / "issuer.log", ISSUER_SHORT_TTL=str(SHORT_TTL))
    yield found
    found.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, issuer):
    """A read-only server over the small history, its public URL its own loopback address."""
    history = history_under(tmp_path_factory.mktemp("oauth-e2e"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_http(history["db"], history["root"], port, "--oauth-issuer", issuer.url, "--public-url", base)
    yield {**history, "url": f"{base}/mcp", "base": base}
    stderr = stop(proc)
    assert "Traceback" not in stderr, stderr


def claims(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


async def test_the_sdk_client_discovers_registers_authorizes_and_searches_as_of_a_date(server: dict, issuer) -> None:
    browser, storage = Browser("alice"), MemoryStorage()
    async with Client(oauth_client(server["url"], browser, storage)) as c:
        names = {tool.name for tool in (await c.list_tools()).tools}
        assert "search_notes" in names and "create_note" not in names  # a read-only server
        past = sc(await c.call_tool("search_notes", {"query": "Deleted", "mode": "keyword", "as_of": T2}))
        now = sc(await c.call_tool("search_notes", {"query": "Deleted", "mode": "keyword"}))
    assert hit_notes(past) == ["Doomed.md"] and hit_notes(now) == []
    # One sign-in: authorization code with PKCE (S256) and the resource indicator naming this server.
    [visit] = browser.visits
    asked = {key: values[0] for key, values in parse_qs(urlparse(visit).query).items()}
    assert visit.startswith(f"{issuer.url}/auth?")
    assert asked["resource"] == server["url"] and asked["code_challenge_method"] == "S256"
    assert "vault:read" in asked["scope"].split()
    # Registered by DCR (an issued client id, not a URL), and the token is a JWT for this server and this person.
    assert storage.client is not None and not storage.client.client_id.startswith("https://")
    assert storage.tokens is not None and storage.tokens.refresh_token
    token = claims(storage.tokens.access_token)
    assert token["aud"] == server["url"] and token["iss"] == issuer.url and token["sub"] == "alice"


async def test_the_metadata_names_the_issuer_and_a_refused_request_names_it(server: dict, issuer) -> None:
    async with httpx2.AsyncClient() as http:
        refused = await http.post(server["url"], json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert refused.status_code == 401
        challenge = refused.headers["www-authenticate"]
        prm_url = f"{server['base']}/.well-known/oauth-protected-resource/mcp"
        assert f'resource_metadata="{prm_url}"' in challenge and "error=" not in challenge
        prm = (await http.get(prm_url)).json()
    assert prm["resource"] == server["url"] and prm["authorization_servers"] == [issuer.url]
    assert "vault:read" in prm["scopes_supported"]


async def test_an_expired_access_token_is_refreshed_without_a_second_sign_in(server: dict) -> None:
    browser, storage = Browser("bob"), MemoryStorage()
    transport = oauth_client(server["url"], browser, storage, client_name="vaultsync tests (short-lived)")
    async with Client(transport) as c:
        assert sc(await c.call_tool("vault_status", {}))
        first = storage.tokens
        assert first is not None and first.expires_in == SHORT_TTL
        await anyio.sleep(SHORT_TTL + 0.5)  # the client's copy has expired: its next request refreshes first
        assert hit_notes(sc(await c.call_tool("search_notes", {"query": "Deleted", "as_of": T2}))) == ["Doomed.md"]
    assert len(browser.visits) == 1  # no second authorization
    assert len(storage.tokens_seen) >= 2 and storage.tokens is not None
    assert storage.tokens.access_token != first.access_token
    assert claims(storage.tokens.access_token)["sub"] == "bob"


@pytest.mark.parametrize("registration", ["cimd", "dcr"])
async def test_a_read_only_token_steps_up_to_write_through_the_sdk_flow(tmp_path, registration: str) -> None:
    """A client signed in while the server was read-only holds a ``vault:read`` token; the operator restarts the
    server with writes on the same URL; the client's call of a write tool is answered 403 ``insufficient_scope``
    naming ``vault:write`` (the header exactly), and the SDK's flow (SEP-2350) signs in again asking for the union of
    the scopes. A client registered by its metadata document (CIMD) gets the wider token and its call, sent again,
    succeeds as the same subject. One registered by DCR does not: the SDK registered it with the scope of its first
    sign-in, and the issuer refuses any other for that client (RFC 7591 ``scope``): ``invalid_scope``."""
    from mcp.client.streamable_http import streamable_http_client
    from support.oidc import ClientDocumentSite, oauth_provider
    from support.tls_proxy import LocalCA

    if (reason := issuer_missing()) is not None:
        pytest.skip(reason)
    ca = LocalCA.create(tmp_path / "tls")
    issuer = start_issuer(tmp_path / "issuer.log", ISSUER_ALLOW_LOOPBACK_FETCH="1", NODE_EXTRA_CA_CERTS=str(ca.root))
    site = ClientDocumentSite(ca.cert, ca.key) if registration == "cimd" else None
    history = history_under(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/mcp"
    oauth = ("--oauth-issuer", issuer.url, "--public-url", base)
    seen: list[tuple[int, str, str]] = []

    async def record(response: httpx2.Response) -> None:
        seen.append((response.status_code, str(response.request.url), response.headers.get("www-authenticate", "")))

    browser, storage = Browser("carol"), MemoryStorage()
    provider = oauth_provider(url, browser, storage, client_metadata_url=site.url if site else None)
    http = httpx2.AsyncClient(auth=provider, timeout=30, event_hooks={"response": [record]})
    proc = start_http(history["db"], history["root"], port, *oauth)
    failed: BaseException | None = None
    try:
        async with Client(streamable_http_client(url, http_client=http)) as c:
            assert "create_note" not in {t.name for t in (await c.list_tools()).tools}
            assert storage.tokens is not None and storage.tokens.scope is not None
            read_only = storage.tokens.access_token
            assert "vault:write" not in storage.tokens.scope.split()
            assert "Traceback" not in stop(proc)
            proc = start_http(history["db"], history["root"], port, *oauth, "--allow-writes")
            try:
                made = await c.call_tool("create_note", {"path": "Stepped.md", "content": "# Stepped\n\nup.\n"})
                assert not made.is_error, made.content
            except Exception as exc:  # the DCR case: the step-up's authorization is refused
                failed = exc
    except BaseException as exc:  # the session's task group surfaces the refusal as an error group
        failed = exc
    finally:
        stderr = stop(proc)
        await http.aclose()
        if site is not None:
            site.stop()
        issuer.stop()
    assert "Traceback" not in stderr, stderr
    refused = [www for status, where, www in seen if status == 403 and where == url]
    assert refused == [
        'Bearer error="insufficient_scope", error_description="create_note needs the scope vault:write", '
        f'scope="vault:write", resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
    ]
    assert len(browser.visits) == 2  # a second sign-in, asking for what it had and what it lacked, for this server
    asked = {key: values[0] for key, values in parse_qs(urlparse(browser.visits[1]).query).items()}
    assert {"vault:read", "vault:write"} <= set(asked["scope"].split()) and asked["resource"] == url
    if registration == "dcr":
        assert failed is not None and "invalid_scope" in repr(failed)
        assert storage.client is not None and storage.client.scope is not None
        assert "vault:write" not in storage.client.scope.split()  # registered with the first sign-in's scope
        assert not (history["root"] / "Stepped.md").exists()
        return
    assert failed is None, failed
    assert storage.client is not None and storage.client.client_id == site.url  # type: ignore[union-attr]
    assert (history["root"] / "Stepped.md").read_text(encoding="utf-8") == "# Stepped\n\nup.\n"
    assert storage.tokens.access_token != read_only and "vault:write" in (storage.tokens.scope or "").split()
    assert claims(storage.tokens.access_token)["sub"] == "carol"

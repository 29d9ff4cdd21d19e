"""Streamable HTTP sessions are bounded per caller and in all: a caller opening sessions in a (bounded) loop
closes only its own oldest idle ones, another caller's idle session and new clients keep working, and a
session with a request in progress is never the one closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from support.hardened_helpers import start_hardened_http, token_entry, write_manifest
from support.mcp_helpers import free_port, history_under, http_client, start_http, stop

from vaultsync.server import sessions

ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "loop", "version": "0"}},
}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


@pytest.fixture(scope="module")
def two_callers(tmp_path_factory: pytest.TempPathFactory) -> Any:
    base = tmp_path_factory.mktemp("sessions")
    history = history_under(base)
    port = free_port()
    body = f'[http]\nbind = "127.0.0.1:{port}"\n' + token_entry(ALICE, "alice", ["owner"]) + token_entry(BOB, "bob", [])
    proc = start_hardened_http(history["root"], write_manifest(base / "m.toml", history["db"], body), port)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stderr = stop(proc)
        assert "Traceback" not in stderr, stderr


def open_session(client: httpx2.Client, url: str, token: str) -> str:
    answer = client.post(url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    return answer.headers["mcp-session-id"]


def ping(client: httpx2.Client, url: str, token: str, sid: str) -> int:
    headers = {**HEADERS, "Authorization": f"Bearer {token}", "Mcp-Session-Id": sid}
    return client.post(url, json=PING, headers=headers).status_code


def test_one_caller_looping_on_initialize_closes_only_its_own_oldest_idle_sessions(two_callers: str) -> None:
    url = two_callers
    flood = sessions.MAX_SESSIONS_PER_CALLER + 8
    with httpx2.Client(timeout=30) as client:
        bobs = open_session(client, url, BOB)  # idle all along
        alices = [open_session(client, url, ALICE) for _ in range(flood)]  # a bounded loop, every one admitted
        assert ping(client, url, BOB, bobs) == 200, "another caller's idle session survives the loop"
        assert [ping(client, url, ALICE, sid) for sid in alices[:8]] == [404] * 8, "its oldest idle ones closed"
        kept = [ping(client, url, ALICE, sid) for sid in alices[8:]]
        assert kept == [200] * sessions.MAX_SESSIONS_PER_CALLER

    async def fresh() -> None:
        async with Client(http_client(url, BOB), mode="legacy") as c:
            assert (await c.list_tools()).tools is not None

    anyio.run(fresh)


def test_a_session_with_a_request_in_progress_is_never_the_one_closed(two_callers: str) -> None:
    """The oldest session has its GET stream open (busy): opening more closes the next oldest idle ones."""
    url = two_callers
    auth = {**HEADERS, "Authorization": f"Bearer {ALICE}"}
    with httpx2.Client(timeout=30) as client:
        first = open_session(client, url, ALICE)
        stream = {**auth, "Mcp-Session-Id": first, "Accept": "text/event-stream"}
        with client.stream("GET", url, headers=stream) as held:
            assert held.status_code == 200
            others = [open_session(client, url, ALICE) for _ in range(sessions.MAX_SESSIONS_PER_CALLER)]
            assert ping(client, url, ALICE, others[0]) == 404 and ping(client, url, ALICE, others[1]) == 200
            assert ping(client, url, ALICE, first) == 200


@pytest.mark.anyio
async def test_the_sessions_of_all_callers_are_bounded_in_all(tmp_path: Path) -> None:
    """In process, with a small total: opening more sessions than the total closes the oldest idle ones."""
    from vaultsync import Vault
    from vaultsync.server import ServeConfig, build_server
    from vaultsync.server.sdk import lowlevel_server
    from vaultsync.server.transports import http_app

    history = history_under(tmp_path)
    token = "in-process-token-0123456789"
    with Vault.open(history["db"], name=history["name"]) as vault:
        mcp = build_server(ServeConfig.of(vault))
        app = http_app(mcp, "127.0.0.1", 8765, token=token)
        bound = lowlevel_server(mcp).session_manager.asgi_app
        assert isinstance(bound, sessions.SessionBound)
        bound.total = 3
        transport = httpx2.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765", timeout=30) as client,
        ):
            auth = {**HEADERS, "Authorization": f"Bearer {token}"}
            opened = []
            for _ in range(5):
                answer = await client.post("/mcp", json=INIT, headers=auth)
                assert answer.status_code == 200, answer.text
                opened.append(answer.headers["mcp-session-id"])
            statuses = [
                (await client.post("/mcp", json=PING, headers={**auth, "Mcp-Session-Id": sid})).status_code
                for sid in opened
            ]
            assert statuses == [404, 404, 200, 200, 200] and len(bound.sessions) == 3


@pytest.mark.slow
def test_behind_oauth_the_sessions_of_one_subject_are_bounded_whatever_its_clients(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """One subject looping through two OAuth clients shares one bound; another subject's idle session stays."""
    from support.oauth_rs import signing_issuer

    base = tmp_path_factory.mktemp("oauth-sessions")
    history = history_under(base)
    with signing_issuer() as issuer:
        port = free_port()
        public = f"http://127.0.0.1:{port}"
        proc = start_http(history["db"], history["root"], port, "--oauth-issuer", issuer.url, "--public-url", public)
        url = f"{public}/mcp"
        try:
            with httpx2.Client(timeout=30) as client:
                alice = issuer.token("alice", url)
                alices = open_session(client, url, alice)
                tokens = [issuer.token("mallory", url, client_id=name) for name in ("one", "two")]
                flood = sessions.MAX_SESSIONS_PER_CALLER + 8
                mallorys = [(tokens[i % 2], open_session(client, url, tokens[i % 2])) for i in range(flood)]
                assert ping(client, url, alice, alices) == 200
                statuses = [ping(client, url, token, sid) for token, sid in mallorys]
                assert statuses == [404] * 8 + [200] * sessions.MAX_SESSIONS_PER_CALLER
        finally:
            stderr = stop(proc)
    assert "Traceback" not in stderr, stderr

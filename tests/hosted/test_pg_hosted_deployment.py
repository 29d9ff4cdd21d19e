"""The hosted deployment of ``examples/hosted`` runs as written, behind nginx with TLS: a real PostgreSQL, one
watcher per vault (the watcher unit), two stateless servers from the example manifest (the serve unit), the example
nginx site with a certificate from a local CA, and a real authorization server (oidc-provider). The official MCP
client, trusting only that CA, finds the metadata at the public https URL, names that URL as the resource,
registers by DCR or by its client ID metadata document (CIMD), and reads only the vaults its subject may.

Where the units can run as another user (``support/units.py``: as root), they run exactly as written: their
environment files, their users, and the database roles of ``examples/postgres/roles.sql`` (the servers as the
reader role, which answers every tool and moves the audit log's head)."""

from __future__ import annotations

from pathlib import Path

import httpx2
import jwt
import pytest
from mcp import Client, MCPError
from support.hosted import INSTALLED, Deployment, jsonl, wait_recorded
from support.mcp_helpers import hit_notes, sc
from support.oidc import Browser, ClientDocumentSite, MemoryStorage, issuer_missing, oauth_client
from support.tls_proxy import nginx_binary
from support.units import Machine, unavailable

pgserver = pytest.importorskip("support.pgserver")
pytestmark = [pytest.mark.pg, pytest.mark.client, pytest.mark.anyio]

GRANTS = {"team": {"read": ["group:staff"], "write": ["alice"]}, "alice": {"read": ["alice"], "write": ["alice"]}}
GROUPS = '{"bob": ["staff"]}'


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory):
    for reason in (issuer_missing(), None if nginx_binary() else "nginx not found (make deps installs it as root)"):
        if reason:
            pytest.skip(reason)
    if not INSTALLED.exists():
        pytest.skip(f"the vaultsync command is not installed next to {__import__('sys').executable}")
    dsn = pgserver.fresh_or_skip("hosted")
    root = tmp_path_factory.mktemp("hosted")
    machine = None if unavailable() else Machine.create(pgserver.shared())
    if machine is not None:
        examples = Path(__file__).resolve().parents[2] / "examples" / "hosted"
        for name in ("vaultsync.env", "vaultsync-serve.env"):
            machine.install(examples / name, f"/etc/vaultsync/{name}")
        dsn = machine.superuser_dsn
    place = (
        (lambda name: machine.path(f"/srv/vaults/{name}")) if machine else (lambda name: root / "srv" / "vaults" / name)
    )
    folders = {"team": place("team"), "alice": place("alice")}
    for folder in folders.values():
        folder.mkdir(parents=True, mode=0o755)
    (folders["team"] / "Handbook.md").write_text("# Handbook\n\nKickoff on Monday for the team.\n", encoding="utf-8")
    (folders["alice"] / "Diary.md").write_text("# Diary\n\nKickoff of my own private plan.\n", encoding="utf-8")
    with Deployment.start(
        root, dsn, folders, GRANTS, servers=2, issuer_env={"ISSUER_GROUPS": GROUPS}, machine=machine
    ) as found:
        wait_recorded(dsn, list(folders))
        yield found
    if machine is not None:
        machine.remove()
    for log in found.server_logs() + [found.log("watch-team"), found.log("watch-alice")]:
        assert "Traceback" not in log, log


async def search(url: str, browser: Browser, storage: MemoryStorage, verify, **kw) -> list[str]:
    async with Client(oauth_client(url, browser, storage, verify=verify, **kw)) as c:
        return hit_notes(sc(await c.call_tool("search_notes", {"query": "kickoff", "mode": "keyword"})))


async def test_the_metadata_seen_through_the_proxy_names_the_public_urls(deployment: Deployment) -> None:
    url = deployment.url("team")
    async with httpx2.AsyncClient(verify=deployment.ca.context()) as http:
        refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert refused.status_code == 401
        prm_url = f"{deployment.public}/.well-known/oauth-protected-resource/vaults/team/mcp"
        assert f'resource_metadata="{prm_url}"' in refused.headers["www-authenticate"]
        prm = (await http.get(prm_url)).json()
    assert prm["resource"] == url and prm["authorization_servers"] == [deployment.issuer.url]
    assert url.startswith("https://localhost:")
    # An https client that does not trust the local CA gets nowhere.
    async with httpx2.AsyncClient() as http:
        with pytest.raises(httpx2.ConnectError):
            await http.get(prm_url)


async def test_a_client_registered_by_its_metadata_document_reads_the_team_vault(deployment: Deployment) -> None:
    site = ClientDocumentSite(deployment.ca.cert, deployment.ca.key)
    try:
        browser, storage = Browser("bob", verify=deployment.ca.context()), MemoryStorage()
        found = await search(
            deployment.url("team"), browser, storage, deployment.ca.context(), client_metadata_url=site.url
        )
    finally:
        site.stop()
    assert found == ["Handbook.md"]
    assert storage.client is not None and storage.client.client_id == site.url and site.fetches >= 1  # CIMD, not DCR
    assert storage.tokens is not None
    token = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert token["aud"] == deployment.url("team") and token["sub"] == "bob" and token["groups"] == ["staff"]


async def test_a_client_registered_by_dcr_reads_its_own_vault_and_is_audited(deployment: Deployment) -> None:
    browser, storage = Browser("alice", verify=deployment.ca.context()), MemoryStorage()
    assert await search(deployment.url("alice"), browser, storage, deployment.ca.context()) == ["Diary.md"]
    assert storage.client is not None and not storage.client.client_id.startswith("https://")
    callers = {
        record.get("caller_id") or record.get("caller") for log in deployment.audit_logs() for record in jsonl(log)
    }
    assert "alice" in callers, callers


READS = {
    "search_notes": {"query": "kickoff", "mode": "keyword"},
    "read_note": {"path": "Diary.md"},
    "note_history": {"path": "Diary.md"},
    "diff_note": {"path": "Diary.md", "from": "2000-01-01"},
    "list_changes": {"since": "2000-01-01"},
    "list_notes": {},
    "get_links": {"path": "Diary.md"},
    "vault_status": {},
}


async def test_the_servers_reader_role_answers_every_tool_and_audits_it(deployment: Deployment) -> None:
    """The servers connect as the example's reader role (when the units run as written): every read tool answers,
    each call is in the audit log under its subject, and ``/ready`` says ready."""
    if deployment.machine is None:
        pytest.skip(unavailable() or "")
    import httpx2 as http

    verify = deployment.ca.context()
    browser, storage = Browser("alice", verify=verify), MemoryStorage()
    async with Client(oauth_client(deployment.url("alice"), browser, storage, verify=verify)) as c:
        listed = {tool.name for tool in (await c.list_tools()).tools}
        assert set(READS) <= listed, listed
        for name, arguments in READS.items():
            result = await c.call_tool(name, arguments)
            assert result.is_error is False, (name, result)
    calls = [
        record
        for log in deployment.audit_logs()
        for record in jsonl(log)
        if record.get("event") == "call" and record.get("caller_id") == "alice"
    ]
    assert set(READS) <= {record["tool"] for record in calls}, calls
    for _, port in deployment.servers:
        assert http.get(f"http://127.0.0.1:{port}/ready").status_code == 200
    for log in deployment.server_logs():
        assert "could not be audited" not in log and "permission denied" not in log, log


async def test_a_subject_never_reaches_a_vault_it_was_not_granted(deployment: Deployment) -> None:
    """bob (group staff) signs in for alice's vault: the token is issued (the issuer does not know the grants), and
    every server refuses it with 403; his token for the team vault is refused there too (another audience)."""
    verify = deployment.ca.context()
    browser, storage = Browser("bob", verify=verify), MemoryStorage()
    with pytest.raises(ExceptionGroup) as refused:  # the SDK surfaces the 403 as an error of the session
        await search(deployment.url("alice"), browser, storage, verify)
    assert refused.group_contains(MCPError)
    assert storage.tokens is not None
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {
        "Authorization": f"Bearer {storage.tokens.access_token}",
        "Accept": "application/json, text/event-stream",
    }
    async with httpx2.AsyncClient(verify=verify) as http:
        for _ in deployment.servers:  # whichever server nginx picks
            assert (await http.post(deployment.url("alice"), json=body, headers=headers)).status_code == 403
        assert (await http.post(deployment.url("team"), json=body, headers=headers)).status_code == 401


SDK1_PYTHON = Path(__file__).resolve().parents[2] / ".venv-sdk1" / "bin" / "python"
SDK1_SESSIONS = Path(__file__).resolve().parents[2] / "tests" / "compat" / "sdk1_sessions.py"


async def test_every_session_of_a_2025_era_client_reaches_the_server_that_holds_it(deployment: Deployment) -> None:
    """20 sessions of the Python SDK 1.x (protocol 2025-11-25, a session per server), each from its own client
    address, through the example nginx and its two servers: every one completes (none is sent to the server that
    does not hold it: "Session not found"), and both servers hold some."""
    import json
    import os
    import subprocess

    if not SDK1_PYTHON.exists():
        pytest.skip(".venv-sdk1 is missing; `make test` creates it (pip install from requirements-sdk1.txt)")
    verify = deployment.ca.context()
    browser, storage = Browser("alice", verify=verify), MemoryStorage()
    assert await search(deployment.url("alice"), browser, storage, verify) == ["Diary.md"]
    assert storage.tokens is not None
    before = [log.count("POST /vaults/alice/mcp") for log in deployment.server_logs()]
    env = {**os.environ, "VAULTSYNC_TEST_TOKEN": storage.tokens.access_token}
    ran = subprocess.run(
        [str(SDK1_PYTHON), str(SDK1_SESSIONS), deployment.url("alice"), str(deployment.ca.root), "20"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr
    found = json.loads(ran.stdout)
    assert found["protocols"] == ["2025-11-25"], found
    assert found["completed"] == 20, found["errors"][:2]
    after = [log.count("POST /vaults/alice/mcp") for log in deployment.server_logs()]
    assert all(b > a for a, b in zip(before, after, strict=True)), (before, after)  # both servers held sessions
    # the access log names each client's own address (nginx's X-Forwarded-For, trusted) and the token's subject
    logs = "".join(deployment.server_logs())
    for i in range(20):
        assert f'127.0.0.{10 + i} alice "POST /vaults/alice/mcp" 200' in logs, i


def test_the_example_files_name_what_the_test_replaced() -> None:
    """The examples keep the production values the test swaps (so a change there is a change here)."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "hosted"
    site = (examples / "nginx-vaultsync.conf").read_text(encoding="utf-8")
    assert "listen 443 ssl;" in site and site.count("server 127.0.0.1:81") == 4
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in site and "proxy_buffering off;" in site
    manifest = (examples / "hosted.toml").read_text(encoding="utf-8")
    assert 'public_url = "https://vaults.example.com"' in manifest and 'issuer = "https://id.example.com"' in manifest

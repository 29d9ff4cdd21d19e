"""A hosted server (``vaultsync serve --manifest M``, ``[[oauth.vaults]]``) as a real subprocess: two vaults in one
database, each at its own URL, its own audience and its own metadata document; subjects and groups granted per
vault; the official MCP client with bearer tokens of a small issuer (``support.oauth_issuer``). A subject never
reaches a vault it is not granted, a token for one vault is refused by the other, scopes are capped by the grant,
the audit log and ``changes --caller`` name the subject, and unknown key ids do not make the server hammer the
issuer."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from support.hardened_helpers import (
    audit_records,
    authed,
    clean_env,
    scrubbed_overrides,
    start_hardened_http,
    token_entry,
    write_manifest,
)
from support.mcp_helpers import T1, free_port, hit_notes, listening, sc, stop, write
from support.oauth_issuer import INTROSPECTION_CLIENT, Issuer
from support.oauth_rs import INIT, WRITES, post, signing_issuer

from vaultsync.vault import Vault

STATIC = "operator-token-0123456789abcdef"


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with signing_issuer() as iss:
        yield iss


@pytest.fixture(scope="module")
def hosted(tmp_path_factory: pytest.TempPathFactory, issuer: Issuer) -> Iterator[dict[str, Any]]:
    """Vaults ``team`` (a folder: writable) and ``private`` (by name only: read-only) in one database."""
    base = tmp_path_factory.mktemp("oauth-hosted")
    db = base / "db" / "vaultsync.db"
    notes = {
        "team": ("Plan.md", "# Plan\n\nThe team kickoff is on Monday.\n"),
        "private": ("Diary.md", "# Diary\n\nmy own kickoff\n"),
    }
    for name, (rel, text) in notes.items():
        write(base / name, rel, text)
        with Vault.open(db, root=base / name) as vault:
            vault.sync(known_at=T1)
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    public = f"{origin}/notes"  # a public URL with a path: the server answers on that path (a proxy keeps it)
    (base / "conf").mkdir(mode=0o700)
    secret = base / "conf" / "introspection.toml"
    client_id, client_secret = INTROSPECTION_CLIENT
    secret.write_text(f'client_id = "{client_id}"\nclient_secret = "{client_secret}"\n', encoding="utf-8")
    secret.chmod(0o600)
    body = (
        f'[http]\nbind = "127.0.0.1:{port}"\n'
        + token_entry(STATIC, "operator", [])
        + f'[oauth]\nissuer = "{issuer.url}"\npublic_url = "{public}"\njwks_refresh_s = 3600\n'
        + 'introspection_file = "introspection.toml"\n'
        + f'[[oauth.vaults]]\nname = "team"\nfolder = "{base / "team"}"\nread = ["group:staff"]\nwrite = ["alice"]\n'
        + '[[oauth.vaults]]\nname = "private"\nread = ["alice"]\n'
        + '[role_filter]\ndefault = "allow_all"\n[role_filter.deny]\ndiff_note = ["vault:read"]\n'
    )
    manifest = write_manifest(base / "conf" / "hosted.toml", db, body, allow_writes=True, audit_log_path="audit.jsonl")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "serve", "--manifest", str(manifest)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    listening(proc, port, "the hosted server")
    urls = {name: f"{public}/vaults/{name}/mcp" for name in ("team", "private")}
    yield {"db": db, "origin": origin, "urls": urls, "audit": base / "conf" / "audit.jsonl", "proc": proc}
    stderr = stop(proc)
    assert "Traceback" not in stderr, stderr


@pytest.mark.slow
def test_each_vault_has_its_own_metadata_document(hosted: dict[str, Any], issuer: Issuer) -> None:
    for name, scopes in (("team", ["vault:read", "vault:write"]), ("private", ["vault:read"])):
        where = f"{hosted['origin']}/.well-known/oauth-protected-resource/notes/vaults/{name}/mcp"
        answer = httpx2.get(where, timeout=30)
        assert answer.status_code == 200
        assert answer.json()["resource"] == hosted["urls"][name]
        assert answer.json()["authorization_servers"] == [issuer.url]
        assert answer.json()["scopes_supported"] == scopes
    assert httpx2.get(f"{hosted['origin']}/.well-known/oauth-protected-resource/mcp", timeout=30).status_code == 404
    assert hosted["urls"]["team"] == f"{hosted['origin']}/notes/vaults/team/mcp"


@pytest.mark.anyio
async def test_a_subject_reads_the_vault_its_group_may_and_sees_only_that_vault(
    hosted: dict[str, Any], issuer: Issuer
) -> None:
    team = hosted["urls"]["team"]
    token = issuer.token("bob", team, scope="vault:read vault:write", groups=["staff"])
    async with Client(authed(team, token)) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert "search_notes" in names and not names & WRITES  # bob's grant is read: write scope capped
        hits = sc(await c.call_tool("search_notes", {"query": "kickoff"}))
        assert hit_notes(hits) == ["Plan.md"]  # never the private vault's Diary.md
        listed = [str(r.uri) for r in (await c.list_resources()).resources]
        assert listed and all("Diary" not in uri for uri in listed)
    answer = post(team, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "create_note"}}, token)
    assert answer.status_code == 403 and 'scope="vault:write"' in answer.headers["www-authenticate"]


def test_a_subject_not_granted_a_vault_is_refused_before_anything(hosted: dict[str, Any], issuer: Issuer) -> None:
    private = hosted["urls"]["private"]
    answer = post(private, INIT, issuer.token("bob", private, groups=["staff"]))
    assert answer.status_code == 403
    www = answer.headers["www-authenticate"]
    assert "error=" not in www and "scope=" not in www  # no step-up helps
    metadata = f"{hosted['origin']}/.well-known/oauth-protected-resource/notes/vaults/private/mcp"
    assert www == f'Bearer resource_metadata="{metadata}"'
    assert "bob may not use vault 'private'" in answer.json()["error_description"]
    assert post(hosted["urls"]["team"], INIT, issuer.token("carol", hosted["urls"]["team"])).status_code == 403


def test_a_token_for_one_vault_is_refused_by_the_other(hosted: dict[str, Any], issuer: Issuer) -> None:
    answer = post(hosted["urls"]["private"], INIT, issuer.token("alice", hosted["urls"]["team"]))
    assert answer.status_code == 401
    assert "another resource" in answer.headers["www-authenticate"]
    assert post(hosted["urls"]["private"], INIT, issuer.token("alice", hosted["urls"]["private"])).status_code == 200


@pytest.mark.anyio
async def test_writes_and_the_audit_log_name_the_tokens_subject(
    hosted: dict[str, Any], issuer: Issuer, cli: Any
) -> None:
    team = hosted["urls"]["team"]
    async with Client(authed(team, issuer.token("alice", team, scope="vault:write"))) as c:
        assert WRITES <= {t.name for t in (await c.list_tools()).tools}
        sc(await c.call_tool("create_note", {"path": "Alice.md", "content": "# Alice\n\nfrom the hosted server\n"}))
    async with Client(authed(team, issuer.token("bob", team, groups=["staff"]))) as c:
        with pytest.raises(MCPError):  # the gate answers 403 insufficient_scope; the client raises
            await c.call_tool("append_to_note", {"path": "Alice.md", "text": "bob"})
    calls = [r for r in audit_records(hosted["audit"]) if r["event"] == "call"]
    assert ("alice", "create_note", "team") in {(r["caller_id"], r["tool"], r.get("vault")) for r in calls}
    ran = cli("--vault", "team", "changes", "--caller", "alice", "--json", db=hosted["db"], env=scrubbed_overrides())
    found = json.loads(ran.stdout)
    assert [(b["paths"], b["caller"]) for b in found] == [(["Alice.md"], "alice")]


@pytest.mark.anyio
async def test_the_operators_static_token_reaches_every_vault(hosted: dict[str, Any]) -> None:
    for name, writes in (("team", True), ("private", False)):
        async with Client(authed(hosted["urls"][name], STATIC)) as c:
            assert bool({t.name for t in (await c.list_tools()).tools} & WRITES) is writes


def test_unknown_key_ids_refetch_the_keys_at_most_once_per_interval(hosted: dict[str, Any], issuer: Issuer) -> None:
    team = hosted["urls"]["team"]
    assert post(team, INIT, issuer.token("alice", team)).status_code == 200  # the keys are held
    before = issuer.jwks_fetches
    for kid in ("r1", "r2", "r3"):
        issuer.add_key(kid, publish=False)
        assert post(team, INIT, issuer.token("alice", team, kid=kid)).status_code == 401
    assert issuer.jwks_fetches <= before + 1


@pytest.mark.anyio
async def test_opaque_tokens_are_asked_of_the_issuer(hosted: dict[str, Any], issuer: Issuer) -> None:
    """RFC 7662: an opaque token is taken when the issuer says it is active, for this vault, with a subject."""
    team, private = hosted["urls"]["team"], hosted["urls"]["private"]
    issuer.opaque["opaque-good"] = {**issuer.claims("alice", team, "vault:write"), "active": True}
    issuer.opaque["opaque-revoked"] = {"active": False}
    issuer.opaque["opaque-private"] = {**issuer.claims("alice", private, "vault:read"), "active": True}
    async with Client(authed(team, "opaque-good")) as c:
        assert WRITES <= {t.name for t in (await c.list_tools()).tools}
    for token, reason in (("opaque-revoked", "not active"), ("opaque-private", "another resource")):
        answer = post(team, INIT, token)
        assert answer.status_code == 401 and reason in answer.headers["www-authenticate"]


@pytest.mark.anyio
async def test_a_tokens_scopes_are_its_roles_for_the_role_filter(hosted: dict[str, Any], issuer: Issuer) -> None:
    """The manifest's [role_filter] denies diff_note to the role vault:read: every OAuth caller holds it, the
    operator's static token (no roles) does not."""
    team = hosted["urls"]["team"]
    async with Client(authed(team, issuer.token("alice", team, scope="vault:write"))) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert "note_history" in names and "diff_note" not in names
    async with Client(authed(team, STATIC)) as c:
        assert "diff_note" in {t.name for t in (await c.list_tools()).tools}


def test_the_gates_refusals_are_denials_in_the_audit_log(hosted: dict[str, Any], issuer: Issuer) -> None:
    team, private = hosted["urls"]["team"], hosted["urls"]["private"]
    write_call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "edit_note"}}
    assert post(team, write_call, issuer.token("dave", team, groups=["staff"])).status_code == 403
    assert post(private, INIT, issuer.token("dave", private, groups=["staff"])).status_code == 403
    denials = [
        (r["caller_id"], r["tool_name"], r["vault"], r["reason"])
        for r in audit_records(hosted["audit"])
        if r["event"] == "denial" and r["caller_id"] == "dave"
    ]
    assert denials == [
        (
            "dave",
            "edit_note",
            "team",
            "edit_note needs the scope vault:write; the token's scopes on vault 'team': vault:read",
        ),
        ("dave", "initialize", "private", "dave may not use vault 'private'"),
    ]


@pytest.mark.anyio
async def test_the_shared_audit_log_is_one_intact_chain(hosted: dict[str, Any], issuer: Issuer, cli: Any) -> None:
    """Every vault and the gate append to one log: its chain verifies and ends at the database's head."""
    team, private = hosted["urls"]["team"], hosted["urls"]["private"]
    async with Client(authed(team, issuer.token("alice", team))) as c:
        sc(await c.call_tool("read_note", {"path": "Plan.md"}))
    assert post(private, INIT, issuer.token("eve", private)).status_code == 403
    ran = cli("audit", "verify", str(hosted["audit"]), db=hosted["db"], env=scrubbed_overrides())
    assert ran.returncode == 0 and "chain intact" in ran.stdout, ran.stdout + ran.stderr
    assert {r.get("vault") for r in audit_records(hosted["audit"])} >= {"team", "private"}


@pytest.mark.anyio
@pytest.mark.slow
async def test_one_vault_by_manifest_with_its_own_grant(tmp_path: Path, issuer: Issuer, cli: Any) -> None:
    """``serve VAULT --manifest M`` with ``[oauth]`` and no ``[[oauth.vaults]]``: the vault at ``/mcp``, the grant in
    ``[oauth]`` itself, calls and refusals in the audit log."""
    root = tmp_path / "notes"
    write(root, "Plan.md", "# Plan\n\nkickoff\n")
    db = tmp_path / "db" / "v.db"
    with Vault.open(db, root=root) as vault:
        vault.sync(known_at=T1)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    body = f'[http]\nbind = "127.0.0.1:{port}"\n[oauth]\nissuer = "{issuer.url}"\n'
    body += f'public_url = "http://127.0.0.1:{port}"\nread = ["alice"]\n'
    manifest = write_manifest(tmp_path / "conf" / "m.toml", db, body, audit_log_path="audit.jsonl")
    proc = start_hardened_http(root, manifest, port)
    try:
        async with Client(authed(url, issuer.token("alice", url, scope="vault:write"))) as c:
            assert not {t.name for t in (await c.list_tools()).tools} & WRITES  # writes are off here
            assert hit_notes(sc(await c.call_tool("search_notes", {"query": "kickoff"}))) == ["Plan.md"]
        assert post(url, INIT, issuer.token("bob", url)).status_code == 403
    finally:
        stderr = stop(proc)
    assert "Traceback" not in stderr and "WARNING: anyone" not in stderr, stderr
    records = [
        (r["event"], r["caller_id"], r.get("tool") or r.get("tool_name"))
        for r in audit_records(tmp_path / "conf" / "audit.jsonl")
    ]
    assert ("call", "alice", "search_notes") in records and ("denial", "bob", "initialize") in records
    ran = cli("audit", "verify", str(tmp_path / "conf" / "audit.jsonl"), db=db, env=scrubbed_overrides())
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_the_probes_answer_for_every_vault_without_a_token(hosted: dict[str, Any]) -> None:
    ready = httpx2.get(f"{hosted['origin']}/ready", timeout=30)
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "database": "ok",
        "vault_current": None,  # no watcher ever ran: nothing tells whether the vaults are current
        "watcher": None,
        "heartbeat_age_seconds": None,
        "watcher_lag_seconds": None,
        "audit_log": "ok",  # the hosted manifest keeps one, and it can be written
        "vaults_missing": 0,
    }

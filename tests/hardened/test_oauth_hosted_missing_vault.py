"""A hosted server whose manifest names a vault the database does not hold yet (its watcher not started, or not
done with its first catch-up) starts anyway: it says so, serves the other vaults, answers calls to the missing
one that it is not there yet, reports it in ``/ready`` (``vaults_missing``), and serves it once it is recorded."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from support.hardened_helpers import authed, clean_env, write_manifest
from support.mcp_helpers import T1, free_port, hit_notes, listening, sc, stop, write
from support.oauth_issuer import Issuer
from support.oauth_rs import signing_issuer

from vaultsync.vault import Vault

pytestmark = pytest.mark.anyio


@pytest.mark.slow
async def test_a_vault_not_recorded_yet_is_waited_for_while_the_others_are_served(tmp_path: Path) -> None:
    db = tmp_path / "db" / "vaultsync.db"
    write(tmp_path / "team", "Plan.md", "# Plan\n\nThe team kickoff is on Monday.\n")
    write(tmp_path / "later", "Diary.md", "# Diary\n\nmy own kickoff\n")
    with Vault.open(db, root=tmp_path / "team") as vault:
        vault.sync(known_at=T1)
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    with signing_issuer() as issuer:
        assert isinstance(issuer, Issuer)
        body = (
            f'[http]\nbind = "127.0.0.1:{port}"\n'
            f'[oauth]\nissuer = "{issuer.url}"\npublic_url = "{origin}"\n'
            '[[oauth.vaults]]\nname = "team"\nread = ["alice"]\n'
            '[[oauth.vaults]]\nname = "later"\nread = ["alice"]\n'
        )
        manifest = write_manifest(tmp_path / "conf" / "hosted.toml", db, body)
        proc = subprocess.Popen(
            [sys.executable, "-m", "vaultsync", "serve", "--manifest", str(manifest)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        try:
            listening(proc, port, "the hosted server")
            urls = {name: f"{origin}/vaults/{name}/mcp" for name in ("team", "later")}
            token = {name: issuer.token("alice", url, scope="vault:read") for name, url in urls.items()}
            async with Client(authed(urls["team"], token["team"])) as c:
                hits = sc(await c.call_tool("search_notes", {"query": "kickoff", "mode": "keyword"}))
                assert hit_notes(hits) == ["Plan.md"]
            async with Client(authed(urls["later"], token["later"])) as c:
                missing = await c.call_tool("search_notes", {"query": "kickoff", "mode": "keyword"})
                assert missing.is_error and "later" in str(missing.content[0]), missing
            ready = httpx2.get(f"{origin}/ready", timeout=30)
            assert ready.status_code == 200 and ready.json()["vaults_missing"] == 1, ready.text
            with Vault.open(db, root=tmp_path / "later") as vault:  # its watcher's first catch-up, say
                vault.sync(known_at=T1)
            deadline = time.monotonic() + 30
            while httpx2.get(f"{origin}/ready", timeout=30).json()["vaults_missing"] and time.monotonic() < deadline:
                time.sleep(0.2)
            async with Client(authed(urls["later"], token["later"])) as c:
                hits = sc(await c.call_tool("search_notes", {"query": "kickoff", "mode": "keyword"}))
                assert hit_notes(hits) == ["Diary.md"]
        finally:
            stderr = stop(proc)
    assert "later: not in the database yet" in stderr and "Traceback" not in stderr, stderr

"""Another user of the machine against ``vaultsync serve --http`` on loopback: run as a real second uid
(``nobody`` through setpriv, as root), it can neither read the token nor use the server without it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from support.mcp_helpers import free_port, history_under, listening, stop

NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
PYTHON = "/usr/bin/python3"
"""A Python every user may run (the test's own may live in root's home); the probe needs only its stdlib."""

PROBE = r"""
import json, sys, urllib.request, urllib.error
port, token_path = sys.argv[1], sys.argv[2]
out = {}
try:
    open(token_path).read()
    out["token"] = "read"
except OSError as exc:
    out["token"] = type(exc).__name__
url = f"http://127.0.0.1:{port}/mcp"
head = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25"}
def post(body, extra=None):
    request = urllib.request.Request(url, json.dumps(body).encode(), {**head, **(extra or {})}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
out["initialize"] = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "nobody", "version": "0"}}})
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
out["create_note"] = post(
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "create_note",
     "arguments": {"path": "ByNobody.md", "content": "# hi\n"}, "_meta": meta}},
    {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "create_note"})
out["guessed"] = post({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {}},
                      {"Authorization": "Bearer " + "0" * 43})
print(json.dumps(out))
"""


@pytest.fixture
def shared_place() -> Iterator[Path]:
    """A folder every user may enter (pytest's own temp folders are private to their owner)."""
    if os.geteuid() != 0:
        pytest.skip("acting as a second user needs root (setpriv to nobody)")
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv: cannot act as a second user")
    if subprocess.run([*AS_NOBODY, PYTHON, "-I", "-c", "pass"], capture_output=True, timeout=30).returncode:
        pytest.skip(f"nobody cannot run {PYTHON} here")
    place = Path(tempfile.mkdtemp(prefix="vaultsync-other-user-"))
    place.chmod(0o755)
    try:
        yield place
    finally:
        shutil.rmtree(place)


@pytest.mark.slow
def test_another_local_user_is_refused_on_loopback(shared_place: Path) -> None:
    """The owner's server on 127.0.0.1 with writes on, started without a token option: nobody gets 401 for
    every request, cannot read the token file, and writes nothing; the owner's token (from that file) works."""
    history = history_under(shared_place)
    home = shared_place / "home"
    home.mkdir(mode=0o755)
    port = free_port()
    env = {**os.environ, "VAULTSYNC_HOME": str(home)}
    command = [sys.executable, "-m", "vaultsync", "--db", str(history["db"]), "serve", str(history["root"])]
    proc = subprocess.Popen(
        [*command, "--http", f"127.0.0.1:{port}", "--allow-writes"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    token_path = home / "http-token"
    try:
        listening(proc, port)
        probe = subprocess.run(
            [*AS_NOBODY, PYTHON, "-I", "-c", PROBE, str(port), str(token_path)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
        assert probe.returncode == 0, probe.stderr
        seen = json.loads(probe.stdout)
        assert seen == {"token": "PermissionError", "initialize": 401, "create_note": 401, "guessed": 401}
        assert not (history["root"] / "ByNobody.md").exists()
        assert token_path.stat().st_mode & 0o777 == 0o600
        token = token_path.read_text(encoding="utf-8").strip()
        owner = httpx2.post(
            f"http://127.0.0.1:{port}/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "o", "version": "0"},
                },
            },
            headers={
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25",
                "Authorization": f"Bearer {token}",
            },
        )
        assert owner.status_code == 200
    finally:
        stderr = stop(proc)
    assert f"with the token in {token_path}" in stderr and token not in stderr

"""``make bundle``'s MCP Bundle: validated and packed by the official CLI, unpacked, and started as a host would.

The bundle names the published package (``vaultsync-mcp[semantic]==VERSION``) rather than carrying a copy. The
launch command comes from the official library (``getMcpConfigForManifest``, tests/js/bundle_config.mjs)
with the user's settings substituted. It is the manifest's own command, run by a real ``uv``; only its
environment differs from a host's: ``UV_PROJECT_ENVIRONMENT`` is this test venv, with ``UV_NO_SYNC`` and
``UV_OFFLINE``, so uv installs nothing and the package comes from this venv (a host's uv installs the published
package for its platform).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from support.mcp_helpers import READ_TOOLS, WRITE_TOOLS, sc

REPO = Path(__file__).resolve().parents[2]
JS = REPO / "tests" / "js"
MCPB = JS / "node_modules" / ".bin" / "mcpb"
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")

pytestmark = [
    pytest.mark.client,
    pytest.mark.skipif(
        shutil.which("node") is None or not MCPB.exists(),
        reason="needs Node.js and tests/js's npm packages (make test runs npm ci)",
    ),
]


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("bundle")
    bundle = work / "vaultsync.mcpb"
    subprocess.run(
        [sys.executable, str(REPO / "bundle" / "build.py"), str(bundle)], check=True, capture_output=True, timeout=300
    )
    with zipfile.ZipFile(bundle) as packed:
        names = set(packed.namelist())
    assert {"manifest.json", "main.py", "pyproject.toml"} <= names
    assert not any(n.startswith("vaultsync/") or "__pycache__" in n for n in names)  # no copy of the package
    with zipfile.ZipFile(bundle) as packed:  # the published package, with the semantic model, at the bundle's version
        deps = tomllib.loads(packed.read("pyproject.toml").decode())["project"]["dependencies"]
        version = json.loads(packed.read("manifest.json"))["version"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert deps == [f"{project['name']}[semantic]=={version}"]
    out = work / "unpacked"
    subprocess.run([str(MCPB), "unpack", str(bundle), str(out)], check=True, capture_output=True, timeout=120)
    return out


def launch(unpacked: Path, user_config: dict) -> dict | None:
    done = subprocess.run(
        ["node", str(JS / "bundle_config.mjs"), str(unpacked), json.dumps(user_config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def test_the_official_cli_validates_the_unpacked_manifest(unpacked: Path) -> None:
    done = subprocess.run(
        [str(MCPB), "validate", str(unpacked / "manifest.json")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "validation passes" in done.stdout, done.stdout + done.stderr
    manifest = json.loads((unpacked / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["user_config"]["vault"]["type"] == "directory" and manifest["user_config"]["vault"]["required"]
    assert manifest["user_config"]["allow_writes"] == {
        **manifest["user_config"]["allow_writes"],
        "type": "boolean",
        "default": False,
    }
    assert [t["name"] for t in manifest["tools"]] == READ_TOOLS + WRITE_TOOLS
    assert launch(unpacked, {}) is None, "no vault folder chosen: the host does not start it"


@pytest.mark.anyio
@pytest.mark.skipif(UV is None, reason="needs uv (the dev extra installs it)")
@pytest.mark.parametrize("writes", [False, True])
async def test_the_bundle_starts_from_its_manifest_and_lists_its_tools(
    unpacked: Path, tmp_path: Path, writes: bool
) -> None:
    vault = tmp_path / "My Vault"  # a space, as in "Obsidian Vault"
    vault.mkdir()
    (vault / "Inbox.md").write_text("# Inbox\n\n- call the plumber\n", encoding="utf-8")
    config = launch(unpacked, {"vault": str(vault), "allow_writes": writes})
    assert config is not None and config["command"] == "uv"
    assert config["args"] == ["run", "--directory", str(unpacked), "main.py", str(vault), str(writes).lower()]
    env = {
        **os.environ,
        **config["env"],
        "UV_PROJECT_ENVIRONMENT": sys.prefix,
        "UV_NO_SYNC": "1",
        "UV_OFFLINE": "1",
        "VAULTSYNC_HOME": str(tmp_path / "home"),
    }
    params = StdioServerParameters(command=UV, args=config["args"], env=env, cwd=str(tmp_path))
    async with Client(params, mode="legacy") as c:
        tools = [t.name for t in (await c.list_tools()).tools]
        assert tools == READ_TOOLS + (WRITE_TOOLS if writes else [])
        status = sc(await c.call_tool("vault_status", {}))
        assert status["vault"] == "My Vault" and status["writes_enabled"] is writes, status
        for _ in range(
            150
        ):  # the watcher's first catch-up runs beside the server (it answers from the store meanwhile)
            result = await c.call_tool("read_note", {"path": "Inbox.md"})
            if not result.is_error:
                break
            await anyio.sleep(0.2)
        assert sc(result)["content"].startswith("# Inbox")

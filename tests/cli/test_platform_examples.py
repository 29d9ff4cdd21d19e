"""The Windows examples (Task Scheduler XML, a Claude Desktop config with Windows paths): their shape, and a
server started from the config with its Windows paths mapped onto a test folder. Nothing here ran on Windows."""

from __future__ import annotations

import json
import ntpath
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from support.mcp_helpers import READ_TOOLS, make_history_vault, sc

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TASK = "{http://schemas.microsoft.com/windows/2004/02/mit/task}"


def test_task_scheduler_xml_runs_vaultsync_watch_at_log_on() -> None:
    task = ET.parse(EXAMPLES / "vaultsync-watch.task.xml").getroot()
    assert task.tag == f"{TASK}Task" and task.get("version") == "1.2"
    assert task.find(f"{TASK}Triggers/{TASK}LogonTrigger/{TASK}Enabled").text == "true"
    principal = task.find(f"{TASK}Principals/{TASK}Principal")
    assert principal.find(f"{TASK}RunLevel").text == "LeastPrivilege", "runs as the user, never elevated"
    settings = task.find(f"{TASK}Settings")
    assert settings.find(f"{TASK}ExecutionTimeLimit").text == "PT0S", "never stopped after the default 72 hours"
    assert settings.find(f"{TASK}MultipleInstancesPolicy").text == "IgnoreNew"
    assert settings.find(f"{TASK}RestartOnFailure/{TASK}Count") is not None
    command = task.find(f"{TASK}Actions/{TASK}Exec/{TASK}Command").text
    arguments = task.find(f"{TASK}Actions/{TASK}Exec/{TASK}Arguments").text
    assert ntpath.isabs(command) and ntpath.basename(command) == "pythonw.exe"
    # the argument string Windows programs split as the C runtime does (list2cmdline is its inverse)
    vault = r"C:\Users\YOU\Documents\Obsidian Vault"
    assert arguments == subprocess.list2cmdline(["-m", "vaultsync", "watch", vault, "--wait"])


def windows_config() -> dict:
    return json.loads((EXAMPLES / "mcp" / "windows" / "claude_desktop_config.json").read_text(encoding="utf-8"))


def test_the_windows_claude_desktop_config_has_whole_paths_with_spaces() -> None:
    entry = windows_config()["mcpServers"]["vaultsync"]
    assert ntpath.isabs(entry["command"]) and " " in entry["command"], "C:\\Program Files, spaces and all"
    assert entry["command"].endswith("\\Scripts\\vaultsync.exe")
    assert entry["args"][0] == "serve" and entry["args"][2:] == ["--watch"]
    assert ntpath.isabs(entry["args"][1]) and entry["args"][1].endswith("\\Obsidian Vault")
    readme = (EXAMPLES / "mcp" / "windows" / "README.md").read_text(encoding="utf-8")
    assert r"%APPDATA%\Claude\claude_desktop_config.json" in readme


@pytest.mark.anyio
@pytest.mark.slow
async def test_the_windows_config_starts_a_server_with_its_paths_mapped_here(tmp_path: Path) -> None:
    entry = windows_config()["mcpServers"]["vaultsync"]
    profile = tmp_path / "Users" / "YOU"

    def here(path: str) -> str:  # C:\Users\YOU\Documents\Obsidian Vault -> <tmp>/Users/YOU/Documents/Obsidian Vault
        return str(tmp_path / Path(*ntpath.splitdrive(path)[1].split("\\")[1:]))

    vault = Path(here(entry["args"][1]))
    assert vault.name == "Obsidian Vault" and str(vault).startswith(str(profile))
    make_history_vault(vault, tmp_path / "db" / "v.db")
    env = {**os.environ, **entry.get("env", {}), "VAULTSYNC_DB": str(tmp_path / "db" / "v.db")}
    args = [here(a) if ntpath.isabs(a) else a for a in entry["args"]]
    params = StdioServerParameters(command=sys.executable, args=["-m", "vaultsync", *args], env=env)
    async with Client(params, mode="legacy") as c:
        assert [t.name for t in (await c.list_tools()).tools] == READ_TOOLS
        assert sc(await c.call_tool("read_note", {"path": "Inbox.md"}))["content"].startswith("# Inbox")

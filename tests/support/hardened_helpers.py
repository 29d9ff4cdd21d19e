"""Shared by the hardened-mode role and audit tests: manifests, keystores, and hardened servers as subprocesses."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from support.mcp_helpers import listening
from vaultsync.hardened.manifest import DEFAULT_SECRET_ENV

SCRUBBED = (*DEFAULT_SECRET_ENV, "VAULTSYNC_PARENT_BASENAME", "VAULTSYNC_DB")


def clean_env() -> dict[str, str]:
    """This process's environment without what a hardened start refuses or the manifest replaces."""
    return {k: v for k, v in os.environ.items() if k not in SCRUBBED}


def scrubbed_overrides() -> dict[str, str | None]:
    """``clean_env`` as overrides for click's runner (None removes a variable)."""
    return {k: None for k in SCRUBBED}


def toml_value(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


def write_manifest(path: Path, db: Path, body: str = "", **top: Any) -> Path:
    """A manifest at ``path`` (mode 600) naming ``db``, top-level keys ``top``, then ``body`` (TOML tables)."""
    lines = [f"db_path = {toml_value(str(db))}"] + [f"{k} = {toml_value(v)}" for k, v in top.items()]
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text("\n".join(lines) + "\n" + body, encoding="utf-8")
    path.chmod(0o600)
    return path


def write_keystore(path: Path, key_id: str = "k1") -> Path:
    path.write_text(f'key_id = "{key_id}"\nkey_hex = "{secrets.token_hex(32)}"\n', encoding="utf-8")
    path.chmod(0o600)
    return path


def token_entry(token: str, caller_id: str, roles: list[str]) -> str:
    digest = hashlib.sha256(token.encode()).hexdigest()
    return f'[[http.tokens]]\nsha256 = "{digest}"\ncaller_id = "{caller_id}"\nroles = {json.dumps(roles)}\n'


def hardened_stdio(vault: Path, manifest: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "vaultsync", "serve", str(vault), "--manifest", str(manifest)],
        env=clean_env(),
    )


def start_hardened_http(vault: Path, manifest: Path, port: int) -> subprocess.Popen[str]:
    """``vaultsync serve VAULT --manifest M`` (the manifest's [http] bind on ``port``), once it accepts connections."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "serve", str(vault), "--manifest", str(manifest)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    return listening(proc, port, "the hardened HTTP server")


def authed(url: str, token: str) -> Any:
    return streamable_http_client(
        url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    )


def audit_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def unit_directives(text: str) -> dict[str, list[tuple[str, str]]]:
    """A systemd unit file as section -> its (key, value) directives, in order (repeated keys kept)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for line in text.splitlines():
        if not line.strip() or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = line.strip("[]")
            sections[current] = []
            continue
        key, _, value = line.partition("=")
        sections[current].append((key.strip(), value.strip()))
    return sections

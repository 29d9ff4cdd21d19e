"""The hardened mode's examples stay true: ``examples/manifest.toml`` loads (as shipped and with every
optional setting), documents every key the schema knows with its default, and
``examples/vaultsync-hardened.service`` is a sandboxed unit with a clean environment whose command
starts a working hardened HTTP server."""

from __future__ import annotations

import getpass
import hashlib
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.hardened_helpers import unit_directives
from support.mcp_helpers import listening
from support.watch_helpers import systemd_verify

from vaultsync.hardened.manifest import HttpSettings, Manifest, RoleFilter, TokenRule, load_manifest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MANIFEST = EXAMPLES / "manifest.toml"
UNIT = EXAMPLES / "vaultsync-hardened.service"
INSTALLED = Path(sys.executable).parent / "vaultsync"
TOKEN = "hardened-example-token-0123456789"


def uncommented(text: str) -> str:
    """The example with every optional ``#: `` setting switched on."""
    return re.sub(r"(?m)^#: ", "", text)


def private_copy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "manifest.toml"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def test_the_example_manifest_loads_as_shipped(tmp_path: Path) -> None:
    manifest = load_manifest(private_copy(tmp_path, MANIFEST.read_text(encoding="utf-8")))
    assert manifest.db_path == Path("~/.local/share/vaultsync/hardened.db").expanduser()
    assert manifest.http is None and manifest.role_filter is None and manifest.keystore_path is None
    assert manifest.watch is True and manifest.allow_writes is False and "claude" in manifest.allowed_parents
    assert {"SLACK_TOKEN", "ANTHROPIC_API_KEY"} <= set(manifest.secret_env)


def test_the_example_manifest_loads_with_every_option(tmp_path: Path) -> None:
    manifest = load_manifest(private_copy(tmp_path, uncommented(MANIFEST.read_text(encoding="utf-8"))))
    assert manifest.keystore_path == tmp_path / "keys.toml" and manifest.vault_name == "notes"
    assert manifest.http is not None and manifest.http.bind == "127.0.0.1:8765"
    assert manifest.http.tls_cert == tmp_path / "cert.pem"
    assert manifest.http.tokens == (
        TokenRule(sha256=hashlib.sha256(b"test").hexdigest(), caller_id="laptop-claude", roles=("reader",)),
    )
    assert manifest.role_filter == RoleFilter(
        caller_roles=("reader",),
        default="deny_all",
        allow={"search_notes": ("reader",), "read_note": ("reader",)},
        deny={"append_to_note": ("reader",)},
    )


def test_the_example_manifest_documents_every_key_with_its_default() -> None:
    """Every key the schema knows is in the example, and each comes right after a comment saying
    its default (or that it is required)."""
    lines = uncommented(MANIFEST.read_text(encoding="utf-8")).splitlines()
    schema = {"": Manifest, "http": HttpSettings, "http.tokens": TokenRule, "role_filter": RoleFilter}
    table, found = "", set()
    for i, line in enumerate(lines):
        header = re.fullmatch(r"\[\[?([\w.]+)\]\]?", line)
        if header:
            table = header.group(1)
            found.add(table)  # http, http.tokens, role_filter.allow: fields too
            continue
        key = re.match(r"(\w+) = ", line)
        if key is None or table not in schema:  # [role_filter.allow]: tool names, not schema keys
            continue
        found.add(f"{table}.{key.group(1)}".lstrip("."))
        comment = []
        for above in reversed(lines[:i]):
            if not above.startswith("#"):
                break
            comment.append(above)
        if not comment:  # a second key of one group (tls_key after tls_cert): the group's comment
            continue
        assert any("default" in c.lower() or "required" in c.lower() for c in comment), f"{line!r}: say its default"
    expected = {f"{table}.{name}".lstrip(".") for table, cls in schema.items() for name in cls.model_fields}
    expected.discard("path")  # the manifest's own location, not a key
    assert expected <= found, f"not in examples/manifest.toml: {sorted(expected - found)}"


# ------------------------------------------------------------------ the systemd unit


def test_the_hardened_unit_is_sandboxed_with_a_clean_environment() -> None:
    service = unit_directives(UNIT.read_text(encoding="utf-8"))["Service"]
    settings = dict(service)
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "PrivateTmp": "yes",
        "ProtectHome": "read-only",
        "PrivateDevices": "yes",
        "RestrictNamespaces": "yes",
        "RestrictSUIDSGID": "yes",
        "CapabilityBoundingSet": "",
        "UMask": "0077",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
        "KillSignal": "SIGTERM",
    }.items():
        assert settings.get(key) == value, key
    environment = [value for key, value in service if key == "Environment"]
    assert {e.split("=", 1)[0] for e in environment} == {"PATH", "LANG"}, "only what is needed"
    assert not {key for key, _ in service} & {"EnvironmentFile", "PassEnvironment", "ImportCredential"}
    command = shlex.split(settings["ExecStart"])
    assert command[1:] == ["serve", "/home/YOU/notes", "--manifest", "/etc/vaultsync/manifest.toml"]
    writable = ["/home/YOU/.local/share/vaultsync", "/home/YOU/.local/state/vaultsync"]  # database, audit log
    assert settings["ReadWritePaths"].split() == writable


@pytest.mark.slow
def test_the_hardened_unit_starts_a_working_server(tmp_path: Path) -> None:
    """The unit's command, in the unit's environment only, with the example manifest (HTTP block on,
    paths into a temporary home): systemd-analyze accepts the unit, the server answers an MCP client
    holding the token, and SIGTERM ends it cleanly."""
    import anyio
    from support.mcp_helpers import free_port

    if not INSTALLED.exists():
        pytest.skip(f"the vaultsync command is not installed next to {sys.executable}")
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "Atlas.md").write_text("# Atlas\n\nKickoff on Monday.\n", encoding="utf-8")
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "vaultsync").symlink_to(INSTALLED)
    for folder in (".local/share/vaultsync", ".local/state/vaultsync"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    port = free_port()
    manifest_text = uncommented(MANIFEST.read_text(encoding="utf-8"))
    manifest_text = manifest_text.replace("~/", f"{home}/").replace("127.0.0.1:8765", f"127.0.0.1:{port}")
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    manifest_text = manifest_text.replace(hashlib.sha256(b"test").hexdigest(), digest)
    for optional in (
        'tls_cert = "cert.pem"\n',
        'tls_key = "key.pem"\n',
        'keystore_path = "keys.toml"\n',
        'vault_name = "notes"\n',
    ):
        manifest_text = manifest_text.replace(optional, "")
    # no identity provider here (tests/hardened/test_oauth_hosted.py serves one): static tokens only
    manifest_text = re.sub(r"(?ms)^\[oauth\]\n.*?(?=^\[)", "", manifest_text)
    manifest = private_copy(tmp_path, manifest_text)
    user = getpass.getuser()
    unit = UNIT.read_text(encoding="utf-8").replace("/home/YOU", str(home)).replace("User=YOU", f"User={user}")
    unit = unit.replace("/etc/vaultsync/manifest.toml", str(manifest))
    systemd_verify(unit, tmp_path / "vaultsync-hardened.service")
    service = unit_directives(unit)["Service"]
    env = dict(value.split("=", 1) for key, value in service if key == "Environment")
    env.update(HOME=str(home), USER=user, LOGNAME=user, SHELL="/bin/sh")  # what User= sets
    command = shlex.split(dict(service)["ExecStart"])
    proc = subprocess.Popen(
        command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert f"(hardened) at http://127.0.0.1:{port}/mcp" in line, line + proc.stderr.read()
        listening(proc, port, "the hardened server", timeout=60)  # the line comes just before uvicorn binds
        hits = anyio.run(search, f"http://127.0.0.1:{port}/mcp")
        assert hits == ["Atlas.md"]
        proc.send_signal(signal.SIGTERM)  # systemctl stop
        # uvicorn ends by re-raising the signal; systemd counts exit 0 and SIGTERM alike as a clean stop
        assert proc.wait(timeout=60) in (0, -signal.SIGTERM)
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def search(url: str) -> list[str]:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    transport = streamable_http_client(
        url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    )
    async with Client(transport) as c:
        for _ in range(300):  # the watcher's first catch-up runs beside the server: until it has recorded
            result = await c.call_tool("search_notes", {"query": "kickoff", "mode": "keyword"})
            assert result.is_error is False and result.structured_content is not None, result
            hits = [note["path"] for note in result.structured_content["notes"]]
            if hits:
                return hits
            await anyio.sleep(0.1)
    raise AssertionError("the watcher never recorded the vault")

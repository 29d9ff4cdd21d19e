"""The PostgreSQL deployment in ``examples/postgres`` runs as written: its systemd units come back after a reboot
(``[Install]``), run as a service user after the network is up, retry a database that is not up yet, take the
password from a file; started here (their ``ExecStart`` in their environment file's environment, pointed at a
real PostgreSQL and a temporary folder, as their users: test_pg_units_as_written.py), and the hardened manifest's
``pass_env`` lets libpq's variables through."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.hardened_helpers import unit_directives
from support.mcp_helpers import free_port, listening

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "postgres"
WATCH = EXAMPLES / "vaultsync-pg-watch.service"
SERVE = EXAMPLES / "vaultsync-pg-serve@.service"
ENV = EXAMPLES / "vaultsync.env"
MANIFEST = EXAMPLES / "manifest-pg.toml"
INSTALLED = Path(sys.executable).parent / "vaultsync"
TOKEN = "deployment-example-token-0123456789"


@pytest.mark.parametrize("unit", [WATCH, SERVE], ids=lambda p: p.name)
def test_the_units_come_back_after_a_reboot_as_a_service_user_after_the_network(unit: Path) -> None:
    sections = unit_directives(unit.read_text(encoding="utf-8"))
    service, described = dict(sections["Service"]), dict(sections["Unit"])
    assert dict(sections["Install"])["WantedBy"] == "multi-user.target"
    # the watcher as the owner, the servers as their own user with the reader role's environment (least privilege)
    user, env = ("vaultsync", "vaultsync.env") if unit == WATCH else ("vaultsync-serve", "vaultsync-serve.env")
    assert service["User"] == user and service["Restart"] == "always" and float(service["RestartSec"]) >= 5
    assert service["EnvironmentFile"] == f"/etc/vaultsync/{env}" and described["StartLimitIntervalSec"] == "0"
    assert "network-online.target" in described["Wants"] and "network-online.target" in described["After"]
    assert "PGPASSWORD" not in unit.read_text(encoding="utf-8").replace("#", "")
    assert shlex.split(service["ExecStart"])[0] == "/opt/vaultsync/bin/vaultsync"


def env_file(text: str) -> dict[str, str]:
    """An EnvironmentFile's assignments (comments and blank lines skipped; a later one wins)."""
    found = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            found[key.strip()] = value.strip()
    return found


@pytest.mark.parametrize(
    "name,role,passfile",
    [("vaultsync.env", "vaultsync_owner", "pgpass"), ("vaultsync-serve.env", "vaultsync_reader", "pgpass-serve")],
)
def test_the_environment_files_name_a_password_file_and_tls(name: str, role: str, passfile: str) -> None:
    env = env_file((EXAMPLES / name).read_text(encoding="utf-8"))
    assert env["VAULTSYNC_DB"].startswith(f"postgresql://{role}@") and ":" not in env["VAULTSYNC_DB"].split("@")[0][13:]
    assert env["PGPASSFILE"] == f"/etc/vaultsync/{passfile}" and env["PGSSLMODE"] == "verify-full"


def stopped(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.stderr.read() if proc.stderr else ""


async def _search(url: str, token: str | None) -> list[str]:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from support.mcp_helpers import hit_notes

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))
    async with Client(transport) as c:
        for _ in range(300):
            result = await c.call_tool("search_notes", {"query": "kickoff", "mode": "keyword"})
            assert result.is_error is False and result.structured_content is not None, result
            hits = hit_notes(result.structured_content)
            if hits:
                return hits
            await anyio.sleep(0.1)
    raise AssertionError("the vault was never recorded")


def test_the_hardened_manifest_passes_libpqs_variables_through(tmp_path: Path) -> None:
    """The connection string names no host: only PGHOST, kept by ``pass_env`` through the hardened mode's clean
    environment, leads libpq to the server."""
    import anyio
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    if not INSTALLED.exists():
        pytest.skip(f"the vaultsync command is not installed next to {sys.executable}")
    dsn = pgserver.fresh_or_skip("hardenedpg")
    with psycopg.connect(dsn) as con:
        schema = con.execute("SELECT current_schema()").fetchone()[0]
    parts = conninfo_to_dict(dsn)
    vault = tmp_path / "team-handbook"
    vault.mkdir()
    (vault / "Atlas.md").write_text("# Atlas\n\nKickoff on Monday.\n", encoding="utf-8")
    port = free_port()
    text = MANIFEST.read_text(encoding="utf-8").replace("127.0.0.1:8765", f"127.0.0.1:{port}")
    text = text.replace(
        "postgresql://vaultsync_owner@db.internal:5432/team?options=-csearch_path%3Dvaultsync",
        f"postgresql://{parts['user']}@/{parts['dbname']}?options=-csearch_path%3D{schema}",
    )
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(text, encoding="utf-8")
    manifest.chmod(0o600)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(tmp_path),
        "PGHOST": parts["host"],
        "PGSSLMODE": "disable",
    }
    proc = subprocess.Popen(
        [str(INSTALLED), "serve", str(vault), "--manifest", str(manifest)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        listening(proc, port, "the hardened server on PostgreSQL", timeout=60)
        token_file = tmp_path / ".local" / "share" / "vaultsync" / "http-token"  # the data directory under its HOME
        token = token_file.read_text(encoding="utf-8").strip()
        assert anyio.run(_search, f"http://127.0.0.1:{port}/mcp", token) == ["Atlas.md"]  # the user's own token
    finally:
        log = stopped(proc)
    assert "Traceback" not in log, log


def test_a_teams_reader_role_reads_its_schema_only_and_writes_nothing(tmp_path: Path) -> None:
    """The roles of docs/running-postgres.md: a reader granted USAGE and SELECT on its team's schema serves and reads
    the vault, cannot write it, and a reader of another team does not even see the schema."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from vaultsync import Vault

    dsn = pgserver.fresh_or_skip("teamroles")
    vault = tmp_path / "team-handbook"
    vault.mkdir()
    (vault / "Atlas.md").write_text("# Atlas\n\nKickoff on Monday.\n", encoding="utf-8")
    with Vault.open(dsn, root=vault) as v:
        v.sync()
    parts = conninfo_to_dict(dsn)
    with psycopg.connect(dsn, autocommit=True) as con:
        schema = con.execute("SELECT current_schema()").fetchone()[0]
        for role in (f"{schema}_reader", f"{schema}_other"):
            con.execute(f'CREATE ROLE "{role}" LOGIN')
        con.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{schema}_reader"')
        con.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{schema}_reader"')

    def as_role(role: str) -> str:
        return dsn.replace(f"postgresql://{parts['user']}@", f"postgresql://{role}@")

    def cli(db: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "vaultsync", "--db", db, *args], capture_output=True, text=True)

    reader = as_role(f"{schema}_reader")
    read = cli(reader, "read", "Atlas.md")
    assert read.returncode == 0 and "Kickoff" in read.stdout, read.stderr
    assert "Atlas.md" in cli(reader, "search", "kickoff").stdout
    (vault / "New.md").write_text("# New\n", encoding="utf-8")
    refused = cli(reader, "import", str(vault))
    assert refused.returncode != 0 and "permission denied" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "--db", reader, "serve", "team-handbook", "--http", f"127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        import anyio
        import httpx2

        listening(proc, port, "a server of the reader role")
        assert httpx2.get(f"http://127.0.0.1:{port}/ready").json()["database"] == "ok"
        token = (Path(os.environ["VAULTSYNC_HOME"]) / "http-token").read_text(encoding="utf-8").strip()
        assert anyio.run(_search, f"http://127.0.0.1:{port}/mcp", token) == ["Atlas.md"]  # the user's own token
    finally:
        assert "Traceback" not in stopped(proc)
    other = cli(as_role(f"{schema}_other"), "read", "Atlas.md")
    assert other.returncode != 0 and f"may not use the schema {schema}" in other.stderr, other.stderr
    assert f"GRANT USAGE ON SCHEMA {schema}" in other.stderr and "does not exist" not in other.stderr

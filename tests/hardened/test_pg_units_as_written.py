"""The units of ``examples/postgres`` started as written (``support/units.py``): each unit's ExecStart in its
EnvironmentFile's environment, as another user, on a real PostgreSQL whose roles ``roles.sql`` made. The watcher
records as the owner role, the plain servers answer as the reader role, and the hardened server of
``manifest-pg.toml`` starts with the watcher's environment file (its VAULTSYNC_DB names the manifest's database)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.mcp_helpers import free_port, listening
from support.units import Machine, unavailable
from support.watch_helpers import wait_until

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "postgres"
WATCH = EXAMPLES / "vaultsync-pg-watch.service"
SERVE = EXAMPLES / "vaultsync-pg-serve@.service"
TOKEN = "deployment-example-token-0123456789"


@pytest.fixture
def machine() -> Iterator[Machine]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    try:
        server = pgserver.shared()
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    found = Machine.create(server)
    etc = found.folder(found.path("/etc/vaultsync"))
    assert "install -d -m 755 /etc/vaultsync" in WATCH.read_text(encoding="utf-8")  # as the install lines make it
    etc.chmod(0o755)
    found.install(EXAMPLES / "vaultsync.env", "/etc/vaultsync/vaultsync.env")
    found.install(EXAMPLES / "vaultsync-serve.env", "/etc/vaultsync/vaultsync-serve.env")
    found.install(EXAMPLES / "vaultsync.env", "/etc/vaultsync/token", mode=0o600, text=TOKEN + "\n")
    vault = found.folder(found.path("/srv/team-handbook"))
    (vault / "Atlas.md").write_text("# Atlas\n\nKickoff on Monday.\n", encoding="utf-8")
    yield found
    found.remove()


def stopped(proc: subprocess.Popen[str], log: Path) -> str:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return log.read_text(encoding="utf-8", errors="replace")


def recorded(machine: Machine) -> bool:
    from vaultsync import Vault

    try:
        with Vault.open(machine.superuser_dsn, name="team-handbook", readonly=True) as v:
            return [r.path for r in v.ls()] == ["Atlas.md"]
    except Exception:
        return False


async def _search(url: str, token: str | None) -> list[str]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from support.mcp_helpers import hit_notes

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))
    async with Client(transport) as c:
        result = await c.call_tool("search_notes", {"query": "kickoff", "mode": "keyword"})
        assert result.is_error is False and result.structured_content is not None, result
        return hit_notes(result.structured_content)


def test_the_units_run_as_written_as_their_users_with_least_privilege(machine: Machine, tmp_path: Path) -> None:
    import anyio
    import httpx2

    argv, env, user = machine.command(SERVE, "8001")
    assert user == "vaultsync-serve" and "vaultsync_reader" in env["VAULTSYNC_DB"]
    assert machine.command(WATCH)[2] == "vaultsync"
    logs: list[tuple[subprocess.Popen[str], Path]] = []
    try:
        logs.append((machine.start(WATCH, tmp_path / "watch.log"), tmp_path / "watch.log"))
        wait_until(lambda: recorded(machine), 60, "the watcher's first catch-up")
        machine.grant_tables()
        for _ in range(2):  # two readers by the vault's name: no vault folder needed
            port = free_port()
            log = tmp_path / f"serve-{port}.log"
            proc = machine.start(SERVE, log, str(port))
            logs.append((proc, log))
            try:
                listening(proc, port, "a server unit", timeout=60)
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {log.read_text(encoding='utf-8')}") from None
            base = f"http://127.0.0.1:{port}"
            assert httpx2.get(base + "/health").json() == {"status": "alive"}
            ready = httpx2.get(base + "/ready")  # the reader role reads the watcher's heartbeat
            assert ready.status_code == 200, ready.text
            assert ready.json()["database"] == "ok" and ready.json()["vault_current"] is True, ready.text
            assert ready.json()["watcher"] == "watching", ready.text
            assert httpx2.post(base + "/mcp", json={}).status_code == 401  # the token is needed there
            assert anyio.run(_search, base + "/mcp", TOKEN) == ["Atlas.md"]
        ps = subprocess.run(["ps", "-o", "user=", "-p", str(logs[1][0].pid)], capture_output=True, text=True)
        assert ps.stdout.strip() in ("nobody", str(machine.user.pw_uid)), ps.stdout
    finally:
        texts = [stopped(proc, log) for proc, log in logs]
    for text in texts:
        assert "Traceback" not in text, text
    assert logs[0][0].returncode == 0, texts[0]


def test_the_hardened_manifest_starts_with_the_watchers_environment_file(machine: Machine, tmp_path: Path) -> None:
    """``manifest-pg.toml`` served under the environment of ``vaultsync.env`` (its VAULTSYNC_DB included): the
    hardened mode accepts a VAULTSYNC_DB naming the manifest's own database."""
    import anyio

    port = free_port()
    text = (EXAMPLES / "manifest-pg.toml").read_text(encoding="utf-8").replace("127.0.0.1:8765", f"127.0.0.1:{port}")
    manifest = machine.install(EXAMPLES / "manifest-pg.toml", "/etc/vaultsync/manifest-pg.toml", mode=0o600, text=text)
    _, env, _ = machine.command(WATCH)  # the watcher unit's environment: vaultsync.env
    vault = machine.path("/srv/team-handbook")
    log = tmp_path / "hardened.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [
                "setpriv",
                f"--reuid={machine.user.pw_uid}",
                f"--regid={machine.user.pw_gid}",
                "--clear-groups",
                *machine.command(WATCH)[0][:1],
                "serve",
                str(vault),
                "--manifest",
                str(manifest),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            cwd="/",
        )
    try:
        try:
            listening(proc, port, "the hardened server", timeout=60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {log.read_text(encoding='utf-8')}") from None

        # on loopback without [[http.tokens]] the server takes its user's own token file, and says where it is
        said = re.search(r"with the token in (\S+)", log.read_text(encoding="utf-8"))
        assert said is not None, log.read_text(encoding="utf-8")
        token = Path(said.group(1)).read_text(encoding="utf-8").strip()

        async def found() -> list[str]:
            for _ in range(300):
                hits = await _search(f"http://127.0.0.1:{port}/mcp", token)
                if hits:
                    return hits
                await anyio.sleep(0.1)
            return []

        assert anyio.run(found) == ["Atlas.md"]
    finally:
        text = stopped(proc, log)
    assert "Traceback" not in text, text


def test_a_reader_role_that_may_not_audit_is_refused_at_start_and_not_ready(machine: Machine, tmp_path: Path) -> None:
    """A hardened server with ``audit_log_path``, as the reader role: without roles.sql's audit grant it refuses to
    start (one line naming the table); with it, ``/ready`` says the log is writable, and once the grant is taken
    back, ``/ready`` answers 503 (every call would be refused) instead of 200."""
    import httpx2

    from vaultsync import Vault

    owner, reader = (
        machine.dsn(f"postgresql://{role}@db.internal:5432/team?options=-csearch_path%3Dvaultsync")
        for role in ("vaultsync_owner", "vaultsync_reader")
    )
    with Vault.open(owner, root=machine.path("/srv/team-handbook"), name="team-handbook") as v:
        v.sync()  # the owner made the tables (the reader may read them: roles.sql's default privileges)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    port = free_port()
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(
        f'db_path = "{reader}"\nvault_name = "team-handbook"\naudit_log_path = "{state / "audit.jsonl"}"\n'
        f'[http]\nbind = "127.0.0.1:{port}"\n',
        encoding="utf-8",
    )
    manifest.chmod(0o600)
    vault = str(machine.path("/srv/team-handbook"))
    argv = [str(machine.command(WATCH)[0][0]), "serve", vault, "--manifest", str(manifest)]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(tmp_path)}
    refused = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1, refused.stderr
    assert "audit_heads" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    machine.grant_tables()
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        listening(proc, port, "the hardened reader", timeout=60)  # type: ignore[arg-type]
        ready = httpx2.get(f"http://127.0.0.1:{port}/ready")
        assert ready.status_code == 200 and ready.json()["audit_log"] == "ok", ready.text
        machine.sql("REVOKE INSERT, UPDATE ON vaultsync.audit_heads FROM vaultsync_reader")
        ready = httpx2.get(f"http://127.0.0.1:{port}/ready")
        assert ready.status_code == 503 and ready.json()["audit_log"] == "refused", ready.text
    finally:
        text = stopped(proc, log)  # type: ignore[arg-type]
    assert "Traceback" not in text, text

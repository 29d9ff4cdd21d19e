"""The hosted deployment of ``examples/hosted`` started for real, shared by its test and the hosted benchmark.

PostgreSQL (the caller's connection string), one watcher per vault (the watcher unit's ExecStart), N stateless
HTTP servers each from its own copy of the example manifest (its bind, audit log, database, issuer and public URL
filled in), the example nginx site in front with TLS from a local CA, and a real authorization server
(tests/support/oidc.py). Every file the examples name under /etc, /srv or /opt is moved under one temporary folder.

    with Deployment.start(tmp, dsn, {"team": folder}, grants) as d:
        d.url("team")   # https://localhost:PORT/vaults/team/mcp, through nginx
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from support.mcp_helpers import free_port, listening
from support.oidc import Issuer, start_issuer
from support.tls_proxy import LocalCA, Proxy, render_site_ports, start_nginx
from support.units import Machine

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "hosted"
MANIFEST = EXAMPLES / "hosted.toml"
SITE = EXAMPLES / "nginx-vaultsync.conf"
WATCH_UNIT = EXAMPLES / "vaultsync-hosted-watch@.service"
SERVE_UNIT = EXAMPLES / "vaultsync-hosted-serve@.service"
INSTALLED = Path(sys.executable).parent / "vaultsync"
EXAMPLE_PORT = "8101"


def exec_start(unit: Path, instance: str) -> list[str]:
    """A unit's ExecStart for one instance (``%i``), the installed command in place of /opt/vaultsync."""
    line = next(x for x in unit.read_text(encoding="utf-8").splitlines() if x.startswith("ExecStart="))
    return shlex.split(
        line.partition("=")[2].replace("%i", instance).replace("/opt/vaultsync/bin/vaultsync", str(INSTALLED))
    )


def toml_list(values: list[str]) -> str:
    return json.dumps(values)


def manifest_text(
    *,
    dsn: str | None,
    port: int,
    issuer: str,
    public_url: str,
    audit: Path | None,
    vaults: dict[str, dict[str, list[str]]] | None,
) -> str:
    """The example manifest for the server on ``port``; ``vaults`` (name -> {"read": [...], ...}) replaces its
    [[oauth.vaults]] tables when given. ``dsn`` and ``audit`` None: the example's (a ``Machine`` moves them)."""
    text = MANIFEST.read_text(encoding="utf-8")
    if dsn is not None:
        text = re.sub(r'^db_path = ".*"$', f"db_path = {json.dumps(dsn)}", text, count=1, flags=re.M)
    if audit is not None:
        text = re.sub(
            r'^audit_log_path = ".*"$', f"audit_log_path = {json.dumps(str(audit))}", text, count=1, flags=re.M
        )
    text = text.replace(EXAMPLE_PORT, str(port))
    text = text.replace('"https://id.example.com"', json.dumps(issuer))
    text = text.replace('"https://vaults.example.com"', json.dumps(public_url))
    if vaults is not None:
        text = text[: text.index("\n[[oauth.vaults]]") + 1]
        for name, grants in vaults.items():
            text += f"[[oauth.vaults]]\nname = {json.dumps(name)}\n"
            text += "".join(f"{role} = {toml_list(who)}\n" for role, who in grants.items()) + "\n"
    return text


def base_env(home: Path) -> dict[str, str]:
    """What a service manager gives the units: a plain PATH, HOME, a UTF-8 locale (and this run's PYTHONPATH)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})
    return env


@dataclass
class Deployment(AbstractContextManager["Deployment"]):
    root: Path
    issuer: Issuer
    ca: LocalCA
    proxy: Proxy
    servers: list[tuple[subprocess.Popen[str], int]] = field(default_factory=list)
    watchers: list[subprocess.Popen[str]] = field(default_factory=list)
    owns_issuer: bool = True
    machine: Machine | None = None
    """Set: the units run as written on it (their env files, users and roles; ``support/units.py``)."""

    @property
    def public(self) -> str:
        return self.proxy.url

    def url(self, vault: str) -> str:
        return f"{self.public}/vaults/{vault}/mcp"

    def audit_logs(self) -> list[Path]:
        if self.machine is not None:
            return sorted(self.machine.path("/var/lib/vaultsync-serve").glob("audit-*.jsonl"))
        return sorted((self.root / "state").glob("audit-*.jsonl"))

    @classmethod
    def start(
        cls,
        root: Path,
        dsn: str,
        folders: dict[str, Path],
        grants: dict[str, dict[str, list[str]]] | None = None,
        *,
        servers: int = 2,
        issuer_env: dict[str, str] | None = None,
        watch: bool = True,
        ca: LocalCA | None = None,
        issuer: Issuer | None = None,
        machine: Machine | None = None,
    ) -> Deployment:
        """Everything started, in the order a machine would: database (given), issuer, watchers (each vault
        recorded once), servers (listening), nginx. ``ca`` and ``issuer``: ones already running (left running).
        ``machine``: the units run as written there (``dsn`` unused; ``folders`` under its /srv/vaults), the
        reader role granted the tables once the watchers made them."""
        root.mkdir(parents=True, exist_ok=True)
        (root / "state").mkdir(exist_ok=True)
        ca = ca or LocalCA.create(root / "tls")
        owns_issuer = issuer is None
        if issuer is None:
            env = {"ISSUER_ALLOW_LOOPBACK_FETCH": "1", "NODE_EXTRA_CA_CERTS": str(ca.root), **(issuer_env or {})}
            issuer = start_issuer(root / "issuer.log", **env)
        proxy_port = free_port()
        deployment = cls(root, issuer, ca, Proxy(None, root / "nginx", proxy_port))  # type: ignore[arg-type]
        deployment.owns_issuer = owns_issuer
        deployment.machine = machine
        try:
            if watch:
                for name, folder in folders.items():
                    deployment.watchers.append(deployment._watcher(name, folder, dsn))
            if machine is not None:
                wait_recorded(machine.superuser_dsn, list(folders))
                machine.grant_tables()
            ports = []
            for _ in range(servers):
                port = free_port()
                deployment.servers.append((deployment._server(port, dsn, grants), port))
                ports.append(port)
            site = render_site_ports(SITE.read_text(encoding="utf-8"), proxy_port, ports, ca)
            deployment.proxy = start_nginx(root / "nginx", site, proxy_port)
        except BaseException:
            deployment.stop()
            raise
        return deployment

    def _watcher(self, name: str, folder: Path, dsn: str) -> subprocess.Popen[str]:
        if self.machine is not None:
            assert folder == self.machine.path(f"/srv/vaults/{name}"), folder
            return self.machine.start(WATCH_UNIT, self.root / "state" / f"watch-{name}.log", name)
        command = exec_start(WATCH_UNIT, name)
        command = [str(folder) if arg == f"/srv/vaults/{name}" else arg for arg in command]
        log = (self.root / "state" / f"watch-{name}.log").open("w")
        return subprocess.Popen(
            command,
            env={**base_env(self.root), "VAULTSYNC_DB": dsn},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            text=True,
        )

    def _server(self, port: int, dsn: str, grants: dict[str, dict[str, list[str]]] | None) -> subprocess.Popen[str]:
        if self.machine is not None:
            text = manifest_text(
                dsn=None, port=port, issuer=self.issuer.url, public_url=self.proxy.url, audit=None, vaults=grants
            )
            self.machine.install(MANIFEST, f"/etc/vaultsync/hosted-{port}.toml", mode=0o600, text=text)
            log = self.root / "state" / f"serve-{port}.log"
            proc = self.machine.start(SERVE_UNIT, log, str(port))
            try:
                return listening(proc, port, f"the server on {port}", timeout=60)
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {self.log(f'serve-{port}')}") from None
        manifest = self.root / "etc" / f"hosted-{port}.toml"
        manifest.parent.mkdir(mode=0o700, exist_ok=True)
        manifest.write_text(
            manifest_text(
                dsn=dsn,
                port=port,
                issuer=self.issuer.url,
                public_url=self.proxy.url,
                audit=self.root / "state" / f"audit-{port}.jsonl",
                vaults=grants,
            ),
            encoding="utf-8",
        )
        manifest.chmod(0o600)
        command = exec_start(SERVE_UNIT, str(port))
        command = [str(manifest) if arg.endswith(f"hosted-{port}.toml") else arg for arg in command]
        proc = subprocess.Popen(
            command,
            env=base_env(self.root),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=(self.root / "state" / f"serve-{port}.log").open("w"),
            text=True,
        )
        try:
            return listening(proc, port, f"the server on {port}", timeout=60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {self.log(f'serve-{port}')}") from None

    def log(self, name: str) -> str:
        path = self.root / "state" / f"{name}.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def server_logs(self) -> list[str]:
        return [self.log(f"serve-{port}") for _, port in self.servers]

    def stop(self) -> None:
        for proc in [p for p, _ in self.servers] + self.watchers:
            if proc.poll() is None:
                proc.terminate()
        for proc in [p for p, _ in self.servers] + self.watchers:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.proxy.proc is not None:
            self.proxy.stop()
        if self.owns_issuer:
            self.issuer.stop()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def wait_recorded(dsn: str, names: list[str], timeout: float = 60) -> None:
    """Until every vault of ``names`` has notes in the database (the watchers' first catch-up)."""
    from vaultsync import Vault

    deadline = time.monotonic() + timeout
    missing = list(names)
    while missing and time.monotonic() < deadline:
        for name in list(missing):
            try:
                with Vault.open(dsn, name=name, readonly=True) as vault:
                    if vault.ls():
                        missing.remove(name)
            except Exception:
                pass
        time.sleep(0.2)
    assert not missing, f"never recorded: {missing}"


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

"""Running a server until it is stopped, for ``vaultsync serve`` (plain, or hardened by a manifest): the
config and the transport from the command line's options, one line to the operator saying what is
served once the vault is open, then stdio or streamable HTTP."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import ConfigError
from . import stdio
from . import transports as t
from .app import server_for
from .served import ServeConfig, ServedVault

if TYPE_CHECKING:
    from ..hardened.access import HostedVault, OAuthSettings
    from ..hardened.manifest import Manifest

Say = Callable[[str], object]

LOCK_COMMAND = "vaultsync serve (hardened)"
"""How the writer lock names a hardened server: never its arguments."""


@dataclass(frozen=True)
class Http:
    """Serve streamable HTTP at ``http(s)://host:port/mcp``."""

    host: str
    port: int
    token: str | None = None
    """The one bearer token to require (None: none, or ``verifier``'s)."""
    generated: bool = False
    """The token was generated here: written to a file only this user reads (``tell_token``)."""
    token_path: Path | None = None
    """The file the token is in (said to the operator; the token itself is not printed)."""
    tls: tuple[str, str] | None = None
    """The certificate and key files for HTTPS."""
    verifier: Any = None
    """A verifier of several tokens (``transports.HashedTokenVerifier``)."""
    oauth: OAuthSettings | None = None
    """An OAuth 2.1 resource server: the issuer whose tokens it takes, its public URL, who may use which vault."""
    trusted_proxies: tuple[str, ...] = ()
    """The proxies whose ``X-Forwarded-For`` names the client in the access log."""
    metrics: bool = False
    """Answer ``GET /metrics`` (``server/metrics.py``)."""

    @property
    def url(self) -> str:
        if self.oauth is not None:
            return self.oauth.resource()
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}/mcp"


def plain_config(db: Path, vault_name: str | None, vault_dir: Path, *, watch: bool, allow_writes: bool) -> ServeConfig:
    """``serve VAULT``: VAULT is the vault folder or, read-only, a vault name in the database."""
    folder = vault_dir.expanduser()
    if not folder.is_dir() and (len(vault_dir.parts) > 1 or str(vault_dir).startswith((".", "~"))):
        raise ConfigError(f"vault folder {vault_dir} does not exist or is not a folder")
    return ServeConfig(
        db=db,
        root=folder if folder.is_dir() else None,
        vault=vault_name or (None if folder.is_dir() else str(vault_dir)),
        allow_writes=allow_writes,
        watch=watch,
    )


def plain_http(
    bind: str | None,
    token_file: Path | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    oauth: OAuthSettings | None = None,
) -> Http | None:
    """``--http HOST:PORT`` with its token, certificate and OAuth options (None: stdio). Behind OAuth no token is
    generated: a ``--token-file`` token is still taken (the operator's local clients)."""
    host, port = t.parse_bind(bind) if bind else ("", 0)
    tls = t.check_tls(tls_cert, tls_key)
    if tls is not None and not bind:
        raise ConfigError("--tls-cert and --tls-key serve HTTPS: add --http HOST:PORT")
    if oauth is not None and not bind:
        raise ConfigError("--oauth-issuer serves OAuth over HTTP: add --http HOST:PORT")
    if not bind:
        return None
    if oauth is not None:
        token = t.read_token(token_file) if token_file is not None else None
        return Http(host, port, token=token, tls=tls, oauth=oauth)
    token, generated, path = t.resolve_token(host, token_file)
    return Http(host, port, token=token, generated=generated, tls=tls, token_path=path)


def hardened_config(manifest: Manifest, vault_dir: Path) -> tuple[ServeConfig, Http | None]:
    """What a manifest says to serve, and how (every privileged setting is the manifest's)."""
    folder = vault_dir.expanduser()
    if not folder.is_dir():
        raise ConfigError(f"vault folder {vault_dir} does not exist or is not a folder")
    config = ServeConfig(
        db=manifest.db_path,
        root=folder,
        vault=manifest.vault_name,
        allow_writes=manifest.allow_writes,
        watch=manifest.watch,
        lock_command=LOCK_COMMAND,
        manifest=manifest,
    )
    http = manifest.http
    if http is None:
        return config, None
    host, port = t.parse_bind(http.bind)
    tls = t.check_tls(http.tls_cert, http.tls_key)
    if not http.tokens and host not in t.LOOPBACK and manifest.oauth is None:
        raise ConfigError(
            f"manifest {manifest.path}: http.tokens: serving beyond loopback ({host}) needs at "
            "least one [[http.tokens]] entry (or an [oauth] table)"
        )
    if manifest.oauth is not None:
        config = replace(config, oauth=True)
    if http.tokens:
        verifier = t.HashedTokenVerifier(http.tokens)
        return config, Http(
            host,
            port,
            tls=tls,
            verifier=verifier,
            oauth=manifest.oauth,
            trusted_proxies=http.trusted_proxies,
            metrics=http.metrics,
        )
    if manifest.oauth is not None:
        return config, Http(
            host, port, tls=tls, oauth=manifest.oauth, trusted_proxies=http.trusted_proxies, metrics=http.metrics
        )
    path = t.local_token_file()  # loopback without [[http.tokens]]: the user's own token, as for a plain server
    return config, Http(
        host,
        port,
        token=t.local_token(path),
        tls=tls,
        token_path=path,
        trusted_proxies=http.trusted_proxies,
        metrics=http.metrics,
    )


def hosted_configs(manifest: Manifest) -> tuple[list[tuple[HostedVault, ServeConfig]], Http]:
    """A hosted server's vaults (the manifest's ``[[oauth.vaults]]``), each opened by name from the database."""
    assert manifest.oauth is not None and manifest.http is not None
    configs = []
    for vault in manifest.oauth.vaults:
        folder = vault.folder
        if folder is not None and not folder.is_dir():
            raise ConfigError(f"manifest {manifest.path}: oauth.vaults: {vault.name!r}: {folder} is not a folder")
        config = ServeConfig(
            db=manifest.db_path,
            root=folder,
            vault=vault.name,
            allow_writes=manifest.allow_writes and folder is not None,
            watch=manifest.watch and folder is not None,
            lock_command=LOCK_COMMAND,
            manifest=manifest,
            oauth=True,
            name=f"vaultsync ({vault.name})",
            await_vault=True,  # a vault no watcher has recorded yet: the others are served meanwhile
        )
        configs.append((vault, config))
    http = manifest.http
    host, port = t.parse_bind(http.bind)
    tls = t.check_tls(http.tls_cert, http.tls_key)
    verifier = t.HashedTokenVerifier(http.tokens) if http.tokens else None
    return configs, Http(
        host,
        port,
        tls=tls,
        verifier=verifier,
        oauth=manifest.oauth,
        trusted_proxies=http.trusted_proxies,
        metrics=http.metrics,
    )


def run_hosted(configs: list[tuple[HostedVault, ServeConfig]], http: Http, say: Say, warn: Say | None = None) -> None:
    """Serve every vault of a hosted server, each at its own endpoint, until SIGINT/SIGTERM."""
    from .oauth.app import Protected

    assert http.oauth is not None
    oauth = http.oauth
    protected, served_all = [], []
    audit = _shared_audit(configs[0][1].manifest) if configs else None
    for vault, config in configs:

        def announce(served: ServedVault, vault: HostedVault = vault) -> None:
            if served.missing is not None:
                say(
                    f"vaultsync: {vault.name}: not in the database yet ({served.missing}); serving the other "
                    "vaults, and this one once its watcher has recorded it"
                )
                return
            standby = served.describe()
            if standby:
                say(f"vaultsync: {vault.name}: {standby}")
            say(f"vaultsync: serving vault '{vault.name}' (hardened, OAuth) at {oauth.resource(vault.name)}")

        served = ServedVault(replace(config, announce=announce))
        served_all.append(served)
        mcp = server_for(served, audit=audit, vault=vault.name)
        protected.append(Protected(mcp, vault.name, vault.grant, served.allow_writes, audit=audit))
    warning = t.clear_text_warning(http.host, http.tls)
    if warning and not oauth.public_url.startswith("https://"):
        (warn or say)(f"vaultsync: {warning}")
    anyio.run(
        lambda: t.serve_http(
            protected[0].mcp,
            http.host,
            http.port,
            token=None,
            tls=http.tls,
            verifier=http.verifier,
            served=served_all,
            oauth=oauth,
            protected=protected,
            trusted_proxies=http.trusted_proxies,
            metrics=http.metrics,
        )
    )


def _shared_audit(manifest: Manifest | None) -> Any:
    """The one audit log every vault of a hosted server appends to (None: the manifest keeps none)."""
    if manifest is None or manifest.audit_log_path is None:
        return None
    from ..hardened.audit import AuditLog
    from ..hardened.keystore import load_keystore

    keystore = load_keystore(manifest.keystore_path) if manifest.keystore_path else None
    return AuditLog(manifest.audit_log_path, manifest.db_path, keystore, manifest.audit_digest_key_path)


def tell_token(http: Http, say: Say) -> None:
    """Where a generated token is (a mode-600 file: ``token_file.py``), never the token itself."""
    if http.generated and http.token is not None:
        from .token_file import write_generated

        path = write_generated(http.token, http.host, http.port)
        say(
            f"vaultsync: bearer token written to {path} (readable by this user only; clients send it in the "
            "header 'Authorization: Bearer <token>')"
        )


def run(config: ServeConfig, http: Http | None, say: Say, warn: Say | None = None) -> None:
    """Serve until stdin closes (stdio) or SIGINT/SIGTERM. Once the vault is open ``say`` gets the
    operator's lines (a reader in standby; over HTTP where it serves, and a generated token);
    ``warn`` a warning about clear text beyond this machine."""
    if http is not None and http.oauth is not None:
        config = replace(config, oauth=True)

    def announce(served: ServedVault) -> None:
        standby = served.describe()
        if standby:
            say(f"vaultsync: {standby}")
        if http is None:
            return
        name = served.reader.name if served.reader is not None else config.vault
        hardened = " (hardened)" if config.manifest is not None else ""
        say(f"vaultsync: serving vault '{name}'{hardened} at {http.url}")
        warning = t.clear_text_warning(http.host, http.tls)
        if warning and not (http.oauth is not None and http.oauth.public_url.startswith("https://")):
            (warn or say)(f"vaultsync: {warning}")
        if http.oauth is not None and http.oauth.grant.open:
            how = "list who may in [oauth] read/write/admin" if config.manifest else "name who may with --oauth-allow"
            (warn or say)(f"vaultsync: WARNING: anyone the OAuth issuer signs in may use this vault; {how}")
        tell_token(http, say)
        if not http.generated and http.token_path is not None:
            say(f"vaultsync: clients send 'Authorization: Bearer <token>' with the token in {http.token_path}")

    served = ServedVault(replace(config, announce=announce))
    protected = None
    if http is not None and http.oauth is not None and config.manifest is not None:
        from .oauth.app import Protected

        # one audit log for the MCP server's records and the HTTP gate's refusals
        audit = _shared_audit(config.manifest)
        mcp = server_for(served, audit=audit)
        protected = [Protected(mcp, None, http.oauth.grant, served.allow_writes, audit=audit)]
    else:
        mcp = server_for(served)
    if http is None:
        anyio.run(stdio.serve_stdio, mcp)
    else:
        anyio.run(
            lambda: t.serve_http(
                mcp,
                http.host,
                http.port,
                token=http.token,
                tls=http.tls,
                verifier=http.verifier,
                served=served,
                oauth=http.oauth,
                protected=protected,
                trusted_proxies=http.trusted_proxies,
                metrics=http.metrics,
            )
        )

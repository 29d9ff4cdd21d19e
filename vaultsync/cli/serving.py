"""The commands that keep running (watch, serve): the watcher and the MCP server; thin click commands.

``commands.py`` adds ``COMMANDS`` to its group; this module does not import ``commands.py``. The watcher, the
store and the MCP SDK are imported only when a command here runs.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import click

from ..config import RETENTION_ENV, default_retention
from ..errors import VaultsyncError
from ..live.pace import DEBOUNCE_MS, MAX_FAILING_S, RECONCILE_S, STEP_MS
from ..retention import EXAMPLE, parse_policy
from .base import Context, friendly, pass_ctx


@click.command()
@click.argument("vault_dir", metavar="VAULT", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--polling",
    is_flag=True,
    envvar="VAULTSYNC_FORCE_POLLING",
    help="Poll the folder every second instead of OS events (network shares, some containers).",
)
@click.option(
    "--step-ms",
    type=click.IntRange(min=1),
    default=STEP_MS,
    show_default=True,
    help="Quiet period: a batch is written once no change arrived for this long.",
)
@click.option(
    "--debounce-ms",
    type=click.IntRange(min=1),
    default=DEBOUNCE_MS,
    show_default=True,
    help="Maximum wait: a batch is written at the latest this long after its first change. A deletion "
    "no new file joined into a rename waits this long too (at least 1 s) for its other half.",
)
@click.option(
    "--reconcile-s",
    type=click.FloatRange(min=0),
    default=RECONCILE_S,
    show_default=True,
    help="Full rescan this often to repair changes the OS did not report (0: never).",
)
@click.option("-v", "--verbose", count=True, help="Also log every path each batch wrote.")
@click.option("--json", "as_json", is_flag=True, help="Print each batch as one JSON line on stdout.")
@click.option(
    "--wait",
    is_flag=True,
    help="If another process watches the vault (e.g. serve --watch), wait and "
    "take over when it stops, instead of exiting with an error; a database not up yet is waited for "
    "too (up to --max-outage-s).",
)
@click.option(
    "--max-outage-s",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="Exit with an error (for a service manager to restart) once the database has been unreachable "
    "this long; what changed meanwhile is recorded by the next start.",
)
@click.option(
    "--max-failing-s",
    type=click.FloatRange(min=0),
    default=MAX_FAILING_S,
    show_default=True,
    help="Exit with an error naming the cause (for a service manager to restart) once batches have kept failing "
    "this long for another reason than an outage it waits out; the next start records what was pending.",
)
@click.option(
    "--retention",
    metavar="POLICY",
    envvar=RETENTION_ENV,
    help=f"Thin the stored history by this retention policy, checked hourly while idle (default: ${RETENTION_ENV}; "
    f"unset: every revision is kept), e.g. '{EXAMPLE}'.",
)
@pass_ctx
@friendly
def watch(
    obj: Context,
    vault_dir: Path,
    polling: bool,
    step_ms: int,
    debounce_ms: int,
    reconcile_s: float,
    verbose: int,
    as_json: bool,
    wait: bool,
    max_outage_s: float,
    max_failing_s: float,
    retention: str | None,
) -> None:
    """Keep the store current while you write: one atomic batch per burst of changes.

    Catches up on what changed since the last run, then watches until SIGINT or SIGTERM, which
    write the pending batch and exit 0 (1 if it could not be written). One log line per batch on stderr.

    \b
    Example:
        vaultsync watch ~/notes
        vaultsync watch ~/notes --polling --step-ms 1000
        vaultsync watch ~/notes --wait
        vaultsync watch ~/notes --retention "keep_all=1d hourly=7d daily=90d weekly=forever"
    """
    import threading

    from ..live.foreground import open_when_reachable, stop_on_signals
    from ..live.foreground import watch as watch_vault
    from ..live.writer_role import WriterRole

    policy = parse_policy(retention) if retention else None
    log = logging.getLogger("vaultsync")
    log.setLevel(min(log.getEffectiveLevel(), logging.DEBUG if verbose else logging.INFO))
    stop = threading.Event()
    restore = stop_on_signals(stop)
    try:
        opening = lambda: obj.vault(root=str(vault_dir), readonly=False)  # noqa: E731
        say = lambda line: _say(f"vaultsync: {line}")  # noqa: E731
        # --wait: a database not up yet is waited for too (as long as an outage is ridden out once watching)
        vault = open_when_reachable(opening, stop, max_outage_s=max_outage_s, say=say) if wait else opening()
        if vault is None:
            return
        role = WriterRole(vault)
        if wait and not role.wait(stop, say=say):
            return
        watch_vault(
            vault,
            step_ms=step_ms,
            debounce_ms=debounce_ms,
            polling=polling,
            reconcile_s=reconcile_s,
            stop_event=stop,
            on_batch=(lambda s: click.echo(json.dumps(s.to_json()))) if as_json else None,
            role=role,
            describe=_refusal(vault_dir),
            max_outage_s=max_outage_s,
            max_failing_s=max_failing_s,
            retention=policy,
        )
    finally:
        restore()


@click.command()
@click.argument("vault_dir", metavar="[VAULT]", required=False, type=click.Path(path_type=Path))
@click.option(
    "--http",
    "bind",
    metavar="HOST:PORT",
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of "
    "stdio. Loopback (127.0.0.1) unless you name another address. A bearer token is always required: on loopback "
    "your own, kept in http-token in the data directory (made on first use, mode 600).",
)
@click.option(
    "--watch",
    is_flag=True,
    help="Run the watcher in this process so answers always reflect the folder "
    "(if another process watches this vault, serve as a reader and take over when it stops).",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Offer the write tools, inside the vault only: create_note, "
    "append_to_note, edit_note and restore_note (each recorded as a new revision; history is never "
    "rewritten).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Require the bearer token in this file (--http; mode 600). If omitted: on loopback the one in the data "
    "directory's http-token; beyond loopback one is generated and printed once.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Serve HTTPS with this certificate (PEM; with --tls-key and --http).",
)
@click.option("--tls-key", type=click.Path(dir_okay=False, path_type=Path), help="The certificate's private key (PEM).")
@click.option(
    "--oauth-issuer",
    metavar="URL",
    help="Be an OAuth 2.1 resource server: accept access tokens (JWTs) of this issuer, checked against its "
    "published keys (with --public-url and --http; see docs/hosted.md).",
)
@click.option(
    "--public-url",
    metavar="URL",
    help="The base URL clients reach this server at (through a proxy): the MCP endpoint, and the audience "
    "tokens must name, is URL/mcp.",
)
@click.option(
    "--oauth-allow",
    metavar="WHO",
    multiple=True,
    help="Only these may use the vault over OAuth: a subject (the token's sub), group:NAME (its groups claim) "
    "or * (anyone the issuer signs in). Repeat it; default: anyone holding a valid token, with a warning.",
)
@click.option(
    "--oauth-introspection",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also accept opaque tokens by asking the issuer (RFC 7662), with the client_id and client_secret "
    "in this TOML file (mode 600).",
)
@click.option(
    "--manifest",
    "manifest_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Hardened mode: every privileged setting comes from this TOML file (see examples/manifest.toml); "
    "no other option may set them.",
)
@pass_ctx
@friendly
def serve(
    obj: Context,
    vault_dir: Path,
    bind: str | None,
    watch: bool,
    allow_writes: bool,
    token_file: Path | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    oauth_issuer: str | None,
    public_url: str | None,
    oauth_allow: tuple[str, ...],
    oauth_introspection: Path | None,
    manifest_path: Path | None,
) -> None:
    """Serve the vault to AI assistants over MCP (stdio by default; only protocol on stdout).

    VAULT is the vault folder (or, read-only, a vault name in the database). The database is
    opened read-only unless --watch or --allow-writes is given. A hosted server whose manifest
    lists several vaults ([[oauth.vaults]]) takes no VAULT.

    \b
    Example:
        vaultsync serve ~/notes
        vaultsync serve ~/notes --watch --http 127.0.0.1:8765
        vaultsync serve ~/notes --http 0.0.0.0:8765 --token-file token --tls-cert c.pem --tls-key k.pem
        vaultsync serve ~/notes --manifest /etc/vaultsync/manifest.toml
        vaultsync serve ~/notes --http 127.0.0.1:8765 --oauth-issuer https://id.example.com --public-url https://notes.example.com
        vaultsync serve --manifest /etc/vaultsync/hosted.toml    # several vaults: [[oauth.vaults]]
    """
    if manifest_path is not None:
        from ..hardened import serve as hardened

        given = _privileged_options(
            http=bind,
            watch=watch,
            allow_writes=allow_writes,
            token_file=token_file,
            tls_cert=tls_cert,
            tls_key=tls_key,
            oauth_issuer=oauth_issuer,
            public_url=public_url,
            oauth_introspection=oauth_introspection,
            oauth_allow=oauth_allow,
        )
        manifest = hardened.prepare(manifest_path, given, echo=_say)  # every refusal before the heavy imports
        from ..server import launch

        if manifest.oauth is not None and manifest.oauth.vaults:
            if vault_dir is not None:
                raise click.UsageError("the manifest lists [[oauth.vaults]]: give no VAULT")
            launch.run_hosted(*launch.hosted_configs(manifest), _say)
            return
        if vault_dir is None:
            raise click.UsageError("give the VAULT folder")
        launch.run(*launch.hardened_config(manifest, vault_dir), _say)
        return
    if vault_dir is None:
        raise click.UsageError("give the VAULT to serve (a folder, or a vault name in the database)")
    import dataclasses

    from ..hardened.access import from_flags
    from ..server import launch

    config = launch.plain_config(obj.db, obj.vault_name, vault_dir, watch=watch, allow_writes=allow_writes)
    if watch:  # the in-process watcher says a refusal in the command line's words, as `watch` does
        retention = default_retention()  # and applies the configured retention policy, as `watch` does
        options = {"describe": _refusal(vault_dir), "retention": parse_policy(retention) if retention else None}
        config = dataclasses.replace(config, watcher_options={**(config.watcher_options or {}), **options})
    oauth = from_flags(oauth_issuer, public_url, oauth_introspection, oauth_allow)
    http = launch.plain_http(bind, token_file, tls_cert, tls_key, oauth)
    launch.run(config, http, _say, warn=lambda line: click.secho(line, err=True, fg="red", bold=True))


def _refusal(vault_dir: Path) -> Any:
    """How ``watch`` says a refusal: a mass deletion names the import that confirms it."""
    from ..errors import MassDeletion

    def describe(exc: VaultsyncError) -> str:
        if isinstance(exc, MassDeletion):
            return f"{exc} (stop watching, then run `vaultsync import {vault_dir} --allow-mass-delete`)"
        return str(exc)  # a vanished folder: the watcher waits for it (no option to give)

    return describe


def _say(line: str) -> None:
    click.echo(line, err=True)


def _privileged_options(**values: object) -> list[str]:
    """What ``serve --manifest`` refuses: the global options and environment, then the serve options given."""
    root = click.get_current_context().find_root()
    given = [
        env if source.name == "ENVIRONMENT" else flag
        for flag, env, source in (
            ("--db", "VAULTSYNC_DB", root.get_parameter_source("db")),
            ("--vault", "--vault", root.get_parameter_source("vault_name")),
        )
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")
    ]
    return given + ["--" + name.replace("_", "-") for name, value in values.items() if value]


COMMANDS = (watch, serve)

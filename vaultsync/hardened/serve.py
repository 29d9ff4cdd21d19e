"""``vaultsync serve VAULT --manifest PATH``: the hardened entry point.

Every privileged setting comes from the manifest (``manifest.py``); the command line names only the
vault folder and the manifest, and an option that would set a privileged value is refused.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError
from . import spawn
from .manifest import Manifest, load_manifest

LOCK_COMMAND = "vaultsync serve (hardened)"
"""How the writer lock names this server: never its arguments."""


def refuse_options(given: list[str]) -> None:
    """``given``: the options (or ``VAULTSYNC_DB``) that would set what the manifest sets."""
    if given:
        name = given[0]
        raise ConfigError(f"{name} cannot be used with --manifest: the manifest holds every privileged setting "
                          f"(see examples/manifest.toml)")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def prepare(manifest_path: Path, given: list[str], echo: Callable[[str], object] = _stderr) -> Manifest:
    """The checks that run before any state is built (``check_argv`` ran before click, in
    ``vaultsync.cli.main``): options, the manifest, the environment's secrets, the parent, the
    keystore. Then **this process's** ``os.environ`` is scrubbed (``spawn.scrub_environment``):
    call it in the server process only, never in a test's own process."""
    refuse_options(given)
    manifest = load_manifest(manifest_path)
    warning = spawn.check_environment(manifest)
    spawn.check_parent(manifest)
    if manifest.keystore_path is not None:
        from .keystore import load_keystore

        load_keystore(manifest.keystore_path)  # a loose or broken keystore is refused now, not at first use
    spawn.scrub_environment(manifest)
    if warning:
        echo(f"vaultsync: {warning}")
    return manifest


def serve_hardened(manifest: Manifest, vault_dir: Path, echo: object = print) -> None:
    """Build the server the manifest describes and serve it on stdio or HTTP until stopped."""
    import anyio

    from ..server import ServeConfig, build_server
    from ..server import transports as t

    folder = vault_dir.expanduser()
    if not folder.is_dir():
        raise ConfigError(f"vault folder {vault_dir} does not exist or is not a folder")
    config = ServeConfig(db=manifest.db_path, root=folder, vault=manifest.vault_name,
                         allow_writes=manifest.allow_writes, watch=manifest.watch, lock_command=LOCK_COMMAND)
    http = manifest.http
    if http is not None:
        host, port = t.parse_bind(http.bind)
        tls = t.check_tls(http.tls_cert, http.tls_key)
        if not http.tokens and host not in t.LOOPBACK:
            raise ConfigError(f"manifest {manifest.path}: http.tokens: serving beyond loopback ({host}) needs at "
                              "least one [[http.tokens]] entry")
    mcp = build_server(config, manifest=manifest)
    standby = mcp.runtime.watcher.describe()
    if standby:
        echo(f"vaultsync: {standby}")
    if http is None:
        anyio.run(t.serve_stdio, mcp)
        return
    verifier = t.HashedTokenVerifier(http.tokens) if http.tokens else None
    echo(f"vaultsync: serving vault '{mcp.runtime.reader.name}' (hardened) at "
         f"{'https' if tls else 'http'}://{host}:{port}/mcp")
    warning = t.clear_text_warning(host, tls)
    if warning:
        echo(f"vaultsync: {warning}")
    anyio.run(lambda: t.serve_http(mcp, host, port, token=None, tls=tls, verifier=verifier))

"""``vaultsync serve VAULT --manifest PATH``: the hardened entry point.

Every privileged setting comes from the manifest (``manifest.py``); the command line names only the
vault folder and the manifest, and an option that would set a privileged value is refused. This
module checks before anything is built; ``vaultsync.server.launch`` serves what the manifest says
(the server imports the hardened mode, never the other way round).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError
from . import spawn
from .manifest import Manifest, load_manifest


def refuse_options(given: list[str]) -> None:
    """``given``: the options (or ``VAULTSYNC_DB``) that would set what the manifest sets."""
    if given:
        name = given[0]
        raise ConfigError(
            f"{name} cannot be used with --manifest: the manifest holds every privileged setting "
            f"(see examples/manifest.toml)"
        )


def check_environment_db(manifest: Manifest, value: str | None) -> None:
    """``VAULTSYNC_DB`` beside ``--manifest``: accepted when it names the manifest's own database (a service's
    environment file shared with the watcher changes nothing), refused when it names another one: the manifest
    alone decides which database a hardened server reads."""
    if value is None:
        return
    named = manifest.db_path
    if isinstance(named, str):
        same = value == named
    else:
        same = Path(value).expanduser().resolve() == Path(named).resolve()
    if not same:
        raise ConfigError(
            "VAULTSYNC_DB names another database than the manifest's db_path, which alone decides the database "
            "of a hardened server: leave VAULTSYNC_DB out of the server's environment (its EnvironmentFile)"
        )


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def prepare(manifest_path: Path, given: list[str], echo: Callable[[str], object] = _stderr) -> Manifest:
    """The checks that run before any state is built (``check_argv`` ran before click, in
    ``vaultsync.cli.main``): options, the manifest, the environment's secrets, the parent, the
    keystore. Then **this process's** ``os.environ`` is scrubbed (``spawn.scrub_environment``):
    call it in the server process only, never in a test's own process."""
    refuse_options([name for name in given if name != "VAULTSYNC_DB"])
    manifest = load_manifest(manifest_path)
    if "VAULTSYNC_DB" in given:
        check_environment_db(manifest, os.environ.get("VAULTSYNC_DB"))
    warning = spawn.check_environment(manifest)
    spawn.check_parent(manifest)
    if manifest.keystore_path is not None:
        from .keystore import load_keystore

        load_keystore(manifest.keystore_path)  # a loose or broken keystore is refused now, not at first use
    spawn.scrub_environment(manifest)
    if warning:
        echo(f"vaultsync: {warning}")
    return manifest

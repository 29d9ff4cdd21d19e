"""Safe-spawn checks of the hardened mode: who started the server, with what, in which environment.

They run before the database is opened or any state is built, in this order, and each refusal is
one ``ConfigError`` line naming the offending argument, variable or parent (the CLI prints it and
exits 1):

1. ``check_argv`` (in ``vaultsync.cli.main``, before click parses anything, whenever the command
   line holds ``--manifest`` or ``--manifest=PATH``): no configuration through argv. Refused,
   anywhere in argv (after ``--`` too): ``--config``, ``--config-json``, ``--inline-config`` and
   ``--secret``, alone or as ``--name=value`` (names compared case-insensitively); ``-c`` alone, glued
   to its value (``-cx``, ``-c=x``) or in a cluster of short flags (``-vc``). The message names the
   option and its position, never its value (which may be a secret).
2. The manifest is loaded (``load_manifest``): it extends the secret list and names the parents.
3. ``check_environment``: none of ``Manifest.secret_env`` may be *present* in the environment (even
   empty: a host that means to pass nothing unsets it). ``VAULTSYNC_REJECT_INHERITED_SECRETS=0``
   (exactly ``0``; any other value keeps the check) lets the start go on with one warning line.
4. ``check_parent``: when stdin is not a terminal and ``VAULTSYNC_PARENT_BASENAME`` is set (even
   empty), its value must be one of ``allowed_parents``, compared exactly. Unset skips the check; a
   terminal on stdin lifts it (a person started the server).

Then ``scrub_environment`` cuts ``os.environ`` of the server process itself down to ``KEEP_ENV``,
``LC_*`` and the manifest's ``pass_env``, and always drops every name of ``secret_env``. Everything
the server starts afterwards (git, the "spawn" parse workers, any library's subprocess) inherits
that environment and nothing else, without each call site having to pass ``env=``; a tool can no
longer read a secret the host leaked (it was refused, or with the override, removed).
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping, Sequence

from ..errors import ConfigError
from .manifest import Manifest

CONFIG_OPTIONS = ("--config", "--config-json", "--inline-config", "--secret")
"""Long options that would carry configuration on the command line (also as ``--name=value``)."""
_SHORT_CONFIG = re.compile(r"-[A-Za-z]*c")
"""``-c``, ``-cVALUE``, ``-c=VALUE`` and clusters of short flags holding ``c`` (``-vc``)."""

OVERRIDE = "VAULTSYNC_REJECT_INHERITED_SECRETS"
"""``0``: start even when the environment holds a secret (it is still removed by the scrub)."""
PARENT = "VAULTSYNC_PARENT_BASENAME"
"""The host's program name, as the host itself reports it."""

KEEP_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TERM",
    "SYSTEMROOT",
    "WINDIR",
    "TEMP",
    "TMP",
    "PATHEXT",
    "COMSPEC",
)
"""What the server process keeps of its environment (with ``LC_*`` and the manifest's ``pass_env``):
enough for git, Python and the locale; no credentials, no configuration of other programs."""


def wants_hardened(argv: Sequence[str]) -> bool:
    """True when ``argv`` (without the program name) asks for the hardened mode."""
    return any(arg == "--manifest" or arg.startswith("--manifest=") for arg in argv)


def check_argv(argv: Sequence[str]) -> None:
    """Refuse configuration passed on the command line (ConfigError naming the option and its position)."""
    for position, arg in enumerate(argv, start=1):
        name = arg.split("=", 1)[0]
        if name.lower() in CONFIG_OPTIONS:
            shown = name.lower()
        elif not arg.startswith("--") and _SHORT_CONFIG.match(arg):
            shown = "-c"
        else:
            continue
        raise ConfigError(
            f"argument {position} ({shown}) refused: with --manifest no configuration comes "
            "through the command line; put the setting in the manifest"
        )


def check_environment(manifest: Manifest, environ: MutableMapping[str, str] | None = None) -> str | None:
    """Refuse a start whose environment holds a secret; the warning line to print when the operator
    turned the check off with ``VAULTSYNC_REJECT_INHERITED_SECRETS=0`` (None otherwise)."""
    env = os.environ if environ is None else environ
    present = [name for name in manifest.secret_env if name in env]
    if env.get(OVERRIDE) == "0":
        found = f"{', '.join(present)} found and removed from this process" if present else "none found now"
        return f"warning: {OVERRIDE}=0: the inherited-secrets check is off, at your own risk ({found})"
    if present:
        more = f" (and {', '.join(present[1:])})" if len(present) > 1 else ""
        raise ConfigError(
            f"environment variable {present[0]}{more} refused: a hardened server must not inherit "
            f"secrets; start it without (env -u {present[0]} ...), or set {OVERRIDE}=0 at your "
            "own risk"
        )
    return None


def stdin_is_terminal() -> bool:
    try:
        return os.isatty(0)
    except OSError:  # pragma: no cover - stdin closed
        return False


def check_parent(
    manifest: Manifest, environ: MutableMapping[str, str] | None = None, *, terminal: bool | None = None
) -> None:
    """Refuse a parent the manifest does not allow (see the module docstring for when it applies)."""
    env = os.environ if environ is None else environ
    parent = env.get(PARENT)
    if parent is None or (stdin_is_terminal() if terminal is None else terminal):
        return
    if parent not in manifest.allowed_parents:
        shown = repr(parent[:80])  # the host wrote it: quoted, control characters escaped, bounded
        allowed = ", ".join(manifest.allowed_parents) or "none"
        raise ConfigError(
            f"parent {shown} ({PARENT}) refused: not in allowed_parents of {manifest.path} (allowed: {allowed})"
        )


def scrub_environment(manifest: Manifest, environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Remove every variable but ``KEEP_ENV``, ``LC_*`` and ``pass_env`` (never a secret); the names removed."""
    env = os.environ if environ is None else environ
    keep = set(KEEP_ENV) | set(manifest.pass_env)
    secret = set(manifest.secret_env)
    removed = sorted(name for name in env if name in secret or not (name in keep or name.startswith("LC_")))
    for name in removed:
        del env[name]  # os.environ: unsetenv too, so children started any way inherit the same
    return removed

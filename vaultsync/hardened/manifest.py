"""The operator's manifest for ``vaultsync serve VAULT --manifest PATH``: every privileged setting in
one TOML file the operator controls, checked strictly before anything else happens.

The models below are the manifest's schema (``schema.py`` has the kinds of value and the error formatter).
Refused, each with the key named: a key the schema does not know, a value of the wrong type, a
manifest writable by group or others (or owned by another user than the caller or root). Relative
paths in the manifest are relative to the manifest's folder. See ``examples/manifest.toml``.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from ..errors import ConfigError
from .access import OAuthSettings
from .schema import DbPath, Flag, IfMissing, Model, Names, PathText, Text, refuse, validated

DEFAULT_SECRET_ENV = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "HF_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
    "VAULTSYNC_SIGNING_KEY",
)
"""Environment variables whose presence refuses a hardened start (``reject_env`` adds more)."""


_DIGEST = 'must be the 64 hex digits of the token\'s SHA-256 (printf %s "$TOKEN" | sha256sum)'
_HEX = frozenset("0123456789abcdef")


def _digest(value: str) -> str:
    digest = value.lower()
    if len(digest) != 64 or not set(digest) <= _HEX:
        raise ValueError(_DIGEST)
    return digest


def _rule_default(value: str) -> str:
    if value not in ("allow_all", "deny_all"):
        raise ValueError(f'must be "allow_all" or "deny_all", not {value!r}')
    return value


def _role_names(value: object) -> object:
    if isinstance(value, list | tuple) and all(isinstance(v, str) and v for v in value):
        return value
    raise ValueError("must be a list of role names")


RoleNames = Annotated[tuple[str, ...], BeforeValidator(_role_names)]


class TokenRule(Model):
    """One HTTP bearer token: only its SHA-256 is stored; the caller it stands for and its roles."""

    sha256: Annotated[Text, AfterValidator(_digest), IfMissing(_DIGEST)]
    caller_id: Annotated[Text, IfMissing("missing: name the client this token is for")]
    roles: Names = ()


class HttpSettings(Model):
    bind: Annotated[Text, IfMissing("missing (HOST:PORT); leave out the [http] table to serve stdio")]
    """``HOST:PORT`` for streamable HTTP at ``/mcp`` (no ``[http]`` table: stdio)."""
    tls_cert: PathText | None = None
    tls_key: PathText | None = None
    tokens: tuple[TokenRule, ...] = ()
    trusted_proxies: Names = ()
    """Addresses of the proxies in front (nginx): the access log takes a request's client address from the
    ``X-Forwarded-For`` header they set (for the log only: nothing is allowed or refused by it)."""
    metrics: Flag = False
    """Answer ``GET /metrics`` (Prometheus text format, no note text; without a token, like ``/ready``)."""

    @model_validator(mode="after")
    def _pairs(self) -> HttpSettings:
        if len({t.sha256 for t in self.tokens}) != len(self.tokens):
            raise refuse("tokens", "the same token is listed twice")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise refuse("tls_key" if self.tls_cert is not None else "tls_cert", "give both tls_cert and tls_key")
        return self


class RoleFilter(Model):
    """Which caller may use which tool. Deny always wins; then an allow naming one of the caller's
    roles; otherwise ``default``."""

    caller_roles: Names = ()
    """The roles of the stdio caller (over HTTP each token carries its own)."""
    default: Annotated[Text, AfterValidator(_rule_default)] = "allow_all"
    """``allow_all`` or ``deny_all``: for a tool no rule decides."""
    allow: dict[str, RoleNames] = Field(default_factory=dict)
    deny: dict[str, RoleNames] = Field(default_factory=dict)

    def allows(self, tool: str, roles: tuple[str, ...] | frozenset[str]) -> bool:
        held = set(roles)
        if held & set(self.deny.get(tool, ())):
            return False
        if held & set(self.allow.get(tool, ())):
            return True
        return self.default == "allow_all"


def _this_file(value: object, info: ValidationInfo) -> object:
    """The manifest's own location comes from where it was read, never from a key of the file."""
    context = info.context or {}
    if "manifest" in context and value is not context["manifest"]:
        raise PydanticCustomError("extra_forbidden", "unknown key")
    return value


class Manifest(Model):
    path: Annotated[Path, BeforeValidator(_this_file)] = Field(exclude=True)
    """Where the manifest was read (not a key of it)."""
    db_path: Annotated[DbPath, IfMissing("missing: the hardened mode names its database (no default, no VAULTSYNC_DB)")]
    """The database (required: no default, no ``--db``, no ``VAULTSYNC_DB``): a file, relative to the manifest,
    or a ``postgresql://`` URI, kept as it is."""
    vault_name: Text | None = None
    """The vault's name in the database (default: the folder's name)."""
    keystore_path: PathText | None = None
    """Signing keys for audit HMACs and provenance receipts (mode 600)."""
    audit_log_path: PathText | None = None
    """Where the audit log (JSON lines, hash-chained) goes; none: nothing is audited."""
    audit_digest_key_path: PathText | None = None
    """The secret the audit log digests arguments with (default ``audit-digest.key`` beside the log; made when
    missing, mode 600): servers sharing one log name one key."""
    allowed_tools: Names | None = None
    """Only these tools exist (none: every tool the other settings enable)."""
    allowed_parents: Names = ()
    """Accepted values of ``VAULTSYNC_PARENT_BASENAME`` when stdin is not a terminal."""
    allow_writes: Flag = False
    watch: Flag = False
    reject_env: Names = ()
    """More environment variables that refuse a start, beside ``DEFAULT_SECRET_ENV``."""
    pass_env: Names = ()
    """Environment variables kept for the server and its children beside ``spawn.KEEP_ENV`` (every
    other one is removed after the checks; a name of ``secret_env`` never is kept)."""
    http: HttpSettings | None = None
    role_filter: RoleFilter | None = None
    oauth: OAuthSettings | None = None
    """The OAuth resource server (``access``): tokens of one issuer, for one vault or several."""

    @model_validator(mode="after")
    def _together(self) -> Manifest:
        if self.oauth is not None and self.http is None:
            raise refuse("oauth", "an OAuth resource server serves HTTP: add an [http] table with bind")
        if self.oauth is not None and self.oauth.vaults and self.vault_name is not None:
            raise refuse("vault_name", "a hosted server names its vaults in [[oauth.vaults]]")
        return self

    @property
    def secret_env(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*DEFAULT_SECRET_ENV, *self.reject_env)))


def _check_mode(path: Path, info: os.stat_result, what: str, mask: int) -> None:
    if info.st_mode & mask:
        who = "read or written" if mask & 0o044 else "written"
        raise ConfigError(
            f"the {what} {path} may be {who} by other users (mode {info.st_mode & 0o777:o}); "
            f"chmod {'600' if mask & 0o044 else 'go-w'} {path}"
        )
    if info.st_uid not in (0, os.getuid()):
        raise ConfigError(f"the {what} {path} belongs to another user (uid {info.st_uid}); it must be yours or root's")


def read_private(path: Path, what: str, *, readable: bool) -> str:
    """The text of ``path``, refused when group or others may write it (``readable``: or read it),
    when it belongs to another user than the caller or root, or when a folder on its way may be
    changed by others (writable by group or others without the sticky bit, or another user's): whoever
    can rename a folder on the way can swap the file. Checked on the file actually opened (fstat)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"the {what} {path} is not a regular file")
        if os.name == "posix":
            _check_mode(path, info, what, 0o077 if readable else 0o022)
            real = Path(os.path.realpath(path))
            for folder in real.parents:
                st = os.stat(folder)
                if (st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX) or st.st_uid not in (0, os.getuid()):
                    raise ConfigError(
                        f"the {what} {path} is in {folder}, which other users may change "
                        f"(mode {st.st_mode & 0o7777:o}, uid {st.st_uid}); keep it in a folder only "
                        "you (or root) can write"
                    )
        data = os.read(fd, 1 << 20)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"cannot read the {what} {path}: it is not UTF-8 text") from None


def load_manifest(path: Path) -> Manifest:
    """Read and check the manifest at ``path`` (ConfigError naming the key or the problem)."""
    path = Path(path).expanduser().absolute()
    text = read_private(path, "manifest", readable=False)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"manifest {path} is not valid TOML: {exc}") from None
    context = {"base": path.parent, "manifest": path}
    return validated(Manifest, {"path": path, **data}, source=f"manifest {path}", context=context)

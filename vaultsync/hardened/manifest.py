"""The operator's manifest for ``vaultsync serve VAULT --manifest PATH``: every privileged setting in
one TOML file the operator controls, checked strictly before anything else happens.

Refused, each with the key named: a key the schema does not know, a value of the wrong type, a
manifest writable by group or others (or owned by another user than the caller or root). Relative
paths in the manifest are relative to the manifest's folder. See ``examples/manifest.toml``.
"""

from __future__ import annotations

import os
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..dsn import is_dsn
from ..errors import ConfigError
from .access import OAuthSettings, read_oauth
from .checking import check_table as _check_table
from .checking import fail as _fail

DEFAULT_SECRET_ENV = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "HF_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
    "VAULTSYNC_SIGNING_KEY",
)
"""Environment variables whose presence refuses a hardened start (``reject_env`` adds more)."""


@dataclass(frozen=True)
class TokenRule:
    """One HTTP bearer token: only its SHA-256 is stored; the caller it stands for and its roles."""

    sha256: str
    caller_id: str
    roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class HttpSettings:
    bind: str
    """``HOST:PORT`` for streamable HTTP at ``/mcp`` (no ``[http]`` table: stdio)."""
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tokens: tuple[TokenRule, ...] = ()
    trusted_proxies: tuple[str, ...] = ()
    """Addresses of the proxies in front (nginx): the access log takes a request's client address from the
    ``X-Forwarded-For`` header they set (for the log only: nothing is allowed or refused by it)."""
    metrics: bool = False
    """Answer ``GET /metrics`` (Prometheus text format, no note text; without a token, like ``/ready``)."""


@dataclass(frozen=True)
class RoleFilter:
    """Which caller may use which tool. Deny always wins; then an allow naming one of the caller's
    roles; otherwise ``default``."""

    caller_roles: tuple[str, ...] = ()
    """The roles of the stdio caller (over HTTP each token carries its own)."""
    default: str = "allow_all"
    """``allow_all`` or ``deny_all``: for a tool no rule decides."""
    allow: dict[str, tuple[str, ...]] = field(default_factory=dict)
    deny: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def allows(self, tool: str, roles: tuple[str, ...] | frozenset[str]) -> bool:
        held = set(roles)
        if held & set(self.deny.get(tool, ())):
            return False
        if held & set(self.allow.get(tool, ())):
            return True
        return self.default == "allow_all"


@dataclass(frozen=True)
class Manifest:
    path: Path
    db_path: Path | str
    """The database (required: no default, no ``--db``, no ``VAULTSYNC_DB``): a file, relative to the manifest,
    or a ``postgresql://`` URI, kept as it is."""
    vault_name: str | None = None
    """The vault's name in the database (default: the folder's name)."""
    keystore_path: Path | None = None
    """Signing keys for audit HMACs and provenance receipts (mode 600)."""
    audit_log_path: Path | None = None
    """Where the audit log (JSON lines, hash-chained) goes; none: nothing is audited."""
    audit_digest_key_path: Path | None = None
    """The secret the audit log digests arguments with (default ``audit-digest.key`` beside the log; made when
    missing, mode 600): servers sharing one log name one key."""
    allowed_tools: tuple[str, ...] | None = None
    """Only these tools exist (none: every tool the other settings enable)."""
    allowed_parents: tuple[str, ...] = ()
    """Accepted values of ``VAULTSYNC_PARENT_BASENAME`` when stdin is not a terminal."""
    allow_writes: bool = False
    watch: bool = False
    reject_env: tuple[str, ...] = ()
    """More environment variables that refuse a start, beside ``DEFAULT_SECRET_ENV``."""
    pass_env: tuple[str, ...] = ()
    """Environment variables kept for the server and its children beside ``spawn.KEEP_ENV`` (every
    other one is removed after the checks; a name of ``secret_env`` never is kept)."""
    http: HttpSettings | None = None
    role_filter: RoleFilter | None = None
    oauth: OAuthSettings | None = None
    """The OAuth resource server (``access``): tokens of one issuer, for one vault or several."""

    @property
    def secret_env(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*DEFAULT_SECRET_ENV, *self.reject_env)))


# ------------------------------------------------------------------ reading and checking

_TOP = {
    "db_path": "path",
    "vault_name": "str",
    "keystore_path": "path",
    "audit_log_path": "path",
    "audit_digest_key_path": "path",
    "allowed_tools": "names",
    "allowed_parents": "names",
    "allow_writes": "bool",
    "watch": "bool",
    "reject_env": "names",
    "pass_env": "names",
    "http": "table",
    "role_filter": "table",
    "oauth": "table",
}
_HTTP = {
    "bind": "str",
    "tls_cert": "path",
    "tls_key": "path",
    "tokens": "tables",
    "trusted_proxies": "names",
    "metrics": "bool",
}
_TOKEN = {"sha256": "str", "caller_id": "str", "roles": "names"}
_ROLES = {"caller_roles": "names", "default": "str", "allow": "table", "deny": "table"}


_is_dsn = is_dsn


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
    _check_table(path, data, _TOP, "")
    if "db_path" not in data:
        raise _fail(path, "db_path", "missing: the hardened mode names its database (no default, no VAULTSYNC_DB)")
    base = path.parent

    def where(value: str | None) -> Path | None:
        return None if value is None else (base / Path(value).expanduser()).absolute()

    http = None
    if "http" in data:
        table = data["http"]
        _check_table(path, table, _HTTP, "http.")
        if "bind" not in table:
            raise _fail(path, "http.bind", "missing (HOST:PORT); leave out the [http] table to serve stdio")
        tokens = []
        for i, entry in enumerate(table.get("tokens", [])):
            _check_table(path, entry, _TOKEN, f"http.tokens[{i}].")
            digest = entry.get("sha256", "").lower()
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise _fail(
                    path,
                    f"http.tokens[{i}].sha256",
                    'must be the 64 hex digits of the token\'s SHA-256 (printf %s "$TOKEN" | sha256sum)',
                )
            if not entry.get("caller_id"):
                raise _fail(path, f"http.tokens[{i}].caller_id", "missing: name the client this token is for")
            tokens.append(TokenRule(digest, entry["caller_id"], tuple(entry.get("roles", ()))))
        if len({t.sha256 for t in tokens}) != len(tokens):
            raise _fail(path, "http.tokens", "the same token is listed twice")
        if ("tls_cert" in table) != ("tls_key" in table):
            raise _fail(
                path, "http.tls_key" if "tls_cert" in table else "http.tls_cert", "give both tls_cert and tls_key"
            )
        http = HttpSettings(
            table["bind"],
            where(table.get("tls_cert")),
            where(table.get("tls_key")),
            tuple(tokens),
            tuple(table.get("trusted_proxies", ())),
            bool(table.get("metrics", False)),
        )

    roles = None
    if "role_filter" in data:
        table = data["role_filter"]
        _check_table(path, table, _ROLES, "role_filter.")
        default = table.get("default", "allow_all")
        if default not in ("allow_all", "deny_all"):
            raise _fail(path, "role_filter.default", f'must be "allow_all" or "deny_all", not {default!r}')
        rules: dict[str, dict[str, tuple[str, ...]]] = {}
        for kind in ("allow", "deny"):
            rules[kind] = {}
            for tool, names in table.get(kind, {}).items():
                if not (isinstance(names, list) and all(isinstance(v, str) and v for v in names)):
                    raise _fail(path, f"role_filter.{kind}.{tool}", "must be a list of role names")
                rules[kind][tool] = tuple(names)
        roles = RoleFilter(tuple(table.get("caller_roles", ())), default, rules["allow"], rules["deny"])

    oauth = None
    if "oauth" in data:
        if http is None:
            raise _fail(path, "oauth", "an OAuth resource server serves HTTP: add an [http] table with bind")
        oauth = read_oauth(path, data["oauth"], lambda value: where(value) or base)
        if oauth.vaults and "vault_name" in data:
            raise _fail(path, "vault_name", "a hosted server names its vaults in [[oauth.vaults]]")

    return Manifest(
        path=path,
        db_path=data["db_path"] if _is_dsn(data["db_path"]) else where(data["db_path"]),  # type: ignore[arg-type]  # where() of a str is never None
        vault_name=data.get("vault_name"),
        keystore_path=where(data.get("keystore_path")),
        audit_log_path=where(data.get("audit_log_path")),
        audit_digest_key_path=where(data.get("audit_digest_key_path")),
        allowed_tools=tuple(data["allowed_tools"]) if "allowed_tools" in data else None,
        allowed_parents=tuple(data.get("allowed_parents", ())),
        allow_writes=data.get("allow_writes", False),
        watch=data.get("watch", False),
        reject_env=tuple(data.get("reject_env", ())),
        pass_env=tuple(data.get("pass_env", ())),
        http=http,
        role_filter=roles,
        oauth=oauth,
    )

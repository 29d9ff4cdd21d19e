"""Who may reach which vault over OAuth: the resource server's settings (``--oauth-issuer``/``--public-url``, or a
manifest's ``[oauth]`` table, whose keys and checks the models here state) and the scopes, which are roles.

Scopes form one ladder: ``vault:read`` < ``vault:write`` < ``vault:admin``; each implies those below it. A token's
effective scopes on a vault are the ladder up to the lower of the token's highest scope and the subject's grant
on that vault (``Grant``). A grant lists subjects (the token's ``sub``, exactly), groups (``group:NAME``, from
the token's groups claim) or ``*`` (any subject the issuer vouches for). Subjects and groups are two namespaces:
``group:staff`` matches a member of the group ``staff`` and never a subject whose ``sub`` is ``group:staff``.

Pure: no network, no server. The server side (``vaultsync.server.oauth``) verifies tokens against these settings.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, ModelWrapValidatorHandler, model_validator

from ..errors import ConfigError
from .schema import IfMissing, Model, Names, Number, PathText, Text, refuse

READ, WRITE, ADMIN = "vault:read", "vault:write", "vault:admin"
SCOPES = (READ, WRITE, ADMIN)
"""The ladder, lowest first."""

ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""The signature algorithms an access token may use: public-key ones only (never ``none``, never HS*)."""

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
GROUP = "group:"
"""How a grant names a group (``group:staff``); every other entry names a subject."""


def level_of(scopes: Iterable[str]) -> int:
    """The highest rung of the ladder ``scopes`` name (0: none)."""
    return max((SCOPES.index(s) + 1 for s in scopes if s in SCOPES), default=0)


def ladder(level: int) -> tuple[str, ...]:
    """The scopes up to ``level`` (1: read; 2: read, write; 3: all)."""
    return SCOPES[: max(0, min(level, len(SCOPES)))]


class Grant(Model):
    """Who may read, write or administer one vault. ``open``: no list given, any subject with a valid token."""

    read: Names = ()
    write: Names = ()
    admin: Names = ()

    @property
    def open(self) -> bool:
        return not (self.read or self.write or self.admin)

    @property
    def grant(self) -> Grant:
        """Just the grant (of a vault or of the settings' one vault)."""
        return Grant(read=self.read, write=self.write, admin=self.admin)

    def level(self, subject: str | None, groups: Iterable[str]) -> int:
        """The highest rung granted to ``subject`` (a member of ``groups``): 0 when none."""
        if self.open:
            return len(SCOPES)
        held = set(groups)
        for level, listed in ((3, self.admin), (2, self.write), (1, self.read)):
            if any(_names(entry, subject, held) for entry in listed):
                return level
        return 0


def _names(entry: str, subject: str | None, groups: set[str]) -> bool:
    """Whether a grant's ``entry`` names this subject or one of its groups: ``group:NAME`` only ever a group,
    anything else (but ``*``) only ever a subject, so a subject called ``group:staff`` is not the group."""
    if entry == "*":
        return True
    if entry.startswith(GROUP):
        return entry[len(GROUP) :] in groups
    return subject is not None and entry == subject


_NAME = "missing or not usable in a URL path (no / ? # % \\ space)"
_ISSUER_AND_URL = "missing: an OAuth resource server names its issuer and public URL"


def _url_name(name: str) -> str:
    if any(c in name for c in '/?#%\\ "') or name in (".", ".."):
        raise ValueError(_NAME)
    return name


def _public_key_only(algorithms: tuple[str, ...]) -> tuple[str, ...]:
    if not algorithms or any(a not in ASYMMETRIC for a in algorithms):
        raise ValueError(f"only public-key algorithms: some of {', '.join(ASYMMETRIC)}")
    return algorithms


def _seconds(top: int) -> AfterValidator:
    def within(value: float) -> float:
        if not 0 <= value <= top:
            raise ValueError(f"must be between 0 and {top} seconds")
        return value

    return AfterValidator(within)


class HostedVault(Grant):
    """One vault of a hosted server (an ``[[oauth.vaults]]`` entry): served at ``/vaults/<name>/mcp``, its own
    audience; ``read``, ``write`` and ``admin`` grant it (at least one)."""

    name: Annotated[Text, AfterValidator(_url_name), IfMissing(_NAME)]
    """The vault's name in the database."""
    folder: PathText | None = None
    """The vault folder, where writes (and a watcher) need it."""

    @model_validator(mode="after")
    def _granted(self) -> HostedVault:
        if self.open:
            raise refuse("", f"vault {self.name!r} grants nobody: list read, write or admin")
        return self


class OAuthSettings(Grant):
    """The resource server (a manifest's ``[oauth]`` table): which issuer's tokens, for which public URL, and who
    may use which vault (``read``, ``write``, ``admin``: the one vault, served at ``/mcp``, when ``vaults`` is
    empty)."""

    issuer: Annotated[Text, IfMissing(_ISSUER_AND_URL)]
    """The authorization server's issuer identifier, exactly as its metadata states it."""
    public_url: Annotated[Text, IfMissing(_ISSUER_AND_URL)]
    """The base URL clients reach this server at (no trailing slash): the MCP endpoint is ``{public_url}/mcp``."""
    algorithms: Annotated[Names, AfterValidator(_public_key_only)] = ASYMMETRIC
    leeway_s: Annotated[Number, _seconds(300)] = 30.0
    """Clock skew allowed on ``exp``, ``nbf`` and ``iat``."""
    jwks_refresh_s: Annotated[Number, _seconds(3600)] = 5.0
    """Least time between two fetches of the issuer's keys for a token signed with a key id not known yet."""
    groups_claim: Text = "groups"
    subject_claim: Text = "sub"
    """The claim naming the person in grants, the audit log and ``changes --caller`` (e.g. ``preferred_username``
    where ``sub`` is an opaque id); a token without it is refused."""
    introspection_file: PathText | None = None
    """A TOML file (mode 600) with ``client_id`` and ``client_secret`` for RFC 7662 introspection of opaque tokens."""
    resource_name: Text | None = None
    vaults: tuple[HostedVault, ...] = ()
    """Several vaults, each at ``/vaults/<name>/mcp``."""

    @model_validator(mode="wrap")
    @classmethod
    def _urls(cls, data: Any, handler: ModelWrapValidatorHandler[OAuthSettings]) -> OAuthSettings:
        settings = handler(data)
        try:
            issuer = check_url(settings.issuer, "issuer", keep_slash=True)
            public_url = _base(settings.public_url, "public_url")
        except ConfigError as exc:
            raise refuse("", str(exc)) from None
        names = [v.name for v in settings.vaults]
        if len(set(names)) != len(names):
            raise refuse("vaults", "a vault is listed twice")
        if settings.vaults and not settings.open:
            raise refuse("read", "with [[oauth.vaults]] each vault lists its own read/write/admin")
        if (issuer, public_url) == (settings.issuer, settings.public_url):
            return settings
        return settings.model_copy(update={"issuer": issuer, "public_url": public_url})

    def resource(self, vault: str | None = None) -> str:
        """The canonical URL (and token audience) of the one vault, or of ``vault`` on a hosted server."""
        return f"{self.public_url}/mcp" if vault is None else f"{self.public_url}/vaults/{vault}/mcp"


def check_url(value: str, what: str, *, keep_slash: bool = False) -> str:
    """``value`` as an absolute https URL (http only on loopback) without query or fragment; without a trailing
    slash unless ``keep_slash`` (an issuer is compared exactly as its metadata states it, slash and all)."""
    parts = urlsplit(value.strip())
    host = parts.hostname or ""
    if parts.scheme not in ("https", "http") or not host:
        raise ConfigError(f"{what} {value!r}: give an absolute URL, e.g. https://vault.example.com")
    if parts.scheme == "http" and not _loopback(host):
        raise ConfigError(f"{what} {value!r}: must be https (plain http is accepted on loopback only)")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError(f"{what} {value!r}: no query, fragment or user name in it")
    return value.strip() if keep_slash else value.strip().rstrip("/")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def from_flags(
    issuer: str | None, public_url: str | None, introspection: Path | None, allow: Iterable[str] = ()
) -> OAuthSettings | None:
    """``--oauth-issuer``, ``--public-url``, ``--oauth-introspection`` and ``--oauth-allow`` as settings (None: no
    OAuth). Those ``allow`` names may do what their tokens' scopes say; nobody else may use the vault."""
    allow = tuple(allow)
    if issuer is None and public_url is None:
        if introspection is not None or allow:
            option = "--oauth-introspection" if introspection is not None else "--oauth-allow"
            raise ConfigError(f"{option} needs --oauth-issuer and --public-url")
        return None
    if issuer is None or public_url is None:
        raise ConfigError("an OAuth resource server needs both --oauth-issuer and --public-url")
    if "" in allow:
        raise ConfigError("--oauth-allow: give a subject, group:NAME or *, not an empty name")
    return OAuthSettings(
        issuer=check_url(issuer, "--oauth-issuer", keep_slash=True),
        public_url=_base(public_url, "--public-url"),
        introspection_file=introspection,
        admin=allow,
    )


def _base(value: str, what: str) -> str:
    url = check_url(value, what)
    if url.endswith("/mcp"):
        raise ConfigError(f"{what} {value!r}: give the base URL, without /mcp (the endpoint is BASE/mcp)")
    return url

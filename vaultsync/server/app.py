"""``build_server``: the one entry point that turns a vault into an MCP server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server import CacheHint, MCPServer
from mcp.server.mcpserver.tools import Tool

from ..dist import installed_version
from ..hardened.keystore import Keystore, load_keystore
from ..hardened.manifest import Manifest
from ..hardened.roles import guard, refusal, restrict
from .apps import attach_history_app
from .apps.history import APP_TOOLS, SHOWN_ON, AppsForAppClients
from .registry import in_order, names
from .resources import register_resources
from .served import ServeConfig, ServedVault
from .toolkit import ToolSet
from .tools import add_read_tools
from .writes import add_write_tools

INSTRUCTIONS = """\
vaultsync serves a Markdown vault (Obsidian-style notes) and its full history. Every tool that reads
takes an optional as_of time (YYYY-MM-DD or ISO 8601 with an offset) to see the vault exactly as it
was known then. Start with search_notes, then read_note the paths it finds; note_history, diff_note
and list_changes show what changed and when; get_links shows links and backlinks."""


def build_server(config: ServeConfig) -> MCPServer:
    """An MCP server over one vault: read-only time-travel tools, ``note://`` resources, opt-in writes.

    Nothing is opened here: the vault is opened in the server's lifespan (so bad options fail before
    the first request is answered) and closed when it stops. See ``ServeConfig`` for the options
    (``ServeConfig.of(vault)`` serves a vault already open).

    Example:
        >>> from mcp import Client
        >>> config = ServeConfig.of(Vault.open(db, name="notes"))
        >>> async with Client(build_server(config)) as client:  # doctest: +SKIP
        ...     await client.call_tool("search_notes", {"query": "kickoff", "as_of": "2025-03-01"})
    """
    return server_for(ServedVault(config))


def server_for(served: ServedVault, *, app: bool = True, audit: Any = None, vault: str | None = None) -> MCPServer:
    """The MCP server over ``served`` (whose ``running()`` is the server's lifespan): for callers that
    keep the served vault, such as tests looking at its reader and writer. ``app=False``: without the
    note-history MCP App (the server a client without apps support sees). ``audit``, ``vault``: one vault of
    a hosted server, whose vaults share the audit log (``AuditLog``) and are named in it."""
    config = served.config
    manifest = config.manifest
    keystore = load_keystore(manifest.keystore_path) if manifest is not None and manifest.keystore_path else None
    tools, writes = _tools(served, manifest, keystore)
    # role filter and audit log (none without a manifest asking for them); the view's tools go with note_history
    guards = guard(
        manifest, keystore, sequential=writes, same_as=dict.fromkeys(APP_TOOLS, SHOWN_ON), audit=audit, vault=vault
    )
    served.audit = guards[0].audit if guards else None  # /ready asks it whether a call can be recorded
    apps = None
    if app and (manifest is None or manifest.allowed_tools is None):  # a manifest's tool list is exact: no view
        tools, apps = attach_history_app(tools, served, _may_restore(tools, guards, config.oauth))
    mcp = MCPServer(
        config.name,
        title="vaultsync",
        version=_version(),
        instructions=INSTRUCTIONS,
        lifespan=lambda _: served.running(),
        tools=tools,
        subscriptions=served.feed.bus,
        cache_hints={"tools/list": CacheHint(ttl_ms=60_000, scope="private")},
        middleware=[AppsForAppClients(), *_scope_gate(config.oauth), *guards],
        extensions=[apps] if apps is not None else None,
    )
    register_resources(mcp, served, page_size=config.page_size)
    return mcp


def _tools(served: ServedVault, manifest: Manifest | None, keystore: Keystore | None) -> tuple[list[Tool], list[str]]:
    """The tools to publish, in the registry's order, and the names of the write tools (a hardened server runs them
    one at a time)."""
    tools = ToolSet()
    add_read_tools(tools, served)
    if keystore is not None:  # hardened mode with keys: answers carry provenance receipts
        from .receipts import add_receipts

        add_receipts(tools, served, keystore)
    if served.allow_writes:
        add_write_tools(tools, served)
    published = in_order(tools.tools)
    if manifest is None:
        return published, []
    # hardened: only the allowed_tools, every tool name the manifest gives checked against every tool a server
    # may offer (the write tools though writes are off, verify_receipt without a keystore); not the view's own
    nameable = [*names(), *names(needs="keystore")]
    return restrict(published, manifest, nameable), list(names(writes=True))


def _scope_gate(oauth: bool) -> list[Any]:
    if not oauth:
        return []
    from .oauth.scopes import ScopeGate

    return [ScopeGate()]


def _may_restore(tools: list[Tool], guards: list[Any], oauth: bool = False) -> Callable[[], bool]:
    """Whether the current caller may call restore_note: the server publishes it and the caller's roles (behind
    OAuth: and the token's scopes) allow it."""
    published = any(t.name == "restore_note" for t in tools)

    def may() -> bool:
        if not published:
            return False
        if oauth:
            from mcp.server.auth.middleware.auth_context import get_access_token

            from .oauth.scopes import allowed

            token = get_access_token()
            if token is not None and not allowed("restore_note", token.scopes):
                return False
        return all(g.rules is None or refusal(g.rules, "restore_note", g.caller().roles) is None for g in guards)

    return may


def _version() -> str:
    return installed_version()

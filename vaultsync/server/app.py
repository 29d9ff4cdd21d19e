"""``build_server``: the one entry point that turns a vault into an MCP server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from mcp.server import CacheHint, MCPServer

from ..hardened.keystore import load_keystore
from ..hardened.manifest import Manifest
from ..hardened.roles import guard, restrict
from ..vault import Vault
from .resources import register_resources
from .runtime import Runtime
from .toolkit import ToolSet
from .tools import add_read_tools
from .vaults import ServeConfig
from .writes import add_write_tools

INSTRUCTIONS = """\
vaultsync serves a Markdown vault (Obsidian-style notes) and its full history. Every tool that reads
takes an optional as_of time (YYYY-MM-DD or ISO 8601 with an offset) to see the vault exactly as it
was known then. Start with search_notes, then read_note the paths it finds; note_history, diff_note
and list_changes show what changed and when; get_links shows links and backlinks."""


def build_server(
    vault_or_config: Vault | ServeConfig,
    *,
    allow_writes: bool = False,
    watch: bool = False,
    page_size: int = 100,
    watcher_options: dict[str, Any] | None = None,
    name: str = "vaultsync",
    manifest: Manifest | None = None,
) -> MCPServer:
    """An MCP server over one vault: read-only time-travel tools, ``note://`` resources, opt-in writes.

    Args:
        vault_or_config: an open ``Vault`` (kept open; handy in tests) or a ``ServeConfig`` (vaults
            opened at once, so bad options fail before serving, and closed when the server stops).
        allow_writes: register ``create_note`` and ``append_to_note`` (also ``ServeConfig.allow_writes``).
        watch: run the watcher inside the server process (also ``ServeConfig.watch``).
        page_size: notes per ``resources/list`` page.
        manifest: the hardened mode's operator manifest (``vaultsync.hardened.manifest``); None: the
            plain server, unchanged.

    Example:
        >>> from mcp import Client
        >>> async with Client(build_server(Vault.open(db, name="notes"))) as client:  # doctest: +SKIP
        ...     await client.call_tool("search_notes", {"query": "kickoff", "as_of": "2025-03-01"})
    """
    keystore = load_keystore(manifest.keystore_path) if manifest is not None and manifest.keystore_path else None
    rt = Runtime(vault_or_config, allow_writes=allow_writes, watch=watch, watcher_options=watcher_options)
    if isinstance(vault_or_config, ServeConfig):
        rt.open()

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[Runtime]:
        async with rt.running():
            yield rt

    tools = ToolSet()
    add_read_tools(tools, rt)
    if keystore is not None:  # hardened mode with keys: answers carry provenance receipts
        from .receipts import add_receipts

        add_receipts(tools, rt, keystore)
    if rt.allow_writes:
        add_write_tools(tools, rt)
    writes: list[str] = []
    if manifest is not None:  # hardened: only the allowed_tools, every tool name the manifest gives checked
        scratch = ToolSet()
        add_write_tools(scratch, rt)  # names a manifest may give though writes are off
        writes = [t.name for t in scratch.tools]
        tools.tools = restrict(tools.tools, manifest, writes)
    try:
        pkg_version = version("vaultsync")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        pkg_version = "0"
    mcp = MCPServer(
        name,
        title="vaultsync",
        version=pkg_version,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        tools=tools.tools,
        subscriptions=rt.notifier.bus,
        cache_hints={"tools/list": CacheHint(ttl_ms=60_000, scope="private")},
        middleware=guard(manifest, keystore, sequential=writes),  # role filter and audit log: none without a manifest asking for them
    )
    register_resources(mcp, rt, page_size=page_size)
    mcp.runtime = rt  # type: ignore[attr-defined]  # for transports and tests
    mcp.manifest = manifest  # type: ignore[attr-defined]
    mcp.keystore = keystore  # type: ignore[attr-defined]  # loaded once, before the vaults were opened
    return mcp

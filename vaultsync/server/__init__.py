"""The MCP server: vaultsync's time-travel tools and note resources over stdio or streamable HTTP."""

from __future__ import annotations

from .app import build_server, server_for
from .feed import note_uri
from .served import ServeConfig, ServedVault

__all__ = ["ServeConfig", "ServedVault", "build_server", "note_uri", "server_for"]

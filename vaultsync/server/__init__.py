"""The MCP server: vaultsync's time-travel tools and note resources over stdio or streamable HTTP."""

from __future__ import annotations

from .app import build_server
from .notifications import note_uri
from .vaults import ServeConfig

__all__ = ["ServeConfig", "build_server", "note_uri"]

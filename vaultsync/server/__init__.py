"""The MCP server: vaultsync's time-travel tools and note resources over stdio or streamable HTTP."""

from __future__ import annotations

from .app import build_server
from .runtime import ServeConfig, note_uri

__all__ = ["ServeConfig", "build_server", "note_uri"]

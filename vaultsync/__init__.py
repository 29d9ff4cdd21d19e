"""vaultsync: a time machine for a Markdown vault, served to AI assistants over MCP."""

from __future__ import annotations

from .errors import ConfigError, LockedError, NoteNotFound, ParseError, PathError, StoreError, VaultsyncError
from .vault import Note, Vault

__all__ = [
    "ConfigError", "LockedError", "Note", "NoteNotFound", "ParseError", "PathError", "StoreError",
    "Vault", "VaultsyncError",
]

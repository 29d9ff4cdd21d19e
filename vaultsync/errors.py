"""Exceptions vaultsync raises on purpose; each docstring doubles as the user message.

    VaultsyncError
     ├── ConfigError        bad option, bad time, unknown vault, database missing
     ├── NoteNotFound       the note did not exist at that time
     ├── PathError          a path outside the vault or not a Markdown note
     ├── ParseError         a file that cannot be read as a note
     ├── StoreError         the database refused or is damaged
     │    └── LockedError   another writer holds the vault
     └── ProviderError      an embedder failed or does not match the store
"""

from __future__ import annotations


class VaultsyncError(Exception):
    """vaultsync failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "vaultsync failed.").strip())


class ConfigError(VaultsyncError):
    """Invalid configuration or argument."""


class NoteNotFound(VaultsyncError):
    """No such note at that time."""


class PathError(VaultsyncError):
    """That path is not a note inside the vault."""


class ParseError(VaultsyncError):
    """The file cannot be read as a note."""


class StoreError(VaultsyncError):
    """The store refused the operation."""


class LockedError(StoreError):
    """Another process is writing to this vault."""


class ProviderError(VaultsyncError):
    """The embedding provider failed."""

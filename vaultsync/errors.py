"""Exceptions vaultsync raises on purpose; each docstring doubles as the user message.

    VaultsyncError
     ├── ConfigError        bad option, bad time, database missing
     │    └── VaultNotFound the database does not hold that vault
     ├── NoteNotFound       the note did not exist at that time
     ├── PathError          a path outside the vault or not a Markdown note
     ├── ParseError         a file that cannot be read as a note
     ├── StoreError         the database refused the operation
     │    ├── LockedError   another writer holds the vault
     │    ├── BusyError     another connection holds SQLite's write lock
     │    ├── CorruptError  the file is damaged or not a database
     │    ├── ReadOnlyError the database cannot be written (opened read-only, or file permissions)
     │    └── SchemaError   written by a newer vaultsync, or another program's file
     ├── VaultUnavailable   the vault folder is missing, unreadable or unmounted: nothing recorded
     ├── MassDeletion       a batch would delete most live notes at once: nothing recorded
     ├── RevisionMismatch   a write expected another revision of the note than the current one
     └── ProviderError      an embedder failed or does not match the store
"""

from __future__ import annotations


class VaultsyncError(Exception):
    """vaultsync failed."""

    def __init__(self, message: str | None = None, *, argument: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "vaultsync failed.").strip())
        self.argument = argument
        """The library argument the error is about, if one is (a door may name its own option for it)."""


class ConfigError(VaultsyncError):
    """Invalid configuration or argument."""


class VaultNotFound(ConfigError):
    """The database does not hold that vault."""


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


class BusyError(StoreError):
    """The database is busy: another connection is writing; try again."""


class CorruptError(StoreError):
    """The database file is damaged or is not a database."""


class ReadOnlyError(StoreError):
    """The database cannot be written."""


class SchemaError(StoreError, ConfigError):
    """The database was written by another program or a newer vaultsync."""


class ProviderError(VaultsyncError):
    """The embedding provider failed."""


class VaultUnavailable(VaultsyncError):
    """The vault folder is missing, unreadable or not the one registered; nothing was recorded."""


class MassDeletion(VaultsyncError):
    """The batch would delete most of the vault's notes at once; nothing was recorded."""


class RevisionMismatch(VaultsyncError):
    """The note is not at the revision the write expected; nothing was written."""

"""Exceptions vaultsync raises on purpose; each docstring doubles as the user message.

    VaultsyncError
     ├── ConfigError          bad option, bad time, database missing
     │    ├── VaultNotFound   the database does not hold that vault
     │    └── ReceiptError    not a vaultsync receipt (hardened mode)
     ├── NoteNotFound         the note did not exist at that time
     │    ├── NoteDeleted     it had been deleted by then (the message says when, and how to read it before)
     │    └── UnknownRevision the note (its path is right) has no such revision: its history lists them
     ├── PathError            a path outside the vault or not a Markdown note
     │    ├── NotANote        the path leads through a symlink or to something not a regular file
     │    └── NoteChanged     the note changed on disk between reading and replacing it (a write retries)
     ├── ParseError           a file that cannot be read as a note
     │    └── FrontmatterRefused  YAML that parsed but is no JSON-compatible data (the parser says why)
     ├── StoreError           the database refused the operation
     │    ├── LockedError     another writer holds the vault
     │    │    └── LockLost   this process's writer lock went with its database session
     │    ├── BusyError       another connection holds SQLite's write lock
     │    ├── CorruptError    the file is damaged or not a database
     │    ├── ReadOnlyError   the database cannot be written (opened read-only, or file permissions)
     │    ├── Unreachable     no database server answered (down, restarting, the network away)
     │    └── SchemaError     written by a newer vaultsync, or another program's file
     ├── VaultUnavailable     the vault folder is missing, unreadable or unmounted: nothing recorded
     ├── MassDeletion         a batch would delete most live notes at once: nothing recorded
     ├── RevisionMismatch     a write expected another revision of the note than the current one
     └── ProviderError        an embedder failed or does not match the store

    SDKChanged (a RuntimeError, not a VaultsyncError: a bug to fix in vaultsync, never a user's mistake)

Library messages never name a door's own words (a CLI flag, a command): an error names the library
``argument`` it is about and the library ``remedy`` that fixes it, and each door shows its own option
and command for them (the CLI: ``cli.base.message``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class VaultsyncError(Exception):
    """vaultsync failed."""

    def __init__(
        self,
        message: str | None = None,
        *,
        argument: str | None = None,
        remedy: str | None = None,
        remedy_args: Mapping[str, Any] | None = None,
        public: str | None = None,
    ) -> None:
        super().__init__(message or (self.__doc__ or "vaultsync failed.").strip())
        self.public = public
        """What a client beyond this machine is told instead, when the message names the database's connection
        (its host, user or socket): see ``for_clients``."""
        self.argument = argument
        """The library argument the error is about, if one is (a door may name its own option for it)."""
        self.remedy = remedy
        """The library operation that fixes it, if one does (``sync``, ``reindex``, ``reembed``: a door
        may name its own command for it), called with ``remedy_args``."""
        self.remedy_args: dict[str, Any] = dict(remedy_args or {})
        """The arguments of ``remedy`` by library name (a door names its own options for them)."""

    def for_clients(self) -> str:
        """The message for an MCP client: ``public``, else the message with every connection URI taken out."""
        from .dsn import scrub

        return self.public or scrub(str(self))


class ConfigError(VaultsyncError):
    """Invalid configuration or argument."""


class VaultNotFound(ConfigError):
    """The database does not hold that vault."""


class ReceiptError(ConfigError):
    """Not a vaultsync receipt."""


class NoteNotFound(VaultsyncError):
    """No such note at that time."""


class NoteDeleted(NoteNotFound):
    """The note had been deleted by then."""


class UnknownRevision(NoteNotFound):
    """The note has no such revision; its history lists the revisions it has."""


class PathError(VaultsyncError):
    """That path is not a note inside the vault."""


class NotANote(PathError):
    """The path leads through a symlink, or to something other than a regular file, in the vault."""


class NoteChanged(PathError):
    """The note changed on disk between reading it and replacing it."""


class ParseError(VaultsyncError):
    """The file cannot be read as a note."""


class FrontmatterRefused(ParseError):
    """The YAML parsed but cannot be turned into JSON-compatible data."""


class StoreError(VaultsyncError):
    """The store refused the operation."""


class LockedError(StoreError):
    """Another process is writing to this vault."""


class LockLost(LockedError):
    """This process lost the vault's writer lock (its database session ended); nothing was written."""


class Unreachable(StoreError):
    """No database server answered (it is down, restarting, or the network is away)."""


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


class SDKChanged(RuntimeError):
    """The installed MCP SDK no longer has an attribute vaultsync relies on."""

"""vaultsync: a time machine for a Markdown vault, served to AI assistants over MCP."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    BusyError,
    ConfigError,
    CorruptError,
    FrontmatterRefused,
    LockedError,
    LockLost,
    MassDeletion,
    NotANote,
    NoteChanged,
    NoteDeleted,
    NoteNotFound,
    ParseError,
    PathError,
    ProviderError,
    ReadOnlyError,
    ReceiptError,
    RevisionMismatch,
    SchemaError,
    SDKChanged,
    StoreError,
    UnknownRevision,
    Unreachable,
    VaultNotFound,
    VaultsyncError,
    VaultUnavailable,
)

if TYPE_CHECKING:
    from .vault.api import Note, Vault

__all__ = [
    "BusyError",
    "ConfigError",
    "CorruptError",
    "FrontmatterRefused",
    "LockedError",
    "LockLost",
    "MassDeletion",
    "NotANote",
    "Note",
    "NoteChanged",
    "NoteDeleted",
    "NoteNotFound",
    "ParseError",
    "PathError",
    "ProviderError",
    "ReadOnlyError",
    "ReceiptError",
    "RevisionMismatch",
    "SchemaError",
    "SDKChanged",
    "StoreError",
    "UnknownRevision",
    "Unreachable",
    "Vault",
    "VaultNotFound",
    "VaultsyncError",
    "VaultUnavailable",
]


def __getattr__(name: str) -> Any:
    # Vault and Note load the store and the parsers: import them on first use, so that
    # ``python -m vaultsync --help`` (which imports this package first) stays fast.
    if name in ("Note", "Vault"):
        from .vault import api as vault

        return getattr(vault, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

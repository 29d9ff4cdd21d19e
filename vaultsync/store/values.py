"""The plain values the store hands out besides revisions (``read``): purge records and results, audit heads.

A leaf module (it imports nothing of the store), so the contract (``contract``) can name them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class PurgeRecord:
    """One row of ``purges``: when, which kind, how much (never a path, a text or a hash: by design)."""

    id: int
    at: int
    """Wall clock when the purge committed (UTC micros)."""
    command: str
    """``text``, ``note`` or ``before``."""
    horizon: int | None
    """``before``: history no longer visible at this time was dropped."""
    revisions_changed: int
    revisions_removed: int


@dataclass(slots=True)
class PurgeResult:
    """What a purge did (the same counts the ``purges`` record keeps)."""

    command: str
    revisions_changed: int = 0
    revisions_removed: int = 0
    notes: int = 0
    batches_removed: int = 0
    dictionary_retrained: bool = False
    scrubbed: bool = False
    database_bytes_before: int = 0
    database_bytes_after: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(slots=True)
class RetentionPreview:
    """What thinning by a retention policy would remove now (a dry run: nothing is changed)."""

    batches: int
    """Batches the vault has."""
    batches_removed: int
    """Batches that would go (merged into the next kept one)."""
    revisions: int
    """Note revisions (and deletions) the vault has."""
    revisions_removed: int
    """Revisions no kept moment shows, which would go with their text."""
    notes: int
    """Distinct notes (paths) whose history would change."""
    texts_freed: int
    """Stored texts only those revisions use."""
    bytes_freed: int
    """About how many bytes the database shrinks by (every table and index the removal shrinks; within
    ``store.freed.BOUND`` of the real figure where measured): after the purge's VACUUM on SQLite, after VACUUM
    FULL on PostgreSQL (where plain VACUUM makes the space reusable)."""
    database_bytes: int
    """The database's size now (SQLite: file and WAL; PostgreSQL: the schema's tables with indexes and TOAST)."""
    horizon: int | None
    """History before this time would be forgotten (None: none is)."""

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class AuditHead:
    """Where one audit log's chain ends, as the store knows it."""

    log_id: str
    path: str
    """The log's absolute path at its last append."""
    records: int
    head: str
    """SHA-256 hex of the last record's canonical JSON ('' before the first record)."""
    updated_at: int

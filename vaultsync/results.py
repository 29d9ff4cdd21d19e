"""Typed answers of ``Vault.read`` (``Note``), ``search``, ``stats``, ``reindex``, ``reembed``, ``purge`` and
``revision_facts``.

The answers are the schema: each is a frozen pydantic model whose fields, in order, are what the command's
``--json`` prints (``to_json``), and the MCP tools' answers take their fields from them
(``vaultsync.server.models.Derived``): a fact is declared once, here, with its type, default and description.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, InstanceOf, SkipValidation

from .revisions import revision_id
from .store import PurgeRecord, PurgeResult, Revision
from .times import format_time

SIMILAR_ONLY = (
    "True: similar, no word matches. No section holds the query's words; these hits are only close in meaning"
)


class Result(BaseModel):
    """A library answer: its fields are its JSON, in order (``to_json``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        """Exactly what the command's ``--json`` prints: every field (but those marked ``exclude``), in order
        (the values themselves, as validated: plain JSON values, no copy)."""
        return {name: getattr(self, name) for name, info in type(self).model_fields.items() if not info.exclude}


class DeletedNote(Result):
    """A note deleted in a window and still absent at its end, as ``vaultsync deleted --json`` prints it
    (``vault.lookback.Deleted.to_json``)."""

    path: str
    deleted_at: str = Field(description="When vaultsync learned of the deletion (UTC)")
    batch: int = Field(description="The batch that recorded it")
    size: int | None = Field(default=None, description="Bytes of its last text")
    last_revision: str | None = Field(
        default=None, description="Its last revision (r12); read_note as_of and restore_note revision take it"
    )
    last_known_at: str | None = Field(default=None, description="When that revision was learned (UTC)")
    content_hash: str | None = Field(default=None, description="SHA-256 of its last text")
    restore: str = Field(description="The command line that writes it back as it was just before its deletion")


class Links(Result):
    """A note's outgoing links and backlinks as of one time, as ``vaultsync links --json`` prints them
    (``links.LinkReport.to_json``)."""

    path: str
    as_of: str | None
    outgoing: list[dict[str, Any]] = Field(
        description="Links in the note; resolved = the path it points to (null: nothing by that name then); "
        "a link to an attachment also gives its mime_type and revision (its id then, for read_attachment as_of)"
    )
    backlinks: list[dict[str, Any]] = Field(description="Links in other notes that point to this note (source = from)")


class Note(Result):
    """A note's exact content at some time, with its revision's facts (``Note.of``: named as the revision
    names them, the time formatted and the revision's id added)."""

    path: str
    content: str
    known_at: str | None = Field(description="When vaultsync learned this revision (UTC)")
    content_hash: str | None = Field(description="SHA-256 of the whole revision's UTF-8 bytes")
    size: int | None = Field(description="Size of the whole note in bytes")
    title: str | None = None
    frontmatter: dict[str, Any] | None = None
    tags: list[str] = Field(default_factory=list)
    aliases: list[str] = Field(default_factory=list)
    links: list[dict[str, Any]] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    kind: str
    renamed_from: str | None = None
    id: str | None = Field(
        default=None, description="This revision's id in note_history (r12); read_note and diff_note take it back"
    )
    revision: InstanceOf[Revision] = Field(exclude=True, repr=False)
    """The stored revision these facts are of (not part of the JSON)."""

    @classmethod
    def of(cls, revision: Revision, content: str) -> Note:
        facts = {name: getattr(revision, name) for name in cls.model_fields if hasattr(revision, name)}
        facts.update(
            content=content, known_at=format_time(revision.known_at), id=revision_id(revision), revision=revision
        )
        return cls.model_validate(facts)


class SearchResult(Result):
    """The hits of one search, best first (each hit a JSON object: path, chunk, lines, snippet, scores…)."""

    query: str
    as_of: str | None = Field(description="Knowledge cutoff used (null = now)")
    valid_at: str | None
    """The validity time the interval overlay applied (the cutoff's, unless asked)."""
    mode: str
    match: str
    """The keyword expression the query became (FTS5 syntax)."""
    hits: SkipValidation[list[dict[str, Any]]]
    """The engine's hits as it ranked them (not validated again: a search of 50 hits would copy each)."""
    before_history: bool = Field(
        default=False,
        description="True when as_of is before the vault's first batch: "
        "the vault had no history then, so nothing could match (ask about first_batch or later)",
    )
    first_batch: str | None = Field(default=None, description="When the vault's history starts (its first batch, UTC)")
    semantic: str | None = None
    """The embedder whose vectors the default mode fused with the keyword ranking (None: words alone)."""
    vectors: dict[str, Any] | None = None
    """While the semantic vectors are still being filled: how far (``embedder``, ``filled``, ``total`` current
    texts); the texts without one are found by their words alone meanwhile. None once complete (or unused)."""
    similar_only: bool = Field(default=False, description=SIMILAR_ONLY)


class Stats(Result):
    """Counts of a vault's notes, revisions, batches and stored texts, and its database's size."""

    vault: str
    root: str
    database: str
    notes: int
    revisions: int
    batches: int
    chunk_revisions: int
    first_batch: str | None
    last_batch: str | None
    distinct_texts: int
    database_bytes: int
    vector_search: str | None = None
    """PostgreSQL: "pgvector", or the comparison of every vector in Python (None: SQLite, sqlite-vec)."""
    semantic_vectors: dict[str, Any] | None = None
    """How many current texts have the semantic model's vectors so far (``embedder``, ``filled``, ``total``): the
    writer fills them after each batch, newest notes first. None when every batch writes its vectors."""
    retention: dict[str, Any] | None = None
    """What thinning by a retention policy would remove now (``policy`` and the counts of ``RetentionPreview``);
    None when no policy was given."""


class Reindexed(Result):
    """What ``reindex`` did: how many of the vault's batches it indexed (``full``: after a rebuild)."""

    vault: str
    batches_indexed: int
    full: bool
    inconsistent: list[str] = Field(default_factory=list)
    """What was still wrong once the batches it had not seen were indexed: the index was rebuilt for it."""


class Reembedded(Result):
    """What ``reembed`` did: the new embedder's signature and how many texts it embedded."""

    embedder: str
    docs_embedded: int


@dataclass(slots=True)
class Purged(PurgeResult):
    """What a purge did to a vault's stored history (the counts of ``PurgeResult``), and ``git``: a note when
    the vault's own git history still holds what was purged."""

    vault: str = ""
    git: str | None = None

    @classmethod
    def of(cls, result: PurgeResult, vault: str, git: str | None = None) -> Purged:
        return cls(**asdict(result), vault=vault, git=git)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if self.git is None:
            del out["git"]
        return out


@dataclass(slots=True)
class RevisionFacts:
    """What the store holds about one revision id, read in one transaction (for checking a receipt)."""

    revision: Revision | None
    """The revision with that id (None: the store holds none)."""
    content: str | None
    """Its exact text (None when there is no revision or it is a deletion)."""
    purges: list[PurgeRecord]
    """Every purge of the vault, oldest first."""

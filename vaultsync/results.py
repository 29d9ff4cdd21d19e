"""Typed answers of ``Vault.read`` (``Note``), ``search``, ``stats``, ``reindex``, ``reembed``, ``purge`` and
``revision_facts``.

Each ``to_json()`` is exactly what the command's ``--json`` prints (and what the MCP tools build on),
field for field and in the same order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .revisions import revision_id
from .store import PurgeRecord, PurgeResult, Revision
from .times import format_time


@dataclass(slots=True)
class Note:
    """A note's exact content at some time, with its revision's facts."""

    revision: Revision
    content: str

    def to_json(self) -> dict[str, Any]:
        r = self.revision
        return {
            "path": r.path,
            "content": self.content,
            "known_at": format_time(r.known_at),
            "content_hash": r.content_hash,
            "size": r.size,
            "title": r.title,
            "frontmatter": r.frontmatter,
            "tags": r.tags,
            "aliases": r.aliases,
            "links": r.links,
            "warnings": r.warnings,
            "kind": r.kind,
            "renamed_from": r.renamed_from,
            "id": revision_id(r),
        }


@dataclass(slots=True)
class SearchResult:
    """The hits of one search, best first (each hit a JSON object: path, chunk, lines, snippet, scores…)."""

    query: str
    as_of: str | None
    """The knowledge cutoff searched (None: now)."""
    valid_at: str | None
    """The validity time the interval overlay applied (the cutoff's, unless asked)."""
    mode: str
    match: str
    """The keyword expression the query became (FTS5 syntax)."""
    hits: list[dict[str, Any]]
    before_history: bool = False
    """True when the cutoff is before the vault's first batch: the vault had no history then, so nothing could
    match (an empty ``hits`` that does not mean "no note held the words")."""
    first_batch: str | None = None
    """When the vault's history starts: the time of its first batch (None: it has none yet)."""
    semantic: str | None = None
    """The embedder whose vectors the default mode fused with the keyword ranking (None: words alone)."""
    vectors: dict[str, Any] | None = None
    """While the semantic vectors are still being filled: how far (``embedder``, ``filled``, ``total`` current
    texts); the texts without one are found by their words alone meanwhile. None once complete (or unused)."""
    similar_only: bool = False
    """True when no searched chunk holds the query's words and the hits are chunks similar in meaning (the
    default mode with a semantic model, above its similarity floor): "similar, no word matches"."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchResult:
        return cls(
            data["query"],
            data["as_of"],
            data["valid_at"],
            data["mode"],
            data["match"],
            data["hits"],
            bool(data.get("before_history", False)),
            data.get("first_batch"),
            data.get("semantic"),
            data.get("vectors"),
            bool(data.get("similar_only", False)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "as_of": self.as_of,
            "valid_at": self.valid_at,
            "mode": self.mode,
            "match": self.match,
            "hits": self.hits,
            "before_history": self.before_history,
            "first_batch": self.first_batch,
            "semantic": self.semantic,
            "vectors": self.vectors,
            "similar_only": self.similar_only,
        }


@dataclass(slots=True)
class Stats:
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

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(slots=True)
class Reindexed:
    """What ``reindex`` did: how many of the vault's batches it indexed (``full``: after a rebuild)."""

    vault: str
    batches_indexed: int
    full: bool
    inconsistent: list[str] = field(default_factory=list)
    """What was still wrong once the batches it had not seen were indexed: the index was rebuilt for it."""

    def to_json(self) -> dict[str, Any]:
        return {
            "vault": self.vault,
            "batches_indexed": self.batches_indexed,
            "full": self.full,
            "inconsistent": self.inconsistent,
        }


@dataclass(slots=True)
class Reembedded:
    """What ``reembed`` did: the new embedder's signature and how many texts it embedded."""

    embedder: str
    docs_embedded: int

    def to_json(self) -> dict[str, Any]:
        return {"embedder": self.embedder, "docs_embedded": self.docs_embedded}


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

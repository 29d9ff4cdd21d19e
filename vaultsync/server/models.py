"""Structured tool results: pydantic models (fields named as in the CLI's ``--json`` output wherever the CLI
prints the same fact; an answer made of a library result's facts takes them from it: ``Derived``) and
``flat_schema``, the compact output schema each tool publishes."""

from __future__ import annotations

import copy
import json
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field
from pydantic._internal._model_construction import ModelMetaclass  # what a model's class is made by

from ..results import DeletedNote, Links, Note, Stats
from ..results import SearchResult as Found
from .budget import OMITTED


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Deriving(ModelMetaclass):
    """Builds a ``Derived`` model: the fields named in ``fields=(Result, names)`` come from the library's result
    (type, default and description) unless the class declares its own, in the order named; then the class's own."""

    def __new__(
        mcs,
        name: str,
        bases: tuple[type[Any], ...],
        namespace: dict[str, Any],
        fields: tuple[type[BaseModel], tuple[str, ...]] | None = None,
        **kwargs: Any,
    ) -> type:
        if fields is not None:
            source, names = fields
            own = namespace.get("__annotations__", {})
            notes: dict[str, Any] = {}
            for field in names:
                if field in own:
                    notes[field] = own[field]
                else:
                    info = source.model_fields[field]
                    notes[field], namespace[field] = info.annotation, copy.copy(info)
            namespace["__annotations__"] = {**notes, **{k: v for k, v in own.items() if k not in notes}}
        return super().__new__(mcs, name, bases, namespace, **kwargs)


class Derived(_Out, metaclass=_Deriving):
    """An MCP answer made of a library result's fields (declared once, in ``vaultsync.results``) and the tool's
    own: ``class X(Derived, fields=(Result, ("a", "b", ...)))`` takes each named field from ``Result`` unless the
    class declares it (an MCP-only field, or one whose wire shape differs), in that order; ``X.of(result, ...)``
    builds one from a result and the tool's values."""

    def __init_subclass__(cls, fields: tuple[type[BaseModel], tuple[str, ...]] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)

    @classmethod
    def of(cls, result: BaseModel, **own: Any) -> Self:
        """The answer of ``result``: each field the two share, then ``own`` (the tool's values) over them."""
        shared = {name: getattr(result, name) for name in cls.model_fields if name in type(result).model_fields}
        return cls.model_validate({**shared, **own})


class Compact(_Out):
    """An answer built for size: its null fields are left out on the wire (each nullable field has a default)."""


class Component(_Out):
    """One ranking's view of a hit."""

    rank: int = Field(description="Rank in this ranking (1 = best; ties share a rank)")
    score: float = Field(description="The ranking's own score (BM25 is lower-is-better, cosine higher-is-better)")


class SearchHit(_Out):
    """One matching chunk, exactly as ``vaultsync search --json`` prints it."""

    model_config = ConfigDict(extra="allow")
    path: str = Field(description="Vault-relative path of the note")
    chunk_id: str = Field(description="Stable id of the chunk within the note")
    heading_path: list[str] = Field(description="Headings the chunk sits under, outermost first")
    lines: list[int] = Field(description="First and last line of the chunk (1-based, inclusive)")
    text: str = Field(description="The chunk's exact text (cut when very long; see truncated)")
    score: float = Field(
        description="The mode's score: hybrid, higher is better (BM25 plus phrase, "
        "proximity and heading signals); keyword, bm25 (lower is better); vector, cosine"
    )
    keyword: Component | None = Field(default=None, description="Keyword (BM25) ranking, if it matched")
    vector: Component | None = Field(default=None, description="Vector (cosine) ranking, if it matched")
    known_at: str | None = Field(description="When vaultsync learned this revision (UTC)")
    content_hash: str | None = Field(description="SHA-256 of the note revision")
    uri: str | None = Field(default=None, description="Link that opens the note in Obsidian")
    title: str | None = None
    snippet: str | None = Field(default=None, description="The matching words in context")


class SearchResult(
    Derived,
    fields=(Found, ("query", "as_of", "mode", "hits", "truncated", "before_history", "first_batch", "similar_only")),
):
    """Search hits, best first."""

    hits: list[SearchHit]
    truncated: bool = Field(default=False, description="True when hit texts were cut to keep the result small")


class Link(_Out):
    """A link found in a note."""

    model_config = ConfigDict(extra="allow")
    target: str
    kind: str = Field(description="wikilink or markdown")
    line: int = 0


NOTE_FIELDS = (
    "path", "content", "known_at", "content_hash", "id", "size", "title", "frontmatter", "tags", "aliases", "links",
    "renamed_from", "mime_type", "offset", "total_chars", "next_offset", "truncated", "omitted",
)  # fmt: skip


class NoteResult(Derived, fields=(Note, NOTE_FIELDS)):
    """A note's exact text as of a time, with its revision's facts (``vaultsync read --json``)."""

    content: str = Field(description="The note's exact text, or the slice [offset, offset+max_chars)")
    tags: list[str] = Field(default_factory=list, description="The note's tags, from tags_offset on")
    links: list[dict[str, Any]] = Field(default_factory=list, description="Links in the note, from links_offset on")
    mime_type: str | None = Field(
        default=None,
        description="Only for an attachment (a file that is not a note): its type. A canvas or a base gives its "
        "text (cards, views) as content; any other attachment's bytes are never sent: content is empty",
    )
    offset: int = Field(description="Character offset of content within the note")
    total_chars: int = Field(description="Length of the whole note in characters")
    next_offset: int | None = Field(description="Pass as offset to read the rest; null when content reaches the end")
    truncated: bool = Field(description="True when content stops before the end of the note")
    omitted: dict[str, int] | None = Field(
        default=None,
        description=f"{OMITTED}. For the rest, call again with links_offset (or tags_offset) = that argument plus "
        "the number of links (tags) received",
    )


class RevisionRow(Compact):
    """One revision of a note (or one change in a window), null fields left out."""

    kind: str = Field(description="created, modified, renamed or deleted")
    known_at: str = Field(description="When vaultsync learned it (UTC)")
    id: str | None = Field(
        default=None,
        description="Names exactly this revision (r12: the one batch 12 made); read_note as_of, diff_note "
        "from/to and restore_note revision take it",
    )
    revision: str | None = Field(
        default=None,
        description="The start of its content hash (absent for a deletion; the same when the text came back "
        "to an earlier state); expected_revision takes it",
    )
    path: str | None = Field(
        default=None,
        description="The note's path then (note_history: only where it had another name than the answer's path)",
    )
    renamed_from: str | None = Field(default=None, description="For a rename: the path it had before")


class DiffResult(_Out):
    path: str
    from_: str = Field(alias="from", serialization_alias="from", description="Earlier time or revision id")
    to: str | None = Field(description="Later time or revision id (null = now)")
    diff: str = Field(description="Unified diff; empty when the note was identical at both times")
    truncated: bool = False


class ChangesResult(Compact):
    since: str
    until: str | None = None
    changes: list[RevisionRow] = Field(description="In the order vaultsync learned them")
    counts: dict[str, int] = Field(description="How many of each kind (all of them, even when truncated)")
    truncated: bool = Field(default=False, description="True when only the first `limit` changes are listed")
    horizon: str | None = Field(
        default=None,
        description="Set when since is before the vault's retention horizon: "
        "its history before this time was purged, and the changes listed start there",
    )
    before_history: bool = Field(
        default=False,
        description="True when until is before the vault's first batch: nothing had changed yet (see first_batch)",
    )
    first_batch: str | None = Field(default=None, description="When the vault's history starts (its first batch, UTC)")


class DeletedRow(Compact, Derived, fields=(DeletedNote, tuple(DeletedNote.model_fields))):
    """A note deleted in the window, as ``vaultsync deleted --json`` prints it."""


class DeletedResult(Compact):
    since: str | None = None
    until: str | None = None
    deleted: list[DeletedRow] = Field(description="Oldest deletion first; empty when nothing was deleted")
    truncated: bool = Field(default=False, description="True when only the latest `limit` deletions are listed")


class LinksResult(Derived, fields=(Links, tuple(Links.model_fields))):
    truncated: bool = False


class WatcherStatus(_Out):
    model_config = ConfigDict(extra="allow")
    running: bool = Field(description="A watcher keeps the index current (in this process or another)")
    in_process: bool = Field(description="The watcher runs inside this server (serve --watch)")
    other_process: str | None = Field(
        default=None, description="Another process writing this vault, if any (what it does and since when)"
    )
    role: str = Field(
        default="reader",
        description="watcher: this server records the folder's changes; reader: "
        "it only reads the store (another process, other_process, may be watching)",
    )
    standby: bool = Field(
        default=False,
        description="Asked to watch (serve --watch): a reader takes over "
        "watching within seconds when the watching process stops",
    )
    lag_seconds: float | None = Field(
        default=None, description="The age of the oldest change in the folder not recorded yet (0: none waits)"
    )
    current: bool | None = Field(
        default=None,
        description="The watcher's heartbeat is fresh, it records and no change waits long (None: no watcher ever ran)",
    )
    state: str | None = Field(
        default=None, description="The watcher's state: watching, failing, importing, stopped or stale (no heartbeat)"
    )
    heartbeat_age_seconds: float | None = Field(default=None, description="How long ago the watcher last said it runs")
    last_latency_ms: float | None = Field(
        default=None,
        description="The watcher's last batch: ms from its first change (the save) to its commit, in this process",
    )


class SemanticVectors(_Out):
    embedder: str = Field(description="The semantic model whose vectors are being filled")
    filled: int = Field(description="Current texts that have their vector: search finds them by meaning too")
    total: int = Field(description="Current texts; the rest are found by their words until the watcher fills them")
    history_filled: int | None = Field(
        default=None, description="Texts of the whole history (past revisions too) that have their vector"
    )
    history_total: int | None = Field(
        default=None,
        description="Texts of the whole history; current texts are filled first, then the past, newest first: a search "
        "at a past cutoff finds the rest by their words",
    )


class StatusResult(
    Derived,
    fields=(
        Stats,
        ("vault", "notes", "revisions", "batches", "first_batch", "last_batch", "writes_enabled", "watcher",
         "semantic_vectors"),
    ),
):  # fmt: skip
    writes_enabled: bool
    watcher: WatcherStatus
    semantic_vectors: SemanticVectors | None = Field(
        default=None,
        description="How far the semantic model's vectors are filled (None: every text has its vector as written)",
    )


class WriteResult(_Out):
    path: str
    known_at: str | None = Field(description="When the new revision was recorded")
    content_hash: str | None
    size: int | None
    ingested: bool = Field(description="True: a write returns once the change is searchable (else it is a tool error)")
    uri: str


def flat_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The same JSON Schema with ``$ref``s inlined, nullable ``anyOf``s folded into ``type`` lists and
    titles dropped: equivalent, smaller, and several times faster for clients to validate. A fixed-length
    row (``prefixItems``, draft 2020-12 only) becomes ``items`` of any of its item schemas, which every
    draft clients validate with understands (the field's description says what each position holds)."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(x) for x in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[1]])
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        if "prefixItems" in node:
            kinds = list({json.dumps(item, sort_keys=True): item for item in node["prefixItems"]}.values())
            node = {k: v for k, v in node.items() if k not in ("prefixItems", "items")}
            node["items"] = kinds[0] if len(kinds) == 1 else {"anyOf": kinds}
        out = {
            k: ({name: walk(sub) for name, sub in v.items()} if k == "properties" else walk(v))
            for k, v in node.items()
            if k not in ("title", "$defs")
        }
        options = out.get("anyOf")
        if options and all(set(o) == {"type"} and isinstance(o["type"], str) for o in options):
            out.pop("anyOf")
            out["type"] = [o["type"] for o in options]
        elif options and len(options) == 2 and {"type": "null"} in options:
            (other,) = [o for o in options if o != {"type": "null"}]
            if isinstance(other.get("type"), str):  # X or null: keywords of X only constrain an X
                out.pop("anyOf")
                out = {**other, **out, "type": [other["type"], "null"]}
        return out

    return walk(schema)

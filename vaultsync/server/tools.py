"""The read-only time-travel tools: each a few lines over ``Vault``, with bounded, structured results."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ..disk.attachments import is_attachment, mime_type
from ..revisions import resolve_cutoff
from ..times import ACCEPTED, RECENT_DAYS, format_time, recent
from .answers import (
    MAX_RESULT_CHARS,
    HistoryAnswer,
    NoteListAnswer,
    SearchAnswer,
    change_rows,
    fit_hits,
    history_answer,
    note_list,
    search_answer,
)
from .attachments import add_attachment_tools
from .budget import wire_bytes
from .looking_back import add_list_deleted
from .models import (
    ChangesResult,
    DiffResult,
    LinksResult,
    NoteResult,
    SearchResult,
    SemanticVectors,
    StatusResult,
    WatcherStatus,
)
from .search_args import searching, taking
from .served import ServedVault
from .toolkit import (
    CutoffArg,
    PathArg,
    ToolSet,
    decode_cursor,
    friendly,
    moment,
    page,
    when,
    wire_names,
)

ValidArg = Annotated[
    str | None,
    Field(
        description="Validity time: for notes declaring valid_from/valid_to in "
        "frontmatter, the revision that applies at this time (an interval overlay); "
        "omit for the revisions as recorded",
        max_length=64,
    ),
]

MAX_NOTE_CHARS = 262_144
"""read_note returns the whole note up to this many characters; page with offset beyond it."""
MAX_CONTENT_WIRE_BYTES = 640 * 1024
"""read_note's content takes at most this much of the answer's budget (``budget.MAX_ANSWER_BYTES``), both copies."""
MAX_LINKS = 500
"""get_links lists at most this many outgoing links and this many backlinks."""


def add_read_tools(tools: ToolSet, rt: ServedVault) -> None:
    """Search, read, history, diff, changes, deletions, listing, links and status, in the order tools/list shows
    them."""
    for add in (
        add_search_notes,
        add_read_note,
        add_note_history,
        add_diff_note,
        add_list_changes,
        add_list_deleted,
        add_list_notes,
        add_attachment_tools,
        add_get_links,
        add_vault_status,
    ):
        add(tools, rt)


def add_search_notes(tools: ToolSet, rt: ServedVault) -> None:
    search = searching(rt)

    @friendly
    @taking(search)
    def search_hits(**args: Any) -> SearchResult:
        """Search the vault's notes by meaning and keywords, as they are now or as they were at a past time.

        Returns the best-matching chunks (sections), each with its note path, heading path, line range and
        exact text. Pass as_of (e.g. '2025-03-01') to search only what the vault contained then. Read a
        whole note with read_note(path, as_of).
        """
        result = search(**args)
        hits, cut = fit_hits(result.hits)
        return SearchResult.of(result, hits=hits, truncated=cut)

    tools.full["search_notes"] = search_hits  # the whole hits, for a server that signs them (receipts)

    @tools.add
    @friendly
    @taking(search)
    def search_notes(
        full_text: Annotated[
            bool, Field(description="Give each hit's exact text instead of an excerpt around its match")
        ] = False,
        explain: Annotated[
            bool,
            Field(
                description="Also list every hit in rank order with its scores "
                "(keyword and vector ranks, ranking signals)"
            ),
        ] = False,
        **args: Any,
    ) -> SearchAnswer:
        """Search the vault's notes by meaning and keywords, as they are now or as they were at a past time.

        Returns the notes with the best-matching sections, best first: each note's path, revision and
        time once (an index into times, the answer's known_at values), then its hits as [heading path,
        first line, last line, excerpt around the match].
        Pass as_of (e.g. '2025-03-01') to search only what the vault contained then; full_text=true for
        the sections' exact text. Read a whole note with read_note(path, as_of).
        """
        return search_answer(search(**args), full_text=full_text, explain=explain)


def add_read_note(tools: ToolSet, rt: ServedVault) -> None:
    @tools.add
    @friendly
    def read_note(
        path: PathArg,
        as_of: Annotated[
            str | None,
            Field(
                description=f"Knowledge cutoff: {ACCEPTED}; or a revision: a revision id from note_history or "
                "list_changes (r12: the note as it stood right after batch 12), or 8+ hex digits of its content hash. "
                "Omit for now.",
                max_length=64,
            ),
        ] = None,
        valid_at: ValidArg = None,
        offset: Annotated[int, Field(ge=0, description="Character offset to start at (for notes over 256K chars)")] = 0,
        max_chars: Annotated[
            int, Field(ge=1, le=MAX_NOTE_CHARS, description="Most characters to return")
        ] = MAX_NOTE_CHARS,
        links_offset: Annotated[int, Field(ge=0, description="First link to return (for notes with many)")] = 0,
        tags_offset: Annotated[int, Field(ge=0, description="First tag to return (for notes with many)")] = 0,
    ) -> NoteResult:
        """Read a note's exact Markdown text, now or as it was at a past time, with its title, tags,
        links, known_at (when vaultsync learned that version) and content hash. An attachment (list_notes lists
        them: images, PDFs, canvases, bases) comes back with its mime_type and size; a canvas gives its cards' text in
        reading order, a base its views and filters, a PDF its pages' text; no attachment's bytes are sent. A note
        renamed since is read at a past time by the path it had then (note_history lists its names).

        Notes up to 256K characters come back whole; for longer ones, call again with
        offset=next_offset until next_offset is null. Every answer fits one size budget: when links or
        tags were left out, omitted counts them; page them with links_offset and tags_offset.
        """
        with rt.reading() as vault:
            note = vault.read(path, as_of=moment(as_of, "as_of"), valid_at=valid_at)
        text = note.content
        if offset > len(text):
            raise ToolError(f"offset {offset} is past the end of the note ({len(text)} characters); use offset=0")
        end = content_end(text, offset, min(len(text), offset + max_chars))
        return NoteResult.of(
            note,
            links=note.links[links_offset:],
            tags=note.tags[tags_offset:],
            content=text[offset:end],
            # a canvas's or a base's text; never an image's bytes
            mime_type=mime_type(note.path) if is_attachment(note.path) else None,
            offset=offset,
            total_chars=len(text),
            next_offset=end if end < len(text) else None,
            truncated=end < len(text),
        )


def content_end(text: str, offset: int, end: int, limit: int = MAX_CONTENT_WIRE_BYTES) -> int:
    """Where read_note's content stops: at ``end``, or sooner so that its two copies on the wire stay within
    ``limit`` bytes (a slice of quotes or control characters grows when escaped; the answer's budget keeps the
    rest for the note's other facts)."""
    if wire_bytes(text[offset:end]) <= limit:
        return end
    low, high = offset + 1, end  # at least one character, so that paging always moves on
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if wire_bytes(text[offset:mid]) <= limit else (low, mid - 1)
    return low


def add_note_history(tools: ToolSet, rt: ServedVault) -> None:
    @tools.add
    @friendly
    def note_history(
        path: PathArg,
        since: Annotated[
            str | None,
            Field(
                description=f"Only revisions learned after this time: {ACCEPTED}; or a revision id (r12: after "
                "batch 12)",
                max_length=64,
            ),
        ] = None,
        until: Annotated[
            str | None,
            Field(description="Only revisions learned at or before this time, or a revision id", max_length=64),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="Most revisions to return (the latest)")] = 200,
        valid_at: ValidArg = None,
    ) -> HistoryAnswer:
        """List every recorded revision of a note (created, modified, renamed, deleted), oldest first,
        following renames back to the note's earlier names: each with its kind, known_at, id (r12: names
        this one revision; every tool taking a revision takes it) and content hash start (and its path
        where it had another name). Use diff_note with two ids to see what changed, read_note with one
        to read it."""
        with rt.reading() as vault:
            latest, chosen = vault.history_window(path, since, until, valid_at=valid_at)
        return history_answer(latest, chosen[-limit:], len(chosen) > limit)


def add_diff_note(tools: ToolSet, rt: ServedVault) -> None:
    @tools.add
    @wire_names({"from": "from_"})
    @friendly
    def diff_note(
        path: PathArg,
        from_: Annotated[
            str,
            Field(
                alias="from",
                description=f"Earlier time: {ACCEPTED}; or a revision id from note_history or list_changes (r12: the "
                "note as it stood right after batch 12), or 8+ hex digits of a content hash",
                max_length=64,
            ),
        ],
        to: Annotated[str | None, Field(description="Later time or revision id (omit for now)", max_length=64)] = None,
        valid_at: ValidArg = None,
    ) -> DiffResult:
        """Show how a note changed between two times or two of its revisions (ids from note_history or
        list_changes), as a unified diff (empty when it did not change; a side where the note did not exist is
        empty)."""
        start, end = moment(from_, "from"), moment(to, "to")  # named as the client named them, not since/until
        with rt.reading() as vault:
            diff = vault.diff(path, start, end, valid_at=valid_at)
        cut = len(diff) > MAX_RESULT_CHARS
        if cut:
            diff = diff[:MAX_RESULT_CHARS] + "\n…[truncated: narrow the time window or read_note both versions]\n"
        return DiffResult.model_validate({"path": path, "from": from_, "to": to, "diff": diff, "truncated": cut})


def add_list_changes(tools: ToolSet, rt: ServedVault) -> None:
    @tools.add
    @friendly
    def list_changes(
        since: Annotated[
            str | None,
            Field(
                description=f"Start of the window (exclusive): {ACCEPTED}; or a revision id (r12: right after batch "
                f"12); omit for the {RECENT_DAYS} days up to until",
                max_length=64,
            ),
        ] = None,
        until: Annotated[
            str | None,
            Field(description="End of the window (inclusive), a time or a revision id; omit for now", max_length=64),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="Most changes to list")] = 200,
        valid_at: ValidArg = None,
    ) -> ChangesResult:
        """List the notes created, modified, renamed or deleted between two times (by default the last
        week), in the order vaultsync learned of them."""
        with rt.reading() as vault:
            begin, end = resolve_cutoff(vault, since, "since"), resolve_cutoff(vault, until, "until").as_of
            start = begin.as_of if since is not None else recent(end)
            said = since if since is not None else str(format_time(start))
            window = (since if since is not None else start), until
            revisions, counts, more = vault.changes_page(*window, valid_at=valid_at, limit=limit)
            first, horizon, early = vault.first_known_at, vault.horizon, vault.before_history(end)
        clipped = horizon is not None and start is not None and start < horizon
        return ChangesResult(
            since=said,
            until=until,
            changes=change_rows(revisions),
            counts=counts,
            truncated=more,
            horizon=format_time(horizon) if clipped else None,
            before_history=early,
            first_batch=format_time(first),
        )


def add_list_notes(tools: ToolSet, rt: ServedVault) -> None:
    @tools.add
    @friendly
    def list_notes(
        prefix: Annotated[
            str | None, Field(description="Only paths starting with this, e.g. 'Projects/'", max_length=1024)
        ] = None,
        tag: Annotated[str | None, Field(description="Only notes with this tag (without #)", max_length=200)] = None,
        as_of: CutoffArg = None,
        valid_at: ValidArg = None,
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page", max_length=2048)] = None,
        limit: Annotated[int, Field(ge=1, le=500, description="Notes per page")] = 100,
    ) -> NoteListAnswer:
        """List the notes that existed at a time (default now), by path, a page at a time, grouped by
        folder: each note as [file name, revision, known_at]. Pass next_cursor back as cursor to get the
        next page."""
        with rt.reading() as vault:
            cut = resolve_cutoff(vault, as_of)  # a revision id: its batch, exactly (the listing's cache key)
        try:
            after = decode_cursor(cursor)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        at = cut.as_of if cut.batch is None else as_of
        revisions = rt.listing(at, prefix or "", when(valid_at, "valid_at"), tag=tag or None)
        chosen, nxt = page(revisions, after, limit, key=lambda r: r.path)
        answer = note_list(chosen, as_of=cut.as_of, next_cursor=nxt)
        with rt.reading() as vault:
            if vault.before_history(cut.as_of):
                answer.before_history, answer.first_batch = True, format_time(vault.first_known_at)
        return answer


def add_get_links(tools: ToolSet, rt: ServedVault) -> None:
    @tools.add
    @friendly
    def get_links(path: PathArg, as_of: CutoffArg = None) -> LinksResult:
        """Show a note's outgoing links (and which note each resolves to) and its backlinks
        (the notes linking to it), as of a time (default now)."""
        with rt.reading() as vault:
            report = vault.links(path, as_of=as_of).to_json()
        cut = len(report["outgoing"]) > MAX_LINKS or len(report["backlinks"]) > MAX_LINKS
        return LinksResult.model_validate(
            {
                **report,
                "outgoing": report["outgoing"][:MAX_LINKS],
                "backlinks": report["backlinks"][:MAX_LINKS],
                "truncated": cut,
            }
        )


def add_vault_status(tools: ToolSet, rt: ServedVault) -> None:
    @tools.add
    @friendly
    def vault_status() -> StatusResult:
        """How many notes and revisions the vault has, when it last changed, whether writes are
        enabled, and whether a watcher keeps the index current (and its lag)."""
        with rt.reading() as vault:
            stats = vault.stats()
        return StatusResult.of(
            stats,
            writes_enabled=rt.allow_writes,
            watcher=WatcherStatus(**_public_watcher(rt)),
            semantic_vectors=SemanticVectors(**stats.semantic_vectors) if stats.semantic_vectors else None,
        )


PRIVATE_STATUS = frozenset({"root", "vault"})
"""Watcher status fields a client does not need (the absolute folder path; the vault name is said once)."""


def _public_watcher(rt: ServedVault) -> dict[str, Any]:
    """The watcher's status without absolute paths (another process appears only as what it does)."""
    return {k: v for k, v in rt.watcher_status().items() if k not in PRIVATE_STATUS}

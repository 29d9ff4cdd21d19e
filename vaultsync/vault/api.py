"""The library API: one ``Vault`` object that every door (CLI, watcher, MCP server) calls."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Unpack

from ..disk import edit, vaultfs
from ..disk.attachments import is_attachment
from ..disk.folder import MAX_FILE_BYTES, FileProblem
from ..disk.paths import nfc, note_candidates, note_path
from ..errors import ConfigError, NoteNotFound, StoreError, UnknownRevision
from ..gitimport import GIT_HISTORY_NOT_REWRITTEN, GitImport, OnCommit, in_git
from ..links import LinkReport, link_report
from ..results import Note, Purged, Reembedded, Reindexed, RevisionFacts, SearchResult, Stats
from ..retention import Policy, parse_policy
from ..revisions import (
    Cutoff,
    batch_named,
    looks_like_revision,
    pick_revision,
    resolve_cutoff,
    revision_id,
    revisions_known,
)
from ..search_filter import FilterArgs, SearchFilter
from ..store import BatchNews, Engine, Revision, View
from ..store.requests import RequestTable
from ..store.values import RetentionPreview
from ..store.view import forgotten
from ..sync import BatchSummary, Progress
from ..times import TimeLike, as_micros, format_time
from .lock import VaultLock
from .lookup import applying, binary_change, diff_sides, existing, tagged, unified
from .opener import open_vault
from .pending import recover
from .purge_guard import check_current, purge_cutoff
from .recorder import Recorder


class Vault:
    """A vault's history in a store: sync it, read it as of any time.

    ``parse_workers`` > 0 lets large batches parse in that many worker processes. Workers are
    started with "spawn", which re-imports the main module: only programs whose main module is
    guarded by ``if __name__ == "__main__"`` should opt in (the CLI does).
    """

    def __init__(
        self,
        store: Engine,
        name: str,
        vault_id: int,
        root: Path,
        *,
        parse_workers: int = 0,
        lock_command: str | None = None,
    ) -> None:
        self._store = store
        self.name = name
        self.id = vault_id
        self.root = root
        self.parse_workers = parse_workers
        self.lock = VaultLock(
            store.writer_lock(name), command=lock_command, readonly=store.readonly, on_taken=lambda: recover(self)
        )
        """The vault's writer lock (across processes) and this process's batch lock: ``vault_lock.VaultLock``."""

    # ------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        db_path: str | os.PathLike[str] | None = None,
        *,
        root: str | os.PathLike[str] | None = None,
        name: str | None = None,
        readonly: bool = False,
        parse_workers: int = 0,
        embedder: str | None = None,
        lock_command: str | None = None,
    ) -> Vault:
        """Open a vault for writing (``root`` given: registered if new) or for reading (by ``name``).

        ``embedder`` (for writing) names the embedder of a new database's vectors; a database whose
        vectors another embedder made is refused (``reembed`` switches). ``lock_command`` is how the
        writer lock names its holder (default: this process's arguments).
        """
        store, vault_name, vault_id, vault_root = open_vault(
            db_path, root=root, name=name, readonly=readonly, embedder=embedder
        )
        return cls(store, vault_name, vault_id, vault_root, parse_workers=parse_workers, lock_command=lock_command)

    def close(self) -> None:
        self.lock.close()
        self._store.close()

    def __enter__(self) -> Vault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def last_known_at(self) -> int | None:
        """When the store last learned something about this vault (None before the first batch)."""
        last = self._store.last_batch(self.id)
        return None if last is None else last[0]

    @property
    def first_known_at(self) -> int | None:
        """When the store first learned something about this vault, where its history starts (None before the
        first batch)."""
        with self._view() as view:
            return view.first_known_at()

    @property
    def last_batch_id(self) -> int:
        """The id of the vault's last batch (0 before the first); it grows with every batch."""
        return self._store.last_batch_id(self.id)

    def batches_after(self, batch_id: int, *, limit: int = 1000) -> list[BatchNews]:
        """The batches written after ``batch_id`` (by any process), oldest first, with the paths each wrote."""
        return self._store.batches_after(self.id, batch_id, limit=limit)

    def data_version(self) -> int:
        """Changes whenever another connection commits to the database: poll it to notice new batches cheaply."""
        return self._store.data_version()

    def wakeup(self) -> Any:
        """Something to wait on between polls (``store.contract.Wakeup``): its ``wait(timeout_s, stop)`` ends early
        when the engine announces another process's commit (True: look now)."""
        return self._store.wakeup()

    @property
    def readonly(self) -> bool:
        """Whether the vault was opened for reading only (no sync, writes, purge or upkeep)."""
        return self._store.readonly

    @property
    def generation(self) -> tuple[int | None, int]:
        """Changes whenever an answer about the past may have changed: a new batch, or a purge."""
        return self.last_known_at, self._store.purge_count(self.id)

    # ------------------------------------------------------------ writing

    def requests(self) -> RequestTable:
        """The write requests other processes asked of this vault's writer (``live.handoff``)."""
        return RequestTable(self._store, self.id)

    def database_unreachable_s(self) -> float:
        """How long the database has been unreachable (0 while it answers)."""
        return self._store.unreachable_s()

    def sync(
        self,
        paths: Iterable[str] | None = None,
        *,
        known_at: TimeLike = None,
        strict: bool = False,
        source: str = "import",
        progress: Progress | None = None,
        allow_mass_delete: bool = False,
        detail: str | None = None,
        hold: Callable[[str], bool] | None = None,
        checkout: bool = False,
    ) -> BatchSummary:
        """Record what changed on disk as one atomic batch: every file (``paths=None``) or just ``paths``.

        ``paths`` are vault-relative; a folder stands for everything under it, a missing path for a
        deletion. This is the one function both ``import`` and the watcher call. A vault folder that
        vanished, or a batch deleting most notes at once, records nothing (see ``vaultsync.disk.vanished``)
        unless ``allow_mass_delete``. A note created in ``paths`` whose content a live note outside them
        had, and whose file is gone, is recorded as renamed from it. ``hold`` (the watcher's) may leave
        an unpaired deletion, or a copy of a note still on disk, for a later batch (``BatchSummary.held``); what it
        holds back holds back the whole batch. ``checkout`` (the watcher's: the vault's git HEAD moved since its
        last batch) records a mass deletion in the registered vault folder without confirmation.
        """
        when = as_micros(known_at, "known_at")
        with self.lock.writing():
            return self._recorder().sync(
                paths,
                known_at=when,
                strict=strict,
                source=source,
                progress=progress,
                allow_mass_delete=allow_mass_delete,
                detail=detail,
                hold=hold,
                checkout=checkout,
            )

    def _recorder(self) -> Recorder:
        """What records this vault's batches (``recording``); the caller holds ``lock.writing``."""
        return Recorder(self._store, self.id, self.name, self.root, self.parse_workers)

    def import_git(self, *, strict: bool = False, progress: OnCommit | None = None) -> GitImport:
        """Replay the first-parent git history of the vault's repository not imported yet, one batch per
        commit at commit time (see ``gitimport``); a commit older than the vault's last batch is recorded
        at that batch's time (``lifted``)."""
        with self.lock.writing():
            return self._recorder().import_git(strict=strict, progress=progress)

    def writing(self, command: str | None = None) -> contextlib.AbstractContextManager[None]:
        """Hold the vault's writer lock (and this process's batch lock) while writing note files and
        recording them (``restore``, ``undo``); LockedError while another process holds it."""
        return self.lock.writing(command)

    def batch_info(self, batch_id: int) -> dict[str, Any] | None:
        """A batch's id, known_at, source ("import", "watch", "git", "write", "restore", ...) and detail."""
        return self._store.batch_info(self.id, batch_id)

    def written_by(self, batch_id: int) -> list[Revision]:
        """Every revision one batch wrote (rename tombstones included), by path."""
        return self._store.written_by(self.id, batch_id)

    def batches_by_source(
        self, source: str | None, caller: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """The last ``limit`` batches written by ``source`` ("mcp": by any MCP tool) and/or done for the MCP
        ``caller`` (``vaultsync.write_caller``), oldest first, with the paths each wrote."""
        return self._store.batches_by_source(self.id, source, caller, limit)

    def revision_before(self, path: str, batch_id: int) -> Revision | None:
        """The last revision (or tombstone) at ``path`` before the batch ``batch_id``."""
        return self._store.revision_before(self.id, note_path(path), batch_id)

    def revision_text(self, revision: Revision) -> str:
        """The exact text of one stored revision (from ``history``, ``ls`` or ``written_by``)."""
        with self._view() as view:
            return view.content(revision)

    # ------------------------------------------------------------ reading

    def note_path(self, path: str) -> str:
        """A user-given note path as the vault-relative NFC path the store uses."""
        return note_path(path)

    @contextlib.contextmanager
    def _view(self, as_of: TimeLike = None, valid_at: TimeLike = None) -> Iterator[Any]:
        """The vault as known at ``as_of``: a time, or a revision id (``r12``: exactly after batch 12)."""
        cut = resolve_cutoff(self, as_of)
        with self._store.view(self.id, self.name, as_of=cut.as_of, valid_at=as_micros(valid_at, "valid_at")) as view:
            yield view if cut.batch is None else view.upto(cut.batch)

    @property
    def horizon(self) -> int | None:
        """The vault's retention horizon: its history before this time was purged (None: never)."""
        return self._store.horizon(self.id)

    def before_history(self, cutoff: TimeLike) -> bool:
        """True when nothing was known at ``cutoff`` (None: now): the vault has no batch yet, or ``cutoff`` is before
        its first."""
        first, at = self.first_known_at, resolve_cutoff(self, cutoff).as_of
        return first is None or (at is not None and at < first)

    def read(self, path: str, as_of: TimeLike = None, valid_at: TimeLike = None) -> Note:
        """The note's exact text as of ``as_of`` (default now); NoteNotFound if it did not exist then.

        With ``valid_at``, the revision that applies at that validity time (frontmatter ``valid_from`` /
        ``valid_to``, an interval overlay: see ``View``). ``as_of`` may name a revision of the note's history
        instead, as ``revision`` takes it (``r12``): exactly that one.
        """
        cutoff = valid_at is not None and batch_named(as_of) is not None  # which revision applied, as known then
        pinned = None if cutoff else self._pin(path, as_of, "as_of")
        if pinned is not None:  # one revision of its history, as history names it
            with self._view() as view:
                view.with_links([pinned])
                return Note.of(pinned, view.content(pinned))
        with self._view(as_of, valid_at) as view:
            rev = applying(view, path, self.name, self.history)
            view.with_links([rev])
            return Note.of(rev, view.content(rev))

    def read_bytes(
        self, path: str, sink: Callable[[bytes], object], as_of: TimeLike = None, valid_at: TimeLike = None
    ) -> Revision:
        """Hand a file's exact bytes as of ``as_of`` to ``sink``, piece by piece (an attachment's in bounded memory;
        a note's text as UTF-8), and return its revision. NoteNotFound if it did not exist then; StoreError when
        its bytes were not kept (an attachment over the size limit when it was recorded)."""
        cutoff = valid_at is not None and batch_named(as_of) is not None  # as ``read``: which applied, known then
        pinned = None if cutoff else self._pin(path, as_of, "as_of")
        with self._view() if pinned is not None else self._view(as_of, valid_at) as view:
            rev = pinned if pinned is not None else applying(view, path, self.name, self.history)
            _send(view, rev, sink)
        return rev

    def revision_bytes(self, revision: Revision, sink: Callable[[bytes], object]) -> None:
        """Hand the exact bytes of one stored revision to ``sink``, piece by piece (``read_bytes``)."""
        with self._view() as view:
            _send(view, revision, sink)

    def ls(
        self,
        as_of: TimeLike = None,
        prefix: str = "",
        valid_at: TimeLike = None,
        *,
        tag: str | None = None,
        attachments: bool = True,
    ) -> list[Revision]:
        """The files that existed as of ``as_of`` (with ``valid_at``: the revisions applying then), by path
        (with ``tag``: only notes tagged so, see ``tagged``; ``attachments`` False: notes only)."""
        with self._view(as_of, valid_at) as view:
            found = view.ls(nfc(prefix))
        if not attachments:
            found = [r for r in found if not is_attachment(r.path)]
        return tagged(found, tag) if tag else found

    def history(self, path: str, valid_at: TimeLike = None) -> list[Revision]:
        """Every revision of the note, oldest first, following renames back to its first name.

        With ``valid_at``: the revisions that in turn applied at that validity time as knowledge grew.
        """
        names = note_candidates(note_path(path))
        with self._view(None, as_micros(valid_at, "valid_at")) as view:
            pick = view.history if view.valid_at is None else view.history_valid
            revs: list[Revision] = next((found for found in map(pick, names) if found), [])
        if not revs:
            raise NoteNotFound(f"vault '{self.name}' has no history for {path!r}")
        return revs

    def revision(self, path: str, value: str, argument: str = "revision") -> Revision:
        """The revision of the note's ``history`` that ``value`` names (``revisions.pick_revision``): a revision id
        ``r12`` names the note as it stood right after batch 12 (the revision batch 12 made, or the last before
        it), the start of a content hash (8+ hex digits) the latest revision with that content. ConfigError when
        ``r12`` is no batch of the vault or the digits begin two different contents; UnknownRevision when the note
        did not exist then (not yet, or deleted by then) or had no such content."""
        number = batch_named(value)
        if number is not None:
            resolve_cutoff(self, value, argument)  # a batch of this vault, else one line naming its latest
        history = self.history(path)
        rev = pick_revision(history, value, path, argument)
        if rev.deleted:
            where = f", renamed to {rev.renamed_to}" if rev.renamed_to else ""
            said = (
                f"revision {revision_id(rev)} of {path!r} is its deletion"
                if number is None or number == rev.batch_id
                else f"note {path!r} did not exist after batch {number} ({value.strip()}): it was deleted in "
                f"{revision_id(rev)}"
            )
            raise UnknownRevision(
                f"{said} (at {format_time(rev.known_at)}{where}): give a revision before it "
                f"({revisions_known(history)})",
                argument=argument,
            )
        return rev

    def history_window(
        self, path: str, since: TimeLike = None, until: TimeLike = None, valid_at: TimeLike = None
    ) -> tuple[str, list[Revision]]:
        """The note's latest path and those of its revisions (``history``) learned after ``since`` up to
        and including ``until`` (each open when None, a time or a revision id: ``r12``, exactly after batch 12),
        oldest first."""
        first, last = resolve_cutoff(self, since, "since"), resolve_cutoff(self, until, "until")

        def after(r: Revision, end: Cutoff) -> bool:
            return r.batch_id > end.batch if end.batch is not None else r.known_at > (end.as_of or 0)

        revisions = self.history(path, valid_at=valid_at)
        chosen = [
            r
            for r in revisions
            if (first.as_of is None or after(r, first)) and (last.as_of is None or not after(r, last))
        ]
        return revisions[-1].path, chosen

    def diff(self, path: str, since: TimeLike, until: TimeLike = None, valid_at: TimeLike = None) -> str:
        """Unified diff of the note between two times ('' when identical); with ``valid_at``, of the
        revisions applying at that validity time as known at each. Either end may be a revision of the
        note's history instead, as ``revision`` takes it (``r12``): exactly that one. A binary attachment's diff
        starts with a line saying how its bytes changed (a PDF's text follows as a diff)."""
        pins = [self._side(path, value, name) for value, name in ((since, "from"), (until, "to"))]
        start = None if pins[0] is not None else as_micros(since, "since")
        end = None if pins[1] is not None else as_micros(until, "until")
        try:
            lineage = self.history(path)  # the names it had: a time before a rename finds it under its name then
        except NoteNotFound:
            lineage = []
        with self._view(start, as_micros(valid_at, "valid_at")) as before:
            texts, labels, revs = diff_sides(before, end, path, pins, lineage, self.name)
        return binary_change(revs) + unified(texts, labels)

    def _side(self, path: str, value: TimeLike, argument: str) -> Revision | str | None:
        """One end of ``diff`` written as a revision (``revision``), or, for a revision id ``r12`` of a batch after
        which the note did not exist, the label of that empty end (as a time then would give); None: a time."""
        try:
            return self._pin(path, value, argument)
        except UnknownRevision:
            if batch_named(value) is None:
                raise
            return f"{note_path(path)} (absent after {str(value).strip()})"

    def _pin(self, path: str, value: TimeLike, argument: str) -> Revision | None:
        """The revision ``value`` names when it is written as one (``revision``), else None (a time)."""
        return self.revision(path, value, argument) if isinstance(value, str) and looks_like_revision(value) else None

    def timeline(self) -> list[tuple[int, int]]:
        """Every batch as ``(known_at, notes it changed)``, oldest first: the vault's activity over time."""
        with self._view() as view:
            return [(known_at, count) for _, known_at, count in view.batch_times()]

    def listing(self, as_of: TimeLike = None) -> list[tuple[str, str | None, str | None]]:
        """``(path, title, content hash)`` of every note that existed as of ``as_of``, by path: the paths of
        ``ls`` (without ``valid_at``), several times cheaper for a large vault."""
        with self._view(as_of) as view:
            return view.listing()

    def fates(self, paths: list[str], as_of: TimeLike) -> dict[str, str | None]:
        """Where notes that existed as of ``as_of`` went since: each of ``paths`` that no longer exists
        under that name maps to its path now (renamed since) or None (deleted since)."""
        with self._view(as_of) as view:
            return view.fates([note_path(p) for p in paths])

    def changes(
        self, since: TimeLike, until: TimeLike = None, valid_at: TimeLike = None, *, limit: int | None = None
    ) -> list[Revision]:
        """Revisions learned after ``since`` up to and including ``until`` (default now), in order
        (the first ``limit``).

        With ``valid_at``: only those that changed which revision applies at that validity time.
        A ``since`` before the vault's retention horizon means the horizon.
        """
        with self._changes_views(since, until, valid_at) as (start, end):
            return end.changes(start, limit)

    def changes_page(
        self, since: TimeLike, until: TimeLike = None, valid_at: TimeLike = None, *, limit: int
    ) -> tuple[list[Revision], dict[str, int], bool]:
        """The first ``limit`` of ``changes``, how many of each kind there are in all (counted in the
        store, not loaded), and whether there are more; one consistent read."""
        with self._changes_views(since, until, valid_at) as (start, end):
            revisions = end.changes(start, limit + 1)
            if len(revisions) <= limit:
                counts: dict[str, int] = {}
                for r in revisions:
                    counts[r.kind] = counts.get(r.kind, 0) + 1
                return revisions, counts, False
            return revisions[:limit], end.change_counts(start), True

    @contextlib.contextmanager
    def _changes_views(self, since: TimeLike, until: TimeLike, valid_at: TimeLike) -> Iterator[tuple[View, View]]:
        """The views at either end of a window of changes; each end a time, or a revision id (``r12``: exactly
        after batch 12)."""
        first, last = resolve_cutoff(self, since, "since"), resolve_cutoff(self, until, "until")
        start, end = first.as_of, last.as_of
        every = float("inf")  # a time: every batch of that time
        if start is not None and end is not None and (end, last.batch or every) < (start, first.batch or every):
            raise ConfigError("until is earlier than since", argument="until")
        horizon = self.horizon
        if end is not None and horizon is not None and end < horizon:
            raise ConfigError(forgotten(self.name, horizon), argument="until")
        with self._view(until, valid_at) as view:
            if start is not None and view.horizon is not None and start < view.horizon:
                before = view.at(view.horizon)  # what was forgotten is not asked about
            else:
                before = view.at(start)
                if first.batch is not None:
                    before.upto(first.batch)
            yield before, view

    def links(self, path: str, as_of: TimeLike = None) -> LinkReport:
        """The note's outgoing links (resolved) and the notes linking to it, both as of ``as_of``."""
        with self._view(as_of) as view:
            rev = existing(view, path, self.name, self.history)
            notes = view.with_links(view.ls())
            view.with_links([rev])
        return link_report(rev, notes, view.as_of)

    def create_note(self, path: str, content: str) -> BatchSummary:
        """Create a new note file (never overwriting anything) atomically, then record it as one batch.

        Serialized with every other write and batch of this process; LockedError, with nothing
        written, while another process holds the vault's writer lock (see ``write_file``).
        """
        return self.write_note(path, content)[0]

    def append_to_note(self, path: str, text: str) -> BatchSummary:
        """Append text to an existing note file in place (nothing another program writes to it is lost), then record
        it as one batch (as ``create_note``)."""
        return self.write_note(path, text, append=True)[0]

    def write_note(
        self, path: str, text: str, *, append: bool = False, check: Callable[[bytes], None] | None = None
    ) -> tuple[BatchSummary, Note]:
        """Create (or append to) a note file, record it, and read back the note as that batch left it
        (``check``: see ``edit.append_file``)."""
        with self.lock.writing():
            if append:
                rel = edit.append_file(str(self.root), path, text, check)
            else:
                rel = edit.create_file(str(self.root), path, text)
            try:
                return self.sync([rel], source="write"), self.read(rel)
            except StoreError as exc:
                raise type(exc)(
                    f"wrote {rel} in the vault folder, but could not record it: {exc}; it is recorded "
                    "at the next sync (do not write it again)"
                ) from None

    def read_file(self, path: str) -> bytes:
        """The bytes of a note file in the vault folder now (read without following symlinks)."""
        return vaultfs.read_note(str(self.root), note_path(path), MAX_FILE_BYTES)[0]

    def write_file(self, path: str, text: str, *, append: bool, check: Callable[[bytes], None] | None = None) -> str:
        """Only write the file (create, or append to it), serialized with this process's writes and
        batches, without recording it: for when another process holds the writer lock and watches
        the vault (it records the file). Returns the vault-relative path."""
        with self.lock.local:
            if append:
                return edit.append_file(str(self.root), path, text, check)
            return edit.create_file(str(self.root), path, text)

    def rewrite_note(self, path: str, change: Callable[[bytes], bytes]) -> tuple[BatchSummary, Note]:
        """Replace a note file's bytes by ``change(old)`` through the safe write path (raising in
        ``change`` leaves it untouched), record it, and read it back (see ``revisions``)."""
        from ..revisions import rewrite_file

        with self.lock.writing():
            rel = rewrite_file(str(self.root), path, change)
            return self.sync([rel], source="write"), self.read(rel)

    def search(
        self,
        query: str,
        *,
        as_of: TimeLike = None,
        valid_at: TimeLike = None,
        mode: str = "hybrid",
        limit: int = 10,
        filters: SearchFilter | None = None,
        **by: Unpack[FilterArgs],
    ) -> SearchResult:
        """Hybrid search of the chunks visible at ``as_of`` (default now); see ``vaultsync.store.search``.

        Narrow it with ``filters`` (a ``SearchFilter``) or with its fields as keywords: ``prefix="Projects/"``,
        ``tags=["project"]``, ``where={"status": "active"}``, ``kinds=["note"]`` (``vaultsync.search_filter``).
        Its ``to_json()`` is exactly what ``search --json`` prints.
        """
        if filters is not None and by:
            raise ConfigError("give the filters as one SearchFilter or as keywords, not both", argument="filters")
        filters = filters if filters is not None else SearchFilter.of(**by)
        with self._view(as_of, valid_at) as view:
            found = view.search(query, mode=mode, limit=limit, filters=filters)
            return SearchResult.model_validate(
                {**found, "before_history": view.before_history, "first_batch": format_time(view.first_known_at())}
            )

    def locate(self, keys: list[tuple[str, str, int]]) -> list[int | None]:
        """The revision id of each (path, content hash, known_at), None for one the store does not hold."""
        with self._view() as view:
            return view.locate(keys)

    def revision_facts(self, revision_id: int) -> RevisionFacts:
        """The revision with id ``revision_id`` (any path, any time), its text, and the vault's purges."""
        with self._view() as view:
            rev = view.revision_by_id(revision_id)
            content = view.content(rev) if rev is not None and not rev.deleted else None
            return RevisionFacts(rev, content, view.purges())

    def export(self, as_of: TimeLike = None, valid_at: TimeLike = None) -> Iterator[dict[str, Any]]:
        """A header, then every chunk visible at ``as_of`` with the exact text the keyword index tokenizes."""
        with self._view(as_of, valid_at) as view:
            yield from view.export()

    def reindex(self, *, full: bool = False) -> Reindexed:
        """Bring the search index up to date (``full``: rebuild it from the revision tables). Batches it has not
        seen are indexed, those it holds but had not marked are marked; when a problem ``check`` finds remains
        after that, the index is rebuilt (``full`` in the answer)."""
        if self._store.readonly:
            raise ConfigError("reindex needs the database opened for writing")
        with self.lock.writing():
            done = self._store.reindex(self.id, full=full)
            if not full:
                with self._view() as view:
                    left = view.index_problems()
                if left:
                    return Reindexed(
                        vault=self.name,
                        batches_indexed=self._store.reindex(self.id, full=True),
                        full=True,
                        inconsistent=left,
                    )
        return Reindexed(vault=self.name, batches_indexed=done, full=full)

    def fill_vectors(self, limit: int | None = None, *, pause: Callable[[], None] | None = None) -> int:
        """Give up to ``limit`` texts the vectors of a background embedder, newest notes first (the writer role's
        work after its batches: ``vaultsync.store.search.backfill``); how many were filled, 0 when none is left.
        The writer lock is held for its short transactions only, never while the model embeds, so a batch never
        waits for vectors; ``pause`` is called between small runs of texts (the watcher's filler yields there)."""
        if self._store.readonly:
            return 0
        return self._store.fill_vectors(self.id, limit=limit, writing=self.lock.writing, pause=pause)

    def vector_progress(self) -> dict[str, Any] | None:
        """How many current texts have the vectors of a background embedder (``embedder``, ``filled``, ``total``);
        None when every batch writes its vectors."""
        with self._view() as view:
            return view.vector_progress()

    def reembed(self, embedder: str) -> Reembedded:
        """Re-embed every chunk text with another embedder (the store never mixes embedders)."""
        with self.lock.writing():
            signature, count = self._store.reembed(embedder)
        return Reembedded(embedder=signature, docs_embedded=count)

    # ------------------------------------------------------------ forgetting

    def purge(
        self,
        *,
        texts: list[str] | None = None,
        note: str | None = None,
        before: TimeLike = None,
        policy: Policy | str | None = None,
        also_current: bool = False,
        now: TimeLike = None,
    ) -> Purged:
        """Forget on purpose (exactly one of): every occurrence of ``texts`` in every stored revision
        (replaced by ``[purged]``), every revision of the note at ``note``, or every revision no longer
        visible at ``before``, or every revision the retention ``policy`` (``vaultsync.retention``) does not keep
        at ``now`` (default: the current time). See ``vaultsync.store.purge`` for what is recomputed and wiped.

        Text still in a note file, or a note file still on disk, is refused unless ``also_current``
        (the next sync would store it again). The vault's own git history is not rewritten.
        """
        when = purge_cutoff(before)
        rel = note_path(note) if note is not None else None
        chosen = parse_policy(policy) if isinstance(policy, str) else policy
        with self.lock.writing(command="vaultsync purge"):
            check_current(self.root, texts, rel, also_current)
            result = self._store.purge(
                self.id, strings=texts, note=rel, before=when, policy=chosen, now=as_micros(now, "now")
            )
        return Purged.of(result, self.name, GIT_HISTORY_NOT_REWRITTEN if in_git(self.root) else None)

    def retention_preview(self, policy: Policy | str, *, now: TimeLike = None) -> RetentionPreview:
        """What thinning the stored history by the retention ``policy`` (at ``now``, default the current time)
        would remove: batches, revisions, the stored text only they use and its bytes. Changes nothing."""
        chosen = parse_policy(policy) if isinstance(policy, str) else policy
        return self._store.retention_preview(self.id, chosen, as_micros(now, "now"))

    # ------------------------------------------------------------ upkeep

    def stats(self, retention: Policy | str | None = None) -> Stats:
        """Counts of notes, revisions, batches and stored texts, and the database's size; with a retention
        policy, what thinning by it now would free (``retention_preview``)."""
        with self._view() as view:
            found = view.stats()
        preview = None if retention is None else self.retention_preview(retention)
        policy = parse_policy(retention) if isinstance(retention, str) else retention
        return Stats(
            root=str(self.root),
            **found,
            retention=None if preview is None or policy is None else {"policy": policy.text, **preview.to_json()},
        )

    def check(self) -> list[str]:
        """Verify the store; return the problems found (empty when healthy)."""
        with self._view() as view:
            return view.check()


__all__ = ["BatchSummary", "FileProblem", "Note", "Vault", "StoreError", "as_micros"]


def _send(view: View, rev: Revision, sink: Callable[[bytes], object]) -> None:
    """``rev``'s bytes to ``sink``: a note's text as UTF-8, an attachment's stored pieces (StoreError: not kept)."""
    if not is_attachment(rev.path):
        sink(view.content(rev).encode("utf-8"))
        return
    pieces = view.body(rev)
    if pieces is None:
        raise StoreError(
            f"{rev.path} was recorded by hash and size only ({rev.size} bytes, over the attachment size "
            "limit then): its bytes were not kept"
        )
    for piece in pieces:
        sink(piece)

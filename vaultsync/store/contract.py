"""The store's seam, written down: what a storage engine implements for the rest of vaultsync.

Two engines implement it: SQLite (``vaultsync.store.Store`` with ``BatchWriter``, ``View`` and
``WriterLock``) and PostgreSQL (``vaultsync.store.pg``: ``PgStore``, ``PgView``, ``PgWriterLock``); the
contract tests (``tests/store/test_store_contract.py``) run on both. Everything above the store
(``sync``, ``Vault``, the watcher, the server, hardened mode) uses only what is declared here; the tests
check that the SQLite classes match these signatures.

Five parts:

- **batch** (``Engine.batch`` → ``Batch``): one atomic batch of note revisions and deletions at one
  ``known_at``. The engine does all store work for it: it trains its compression (or anything else it
  needs) from the batch's first notes, hands indexers their share of each revision inside the same
  transaction, and lets parse workers do an indexer's pre-work (``ahead``/``take_ahead``). Nothing lands
  unless the whole batch does; a batch that adds nothing leaves no trace.
- **view** (``Engine.view`` → ``ReadView``): one vault as known at a cutoff (and valid at a time), every
  read inside one consistent snapshot: notes, listings, history, changes, links, search, export,
  provenance lookups, stats and checks.
- **upkeep** (``Upkeep``): vaults, the sync bookkeeping a plan needs (live state, file stamps, git
  commits), search upkeep (reindex, reembed), purges, and the hardened audit log heads.
- **lock** (``Engine.writer_lock`` → ``Lock``): one writer per vault across processes, whose holder
  can be named in a message.
- **follow** (``Follow``): a cheap "anything new?" and the batches written after a given one, for
  readers in other processes (the server's change feed).

Search is one rule for both engines (``search.engine.search``); what an engine ranks with is its
``search.engine.Rankers``. Outside the contract, the PostgreSQL engine also reports and drops its server
sessions (``PgView.session``: a view's backend and transaction mode; ``pg.follow.Wakeup.drop_session``: a lost
listening session, for failover hooks and tests): a SQLite store has no server session to report or lose, so
these are not declared for both.

Values crossing the seam are plain: ``Change`` and ``ParsedNote`` in, ``Revision``, ``BatchNews``,
``PurgeRecord``, ``PurgeResult``, ``AuditHead`` and dicts of JSON values out. Times are UTC
microseconds; paths are vault-relative NFC strings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..disk.attachments import Body
from ..parsers import ParsedNote
from ..retention import Policy
from ..search_filter import SearchFilter
from .read import BatchNews, Revision
from .values import AuditHead, PurgeRecord, PurgeResult, RetentionPreview

AheadWork = Callable[[ParsedNote], Any]
"""Work a parse worker may do for an indexer on a parsed note (e.g. embed its chunks): picklable, pure."""


@dataclass(slots=True)
class Change:
    """A note revision to write: a new note, new content at a path, or a note under a new name."""

    path: str
    kind: str
    """"created", "modified" or "renamed"."""
    text: str
    hash: str
    size: int
    mtime_ns: int | None
    live_id: int | None
    """The revision this one replaces at the same path."""
    prev_id: int | None
    """The revision this one follows (for a rename: the old path's)."""
    renamed_from: str | None = None
    body: Body | None = None
    """An attachment's bytes to store (``Batch.store_body``, before its revision); None for a note (its ``text``)."""


# ---------------------------------------------------------------- batch


class Indexer(Protocol):
    """A derived index (keyword, vectors) kept in lock-step with the revision tables, inside the engine.

    ``ahead`` (None: none) is work a parse worker does per note before the writer reaches it; the batch
    hands each result to ``take_ahead``. ``forget_ahead`` is called on every indexer when a batch ends, however it
    ends: it drops what the batch did not use and anything the indexer kept for that batch (a rolled-back batch's
    id is given to the next one).
    """

    ahead: AheadWork | None

    def on_revision(self, con: Any, batch_id: int, note_id: int, chunks: list[Any]) -> None: ...

    def on_end(self, con: Any, batch_id: int, note_id: int) -> None: ...

    def take_ahead(self, payload: Any) -> None: ...

    def forget_ahead(self) -> None: ...


class Batch(Protocol):
    """One open batch (``Engine.batch``): add revisions and deletions; all land when the block ends, or none."""

    batch_id: int | None
    """The batch's id once it has written something (None: nothing yet)."""
    known_at: int
    """When the batch is known: asserted by the caller, or taken as the batch commits (until then a lower bound;
    read it after the block ends)."""
    counts: dict[str, int]
    """How many revisions of each kind ("created", "modified", "renamed", "deleted") it wrote."""

    def add_revision(self, change: Change, parsed: ParsedNote) -> None:
        """Append a revision of ``change.path`` with its parsed facts (chunks, links, validity…)."""
        ...

    def store_body(self, body: Body) -> None:
        """Store an attachment's bytes once by their hash, streamed in pieces (nothing when stored before, or when
        ``body.keep`` is False: its hash and size alone); ``attachments.Changed`` (nothing stored) when they are not
        the bytes hashed."""
        ...

    def add_tombstone(self, path: str, live_id: int, renamed_to: str | None = None) -> int:
        """Record that ``path`` (its live revision ``live_id``) stopped existing, or was renamed to ``renamed_to``
        (returns the tombstone's revision id)."""
        ...

    def set_file_state(self, path: str, size: int, mtime_ns: int, content_hash: str) -> None:
        """Remember the file's size and mtime as last read (what lets the next sync skip it)."""
        ...

    def drop_file_state(self, path: str) -> None: ...

    def record_git_commit(self, sha: str, committed_at: int) -> None:
        """Mark this batch as the import of git commit ``sha`` (``import --from-git`` skips it next time)."""
        ...

    def ahead(self) -> tuple[AheadWork, ...]:
        """The work parse workers may do per note for this batch's indexers (empty: none)."""
        ...

    def take_ahead(self, payloads: Sequence[Any]) -> None:
        """One note's results of ``ahead()``'s work, in order, before its ``add_revision``."""
        ...


# ---------------------------------------------------------------- view


class ReadView(Protocol):
    """One vault as known at ``as_of`` (None: now), valid at ``valid_at``, in one consistent snapshot."""

    vault_id: int
    vault_name: str
    as_of: int | None
    valid_at: int | None
    horizon: int | None
    """History before this time was removed by a retention purge (None: none was)."""

    def at(self, as_of: int | None) -> ReadView: ...

    def upto(self, batch: int) -> ReadView: ...

    def revision(self, path: str) -> Revision | None: ...

    def content(self, revision: Revision) -> str: ...

    def body(self, revision: Revision) -> Iterator[bytes] | None: ...

    def applies(self, revision: Revision | None) -> Revision | None: ...

    def ls(self, prefix: str = "") -> list[Revision]: ...

    def with_links(self, revisions: list[Revision]) -> list[Revision]: ...

    def history(self, path: str) -> list[Revision]: ...

    def history_valid(self, path: str) -> list[Revision]: ...

    def changes(self, since: Any, limit: int | None = None) -> list[Revision]: ...

    def change_counts(self, since: Any) -> dict[str, int]: ...

    def locate(self, keys: Sequence[tuple[str, str, int]]) -> list[int | None]: ...

    def revision_by_id(self, note_id: int) -> Revision | None: ...

    def purges(self) -> list[PurgeRecord]: ...

    def search(
        self,
        query: str,
        *,
        mode: str = ...,
        limit: int = 10,
        filters: SearchFilter | None = None,
    ) -> dict[str, Any]: ...

    def export(self) -> Iterator[dict[str, Any]]: ...

    def stats(self) -> dict[str, Any]: ...

    def check(self) -> list[str]: ...

    def index_problems(self) -> list[str]:
        """The search index behind or inconsistent (part of ``check``; what plain ``reindex`` repairs)."""
        ...


# ---------------------------------------------------------------- lock


class Lock(Protocol):
    """The one-writer-per-vault lock, across processes; ``holder`` names another process holding it."""

    command: str | None

    @property
    def held(self) -> bool: ...

    def acquire(self, command: str | None = None, *, watching: bool = False) -> None: ...

    def alive(self) -> bool:
        """Whether the lock is still held, asking the engine if it can be lost meanwhile (a PostgreSQL session)."""
        ...

    def try_acquire(self, command: str | None = None, *, watching: bool = False) -> bool: ...

    def release(self) -> None: ...

    def holder(self) -> str | None: ...

    def holder_info(self) -> dict[str, object] | None: ...

    def publish(self, facts: dict[str, Any] | None) -> None:
        """The holder's heartbeat, readable by every reader of the store (None: withdrawn); nothing when not held."""
        ...

    def beat(self) -> tuple[dict[str, Any], float] | None:
        """The heartbeat last published for the vault and its age in seconds (None: none was)."""
        ...


# ---------------------------------------------------------------- follow


class Wakeup(Protocol):
    """Something to wait on for other processes' commits (``Follow.wakeup``): an engine that announces them
    (PostgreSQL's NOTIFY) ends the wait early; one that does not (SQLite) waits it out, and the caller
    polls ``data_version`` either way."""

    def wait(self, timeout_s: float, stop: Any = None) -> bool: ...

    def close(self) -> None: ...


class Follow(Protocol):
    """What a reader in another process polls to learn of new batches."""

    def data_version(self) -> int: ...

    def wakeup(self) -> Wakeup: ...

    def last_batch_id(self, vault_id: int) -> int: ...

    def batches_after(self, vault_id: int, batch_id: int, *, limit: int = 1000) -> list[BatchNews]: ...


# ---------------------------------------------------------------- upkeep


class Upkeep(Protocol):
    """Vaults, sync bookkeeping, search upkeep, forgetting and audit heads."""

    def vaults(self) -> list[Any]: ...

    def vault(self, name: str) -> Any | None: ...

    def ensure_vault(self, name: str, root: Path) -> int: ...

    def live_state(self, vault_id: int, paths: Iterable[str] | None = None) -> dict[str, tuple[int, str]]: ...

    def plan_state(
        self, vault_id: int, paths: Iterable[str]
    ) -> tuple[dict[str, tuple[int, str]], dict[str, tuple[int, int, str]]]:
        """``live_state`` and ``file_states`` of ``paths`` in one consistent read."""
        ...

    def live_with_hashes(self, vault_id: int, hashes: Iterable[str]) -> dict[str, tuple[int, str]]: ...

    def live_under(self, vault_id: int, folders: Iterable[str]) -> list[str]: ...

    def live_index(self, vault_id: int) -> dict[str, int]: ...

    def file_states(self, vault_id: int, paths: Iterable[str] | None = None) -> dict[str, tuple[int, int, str]]: ...

    def last_batch(self, vault_id: int) -> tuple[int, str] | None: ...

    def git_commits(self, vault_id: int) -> set[str]: ...

    def vault_device(self, vault_id: int) -> int | None: ...

    def unreachable_s(self) -> float: ...

    def vault_inode(self, vault_id: int) -> int | None: ...

    def set_vault_device(self, vault_id: int, device: int, inode: int | None = None) -> None: ...

    def batch_info(self, vault_id: int, batch_id: int) -> dict[str, Any] | None: ...

    def written_by(self, vault_id: int, batch_id: int) -> list[Revision]: ...

    def batches_by_source(
        self, vault_id: int, source: str | None, caller: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]: ...

    def revision_before(self, vault_id: int, path: str, batch_id: int) -> Revision | None: ...

    def reindex(self, vault_id: int, *, full: bool = False) -> int: ...

    def reembed(self, embedder_name: str) -> tuple[str, int]: ...

    def fill_vectors(
        self,
        vault_id: int,
        *,
        limit: int | None = None,
        writing: Callable[[], AbstractContextManager[Any]] | None = None,
        pause: Callable[[], None] | None = None,
    ) -> int: ...

    def purge(
        self,
        vault_id: int,
        *,
        strings: list[str] | None = None,
        note: str | None = None,
        before: int | None = None,
        policy: Policy | None = None,
        now: int | None = None,
    ) -> PurgeResult: ...

    def retention_preview(self, vault_id: int, policy: Policy, now: int | None = None) -> RetentionPreview: ...

    def horizon(self, vault_id: int) -> int | None: ...

    def purge_count(self, vault_id: int) -> int: ...

    def audit_head(self, *, log_id: str | None = None, path: str | None = None) -> AuditHead | None: ...

    def audit_unwritable(self) -> str | None: ...

    def audit_append(self, log_id: str, path: str, write: Callable[[int, str], str]) -> AuditHead: ...

    def size(self) -> int: ...

    def close(self) -> None: ...


# ---------------------------------------------------------------- the engine


class Engine(Upkeep, Follow, Protocol):
    """A storage engine: one database holding any number of vaults (``readonly``: reads only)."""

    path: str
    readonly: bool

    def batch(
        self,
        vault_id: int,
        *,
        known_at: int | None = None,
        source: str = "import",
        detail: str | None = None,
        caller: str | None = None,
    ) -> AbstractContextManager[Batch]:
        """One atomic batch (``known_at`` None: the moment it commits, strictly after the vault's last batch;
        an explicit time earlier than that batch's is refused). ``source``/``detail`` say where it came from
        (import, watch, git + sha…), ``caller`` whom an MCP tool wrote it for."""
        ...

    def view(
        self, vault_id: int, vault_name: str, *, as_of: int | None = None, valid_at: int | None = None
    ) -> AbstractContextManager[ReadView]: ...

    def writer_lock(self, vault: str) -> Lock: ...


PROTOCOLS: dict[str, type] = {
    "batch": Batch,
    "view": ReadView,
    "lock": Lock,
    "follow": Follow,
    "upkeep": Upkeep,
    "engine": Engine,
    "indexer": Indexer,
    "wakeup": Wakeup,
}
"""Each part of the contract by name (the contract tests check an engine's classes against them)."""

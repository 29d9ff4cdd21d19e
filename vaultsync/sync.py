"""Plan, then write: observed files + live state → a plan; the plan carried out as one atomic batch.

``Plan`` is pure: it decides from observations (``folder``) and the store's live state alone
what is added, modified, renamed, deleted, unchanged or refused, and unit tests build and
inspect it without a database. ``write_plan`` carries a plan out through ``Store.batch``: notes
are read, parsed and written one at a time (in worker processes for a large batch), so memory
does not grow with the batch, and the whole batch is still one transaction.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from .disk.attachments import Body, Changed, body_of, is_attachment, max_attachment_bytes, text_of, too_large
from .disk.digest import content_hash
from .disk.folder import Absent, FileProblem, Observed, Present, Unreadable, decode, observe_file
from .disk.paths import disk_path
from .errors import ParseError
from .parsers import ParsedNote, parse_file
from .store.contract import Batch, Change, Engine
from .store.read import file_stamp
from .times import format_time

logger = logging.getLogger(__name__)

RACY_NS = 2_000_000_000
"""A file modified this recently is re-hashed even when its size and mtime match the cache."""

PARALLEL_MIN_NOTES = 200
"""A batch with at least this many notes to read parses them in worker processes (when allowed)."""

SETTLE_NS = 50_000_000
"""A watcher's batch leaves out a file modified this recently after it was read: it is being written (``Plan``)."""

IN_FLIGHT = 64
"""At most this many notes are handed to parse workers ahead of the writer."""

IN_FLIGHT_CHARS = 8_000_000
"""And at most this much note text (a note larger than that goes alone): what a batch holds at once is
bounded by these, not by the batch's size."""

GROUP = 8
"""Notes handed to a parse worker in one job (one message each way instead of one per note)."""

Progress = Callable[[int, int], None]

Twins = Callable[[str], list[tuple[str, tuple[int, str], bool]]]
"""content hash -> the live notes holding that content: (path, (revision id, hash), whether its file is on disk)."""


def default_workers() -> int:
    """Parse workers for a program that opts in: one per core, at most 4, none on one core."""
    cores = os.cpu_count() or 1
    return min(4, cores) if cores > 1 else 0


class ParsePool:
    """Parse worker processes started when a batch first needs them and kept for the owner's whole run
    (``import --from-git``: one batch per commit), so a large batch does not start new processes that
    import vaultsync again (137 of the Hub's 592 commits are large batches)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def executor(self) -> ProcessPoolExecutor:
        if self._pool is not None and getattr(self._pool, "_broken", False):  # a worker died: start afresh
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        if self._pool is None:
            self._pool = _start_pool(self.workers)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _start_pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_exit_with_parent,
        initargs=(os.getpid(),),
    )


@dataclass
class BatchSummary:
    """What one sync did."""

    vault: str
    batch_id: int | None = None
    known_at: int | None = None
    added: int = 0
    modified: int = 0
    renamed: int = 0
    deleted: int = 0
    unchanged: int = 0
    errors: list[FileProblem] = field(default_factory=list)
    warnings: list[FileProblem] = field(default_factory=list)
    """Notes stored with a warning (e.g. broken YAML frontmatter kept as text)."""
    lifted: int = 0
    seconds: float = 0.0
    paths: list[str] = field(default_factory=list)
    """Vault-relative paths whose revision this batch wrote (renames: old and new path)."""
    held: list[str] = field(default_factory=list)
    """Paths left for a later batch (a watcher's flush holds an unpaired deletion one window: see ``Plan``)."""
    unsettled: list[str] = field(default_factory=list)
    """Files left out because they were being written when read (``Plan``'s ``settle``): due again soon."""
    first_mtime_ns: int | None = None
    """The earliest modification time of a file this batch recorded (information: never evidence of knowledge
    time; the watcher's delay from a burst's first change starts here when it falls inside the burst)."""
    delay_ms: float | None = None
    """Set by the watcher: from the burst's first change to this batch's commit (its ``known_at``)."""

    @property
    def changed(self) -> int:
        return self.added + self.modified + self.renamed + self.deleted

    def to_json(self) -> dict[str, Any]:
        return {
            "vault": self.vault,
            "batch_id": self.batch_id,
            "known_at": format_time(self.known_at),
            "added": self.added,
            "modified": self.modified,
            "renamed": self.renamed,
            "deleted": self.deleted,
            "unchanged": self.unchanged,
            "errors": [{"path": e.path, "reason": e.reason} for e in self.errors],
            "warnings": [{"path": w.path, "reason": w.reason} for w in self.warnings],
            "seconds": round(self.seconds, 3),
            **({} if self.delay_ms is None else {"delay_ms": round(self.delay_ms)}),
        }

    def state(self) -> dict[str, Any]:
        """Every field, as JSON: what a write request's answer carries back to the process that asked
        (``from_state`` makes the same summary of it there)."""
        state: dict[str, Any] = _summary_adapter().dump_python(self, mode="json")
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> BatchSummary:
        """The summary whose ``state()`` this is."""
        summary: BatchSummary = _summary_adapter().validate_python(state)
        return summary

    def merge(self, other: BatchSummary) -> None:
        for name in ("added", "modified", "renamed", "deleted", "lifted"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.unchanged = other.unchanged
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)
        self.seconds += other.seconds
        if other.first_mtime_ns is not None:
            self.first_mtime_ns = min(self.first_mtime_ns or other.first_mtime_ns, other.first_mtime_ns)
        if other.batch_id is not None:
            self.batch_id, self.known_at = other.batch_id, other.known_at
            self.paths.extend(other.paths)


@functools.cache
def _summary_adapter() -> TypeAdapter[BatchSummary]:
    """Dumps and loads a ``BatchSummary`` field by field (built on first use: most processes never hand one over)."""
    return TypeAdapter(BatchSummary)


# ---------------------------------------------------------------- planning (pure)


class Plan:
    """What a set of observations means for the store, given the live state.

    ``live`` is path → (revision id, content hash) of the notes that exist now; ``states`` is
    path → (size, mtime_ns, content hash) as last read from disk; ``full`` says the observations
    are the whole vault (a live note not observed was deleted). Deletions, refusals and the
    notes to read are known at once; ``changes()`` then reads each of those once, in path order,
    and yields what to write, deciding unchanged notes and renames as it goes.

    A move can reach a partial sync in halves. ``twins`` finds the other half of a created note: a
    live note outside the observations with its content whose file is gone joins the plan as a
    deletion, and the note is its rename. ``hold`` (a watcher's) may leave for a later batch
    (``held``) a deletion no add joined and a copy of a live note still on disk; what it holds back holds back the
    whole batch. With ``settle`` (a watcher's) a file still being written (modified less than ``SETTLE_NS``
    before the batch began) holds back the whole batch (``unsettled``: every path of it) while ``hold`` lets it
    wait, and one written again while the batch read it (not the size read) is left out: a note rewritten
    continuously is recorded once it rests, never as a state it only passed through (an emptied file mid-save),
    and as read once it waited the longest a hold may last.
    """

    def __init__(
        self,
        observed: Mapping[str, Observed],
        live: Mapping[str, tuple[int, str]],
        states: Mapping[str, tuple[int, int, str]],
        *,
        full: bool = False,
        errors: Iterable[FileProblem] = (),
        now_ns: int | None = None,
        unchanged: int = 0,
        twins: Twins | None = None,
        hold: Callable[[str], bool] | None = None,
        settle: bool = False,
    ) -> None:
        self.live = dict(live)
        self._settle = settle and hold is not None
        self._may_wait = hold
        self._now_ns = now_ns
        self.unsettled: list[str] = []
        """Files left out of this batch because they were being written when read (``settle``)."""
        self._twins = twins
        self._hold = hold
        self.held: list[str] = []
        """Paths left out of this batch for one window (``hold``): an unpaired deletion, a copy of a live note."""
        self.refused: list[FileProblem] = list(errors)
        self.unchanged = unchanged
        """Notes found unchanged (``unchanged`` counts those already left out of ``observed``)."""
        self.state_updates: list[tuple[str, int, int, str]] = []
        """Files found unchanged by hash whose size or mtime moved: remembered so the next sync skips them."""
        self.renames: dict[str, str] = {}
        """Old path → new path, filled as ``changes()`` finds them."""
        now = time.time_ns() if now_ns is None else now_ns
        self.to_read: list[tuple[str, Present]] = []
        gone: list[str] = []
        for path in sorted(observed):
            obs = observed[path]
            live_rev = live.get(path)
            if isinstance(obs, Unreadable):
                continue
            if isinstance(obs, Absent):
                if live_rev is not None:
                    gone.append(path)
                continue
            cached = states.get(path)
            if (
                live_rev is not None
                and cached is not None
                and obs.mtime_ns is not None
                and cached[:2] == (obs.size, obs.mtime_ns)
                and cached[2] == live_rev[1]
                and now - obs.mtime_ns > RACY_NS
            ):
                self.unchanged += 1
                continue
            self.to_read.append((path, obs))
        if full:
            gone.extend(p for p in live if p not in observed)
        refused = {e.path for e in self.refused}
        # a folder that could not be listed hides its notes; they are not deleted ("." is the vault itself)
        unlisted = ("",) if "." in refused else tuple(p + "/" for p in refused)
        self.deletions = sorted(p for p in set(gone) if p not in refused and not p.startswith(unlisted))
        """Live paths that no longer exist (renamed ones included: see ``renames``)."""
        self._by_hash: dict[str, list[str]] = {}
        for path in self.deletions:
            self._by_hash.setdefault(live[path][1], []).append(path)

    @property
    def size(self) -> int:
        """The notes to read plus the deletions: what progress counts to."""
        return len(self.to_read) + len(self.deletions)

    def changes(self) -> Iterator[Change]:
        """Read each candidate once, in path order; yield the revisions to write (call once).

        With ``hold``, what it holds back holds back the whole batch: when a deletion no add joins, or a copy of a
        note still on disk, may wait, nothing is written and every path of the batch is ``held`` (a batch is a state
        that existed: the adds of a burst are never recorded without its deletions)."""
        if self._settle and self._resting_soon():
            # a file still being written holds back its whole batch too: a burst (a folder moved in, a checkout) is
            # never recorded in part because one of its files was written a moment ago
            self.unsettled = sorted({*self.deletions, *(path for path, _ in self.to_read)})
            self.to_read, self.deletions, self._by_hash = [], [], {}
            return
        if self._hold is not None:
            waiting = self._foreseen_holds()
            if waiting:
                self.held = sorted({*self.deletions, *(path for path, _ in self.to_read)})
                self.to_read, self.deletions, self._by_hash = [], [], {}
                return
            self._hold = None  # decided: this batch holds nothing back
        for path, obs in self.to_read:
            live_rev = self.live.get(path)
            body: Body | None = None
            try:
                if is_attachment(path):  # hashed in pieces, never read whole; stored as the batch writes it
                    body = body_of(obs)
                    data, digest, size = b"", body.hash, body.size
                    text = text_of(path, body) if live_rev is None or live_rev[1] != digest else ""
                else:
                    data = obs.read()
                    digest, size = content_hash(data), len(data)
                if live_rev is not None and live_rev[1] == digest:
                    self.unchanged += 1
                    if obs.mtime_ns is not None:
                        self.state_updates.append((path, size, obs.mtime_ns, digest))
                    continue
                if (
                    self._settle
                    and not _settled(obs, size, self._now_ns)
                    and not self._moved_here(path, live_rev, digest)
                    and (self._may_wait is None or self._may_wait(path))
                ):
                    self.unsettled.append(path)
                    continue
                if body is None:
                    text = decode(data)
            except ParseError as exc:
                self.refused.append(FileProblem(path, str(exc)))
                continue
            except Changed as exc:
                self.refused.append(FileProblem(path, f"{exc}; recorded when it rests"))
                continue
            except OSError as exc:
                self.refused.append(FileProblem(path, f"cannot read: {exc.strerror}"))
                continue
            change = Change(
                path,
                "modified" if live_rev else "created",
                text,
                digest,
                size,
                obs.mtime_ns,
                live_id=live_rev[0] if live_rev else None,
                prev_id=live_rev[0] if live_rev else None,
                body=body,
            )
            candidates = self._by_hash.get(digest)
            if live_rev is None and not candidates and self._twins is not None:
                candidates = self._gone_twin(path, digest)
                if candidates is None:  # a copy of a note that is still there: maybe the first half of a move
                    continue
            if live_rev is None and candidates:
                old = candidates.pop(0)
                change.kind, change.renamed_from, change.prev_id = "renamed", old, self.live[old][0]
                self.renames[old] = path
            yield change

    def _moved_here(self, path: str, live_rev: tuple[int, str] | None, digest: str) -> bool:
        """Whether a new file holds, whole, the content of a note whose file is gone: the far end of a move, recorded
        with it even while its file is fresh (a rename is never split into a deletion and a later creation)."""
        if live_rev is not None:
            return False
        if digest in self._by_hash:
            return True
        return self._twins is not None and any(
            not present for old, _, present in self._twins(digest) if old not in self.live and old != path
        )

    def _resting_soon(self) -> bool:
        """Whether a file to read was written so recently (``SETTLE_NS``) that it may still be being written, and may
        wait for it (``hold``): looked at before anything is read, so that the batch waits whole."""
        now_ns = time.time_ns() if self._now_ns is None else self._now_ns
        for path, obs in self.to_read:
            if obs.fs_path is None:
                continue
            try:
                age = now_ns - os.lstat(obs.fs_path).st_mtime_ns
            except OSError:
                continue  # gone since: its read says so
            if 0 <= age < SETTLE_NS and (self._may_wait is None or self._may_wait(path)):
                return True
        return False

    def _foreseen_holds(self) -> list[str]:
        """What ``hold`` would hold back, found before anything is written: the deletions no created note's content
        joins and the created notes that copy a live note still on disk (their files read once more: cheap next to
        writing them), each as far as ``hold`` allows."""
        assert self._hold is not None
        created: dict[str, int] = {}
        copies: list[str] = []
        for path, obs in self.to_read:
            if path in self.live:
                continue
            try:
                digest = body_of(obs).hash if is_attachment(path) else content_hash(obs.read())
            except (OSError, ParseError):
                continue  # the batch names it
            if digest in self._by_hash:
                created[digest] = created.get(digest, 0) + 1
                continue
            if self._twins is not None:
                twins = [present for old, _, present in self._twins(digest) if old not in self.live and old != path]
                if twins and all(twins):
                    copies.append(path)
        unpaired: list[str] = []
        for digest, paths in self._by_hash.items():
            unpaired.extend(paths[created.get(digest, 0) :])
        return [path for path in sorted({*unpaired, *copies}) if self._hold(path)]

    def _gone_twin(self, path: str, digest: str) -> list[str] | None:
        """A created note's content found in live notes outside the batch (``twins``): those whose file is
        gone join the batch as deletions (renamed to ``path``); None when only copies still on disk were
        found and ``hold`` holds ``path`` back (a copy-then-delete's copy), else [] (a created note)."""
        assert self._twins is not None
        gone, kept = [], False
        for old, rev, present in self._twins(digest):
            if old in self.live or old == path:
                continue
            if present:
                kept = True
                continue
            self.live[old] = rev
            self.deletions.append(old)
            gone.append(old)
        if gone:
            self._by_hash.setdefault(digest, []).extend(gone)
            return self._by_hash[digest]
        if kept and self._hold is not None and self._hold(path):
            self.held.append(path)
            return None
        return []


def _settled(obs: Present, size: int, now_ns: int | None = None) -> bool:
    """Whether a file read as ``size`` bytes rested then: no write since the read ended, none just before it (a
    file's time stamp may lag a write by a clock tick), and the size read its size. A time stamp in the future
    (another machine's clock) cannot tell, and passes."""
    if obs.fs_path is None:
        return True  # given bytes (git blobs), not a file being written
    try:
        st = os.lstat(obs.fs_path)
    except OSError:
        return False  # gone or replaced since: a later batch sees what is there
    age = (time.time_ns() if now_ns is None else now_ns) - st.st_mtime_ns
    return st.st_size == size and not 0 <= age < SETTLE_NS


def twins_on_disk(everything: Mapping[str, tuple[int, str]], observed: Mapping[str, Observed], root: Path) -> Twins:
    """``Plan``'s ``twins`` for a partial sync: content hash -> the live notes of ``everything`` (those with the
    content of a file the batch may create: ``Store.live_with_hashes``) outside ``observed``, each with whether its
    file is still on disk (looked at when asked: only for notes the batch creates)."""
    by_hash: dict[str, list[tuple[str, tuple[int, str]]]] = {}
    for path, rev in everything.items():
        if path not in observed:
            by_hash.setdefault(rev[1], []).append((path, rev))
    where = str(root)

    def twins(digest: str) -> list[tuple[str, tuple[int, str], bool]]:
        return [
            (path, rev, not isinstance(observe_file(where, disk_path(root, path)), Absent))
            for path, rev in by_hash.get(digest, ())
        ]

    return twins


class LiveIndex:
    """A full scan's view of the live state: path → file stamp (``Store.live_index``), consumed as it goes.

    ``keep`` is the scan's filter: each file found is struck off, and one whose size and mtime
    are those last read of its live revision (and not racy) is counted unchanged and left out,
    so a no-change scan holds nothing per file but this index. What is left after the scan is
    the live notes the scan did not see.
    """

    def __init__(self, stamps: dict[str, int], now_ns: int | None = None) -> None:
        self.stamps = stamps
        self.unchanged = 0
        self.now = time.time_ns() if now_ns is None else now_ns

    def keep(self, path: str, obs: Observed) -> bool:
        stamp = self.stamps.pop(path, None)
        if (
            stamp is not None
            and isinstance(obs, Present)
            and obs.mtime_ns is not None
            and stamp == file_stamp(obs.size, obs.mtime_ns)
            and self.now - obs.mtime_ns > RACY_NS
        ):
            self.unchanged += 1
            return False
        return True

    def unseen(self) -> dict[str, Observed]:
        """The live notes the scan did not find, as absent observations."""
        return dict.fromkeys(self.stamps, Absent())


# ---------------------------------------------------------------- carrying a plan out


def write_plan(
    store: Engine,
    vault_id: int,
    vault_name: str,
    plan: Plan,
    *,
    known_at: int | None = None,
    source: str = "import",
    detail: str | None = None,
    caller: str | None = None,
    strict: bool = False,
    workers: int | ParsePool = 0,
    progress: Progress | None = None,
    on_write: Callable[[Batch], None] | None = None,
) -> BatchSummary:
    """Carry ``plan`` out as one atomic batch (nothing is written when nothing changed).

    ``strict`` refuses the whole batch when any file is refused or stored with a warning;
    ``workers`` > 0 parses a large batch in that many worker processes (a ``ParsePool``: in its
    processes, kept from one batch to the next); ``on_write`` adds to the
    batch before it ends (the git commit it imports).
    """
    started = time.perf_counter()
    summary = BatchSummary(vault=vault_name)
    if strict and plan.refused:
        raise ParseError("refusing the whole batch (strict): " + "; ".join(map(str, plan.refused)))
    progress = progress or (lambda done, total: None)
    written: list[str] = []
    with (
        contextlib.ExitStack() as stack,
        store.batch(vault_id, known_at=known_at, source=source, detail=detail, caller=caller) as writer,
    ):
        pool = workers if isinstance(workers, ParsePool) else stack.enter_context(ParsePool(workers))
        parallel = pool.workers > 0 and len(plan.to_read) >= PARALLEL_MIN_NOTES
        for change, parsed in parse_stream(plan.changes(), writer, pool if parallel else None):
            if change.body is not None and not _stored(writer, change, plan, summary):
                continue
            summary.warnings.extend(
                FileProblem(change.path, w, change.hash, renamed=change.kind == "renamed") for w in parsed.warnings
            )
            if strict and parsed.warnings:  # raising here rolls the whole transaction back
                raise ParseError(f"refusing the whole batch (strict): {change.path}: {parsed.warnings[0]}")
            writer.add_revision(change, parsed)
            if change.mtime_ns is not None:
                writer.set_file_state(change.path, change.size, change.mtime_ns, change.hash)
                summary.first_mtime_ns = min(summary.first_mtime_ns or change.mtime_ns, change.mtime_ns)
            written.append(change.path)
            progress(len(written), plan.size)
        if strict and plan.refused:
            raise ParseError("refusing the whole batch (strict): " + "; ".join(map(str, plan.refused)))
        for path in plan.deletions:
            writer.add_tombstone(path, plan.live[path][0], renamed_to=plan.renames.get(path))
            writer.drop_file_state(path)
            written.append(path)
            progress(len(written), plan.size)
        for update in plan.state_updates:
            writer.set_file_state(*update)
        if on_write is not None:
            on_write(writer)
    return _summary(summary, plan, writer, written, started)


def _stored(writer: Batch, change: Change, plan: Plan, summary: BatchSummary) -> bool:
    """Store an attachment's bytes before its revision: False (the file named in ``plan.refused``, a later batch
    records it) when they changed while they were stored or can no longer be read. One over the size limit is
    recorded by hash and size alone, with a warning."""
    assert change.body is not None
    try:
        writer.store_body(change.body)
    except Changed as exc:
        plan.refused.append(FileProblem(change.path, f"{exc}; recorded when it rests"))
        return False
    except ParseError as exc:
        plan.refused.append(FileProblem(change.path, str(exc)))
        return False
    except OSError as exc:
        plan.refused.append(FileProblem(change.path, f"cannot read: {exc.strerror}"))
        return False
    if not change.body.keep:
        summary.warnings.append(FileProblem(change.path, too_large(change.size, max_attachment_bytes()), change.hash))
    return True


def _summary(summary: BatchSummary, plan: Plan, writer: Batch, written: list[str], started: float) -> BatchSummary:
    summary.errors = list(plan.refused)
    summary.held = list(plan.held)
    summary.unsettled = list(plan.unsettled)
    summary.unchanged = plan.unchanged
    summary.paths = sorted(set(written)) if writer.batch_id is not None else []
    summary.batch_id = writer.batch_id
    summary.known_at = writer.known_at if writer.batch_id is not None else None
    summary.added = writer.counts["created"]
    summary.modified = writer.counts["modified"]
    summary.renamed = writer.counts["renamed"]
    summary.deleted = writer.counts["deleted"]
    summary.seconds = time.perf_counter() - started
    return summary


def parse_stream(
    changes: Iterator[Change], writer: Batch, workers: ParsePool | None
) -> Iterator[tuple[Change, ParsedNote]]:
    """Each change with its parsed note, in order.

    With ``workers`` the notes parse in its worker processes, ``GROUP`` notes a job, at most ``IN_FLIGHT``
    notes (and ``IN_FLIGHT_CHARS`` of text) ahead of the writer; a worker also does the batch's ``ahead``
    work (e.g. embedding), handed back to the batch's ``take_ahead``. Without, they parse in line.
    """
    if workers is None or workers.workers < 1:
        for change in changes:
            yield change, parse_file(change.text, change.path)
        return
    pool = workers.executor()
    work = writer.ahead()
    pending: Pending = deque()
    try:
        group: list[Change] = []
        for change in changes:
            if group and sum(len(c.text) for c in group) + len(change.text) > IN_FLIGHT_CHARS // 4:
                yield from _submit(pool, pending, group, work, writer)
                group = []
            group.append(change)
            if len(group) == GROUP:
                yield from _submit(pool, pending, group, work, writer)
                group = []
        if group:
            yield from _submit(pool, pending, group, work, writer)
        while pending:
            yield from _take(pending, writer)
    finally:  # a batch that ends early (refused, failed) leaves no work behind in a kept pool
        for _, future in pending:
            future.cancel()


Pending = deque[tuple[list[Change], Future[list[tuple[ParsedNote, list[Any]]]]]]


def _submit(
    pool: ProcessPoolExecutor, pending: Pending, group: list[Change], work: Any, writer: Batch
) -> Iterator[tuple[Change, ParsedNote]]:
    """Hand ``group`` to the workers once what is in flight leaves room for it (what is taken meanwhile is
    yielded): at most ``IN_FLIGHT`` notes and ``IN_FLIGHT_CHARS`` of text, or the group alone."""
    size = sum(len(c.text) for c in group)
    while pending and (
        (len(pending) + 1) * GROUP > IN_FLIGHT
        or sum(len(c.text) for g, _ in pending for c in g) + size > IN_FLIGHT_CHARS
    ):
        yield from _take(pending, writer)
    pending.append((group, pool.submit(_parse, [(c.text, c.path) for c in group], work)))


def _take(
    pending: deque[tuple[list[Change], Future[list[tuple[ParsedNote, list[Any]]]]]], writer: Batch
) -> Iterator[tuple[Change, ParsedNote]]:
    group, future = pending.popleft()
    for change, (parsed, payloads) in zip(group, future.result()):
        writer.take_ahead(payloads)
        yield change, parsed


def _parse(
    notes: list[tuple[str, str]], ahead: tuple[Callable[[ParsedNote], Any], ...]
) -> list[tuple[ParsedNote, list[Any]]]:
    out = []
    for text, path in notes:
        parsed = parse_file(text, path)
        out.append((parsed, [work(parsed) for work in ahead]))
    return out


def _exit_with_parent(parent: int) -> None:
    """In a worker: end when the process that started it is gone (killed with -9, say)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()

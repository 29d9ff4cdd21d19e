"""Scan, plan, batch: the single path from "these paths may have changed" to one atomic batch."""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import logging
import multiprocessing
import os
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError, ParseError
from .parsers import ParsedNote, parse_note
from .store import Store
from .store import read as q
from .store.write import BatchWriter
from .times import format_time, now_micros, parse_time

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 5 * 1024 * 1024
"""Files larger than this are not read as notes."""

RACY_NS = 2_000_000_000
"""A file modified this recently is re-hashed even when its size and mtime match the cache."""

Progress = Callable[[int, int], None]


def is_note_path(rel: str) -> bool:
    """A Markdown file that Obsidian would index: ``.md``, no dot-file or dot-folder on the way."""
    return rel.endswith(".md") and not any(part.startswith(".") or part == "" for part in rel.split("/"))


def nfc(rel: str) -> str:
    return unicodedata.normalize("NFC", rel)


@dataclass(slots=True)
class Present:
    """A file as found on disk (content read lazily) or as given (git blobs)."""

    size: int
    mtime_ns: int | None = None
    fs_path: str | None = None
    data: bytes | None = None

    def read(self) -> bytes:
        if self.data is None:
            assert self.fs_path is not None
            with open(self.fs_path, "rb") as handle:
                self.data = handle.read(MAX_FILE_BYTES + 1)
        return self.data


@dataclass(slots=True)
class Absent:
    """The path does not exist (any more)."""


@dataclass(slots=True)
class Unreadable:
    """The path exists but cannot be taken as a note."""

    reason: str


Observed = Present | Absent | Unreadable


@dataclass
class FileError:
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


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
    errors: list[FileError] = field(default_factory=list)
    warnings: list[FileError] = field(default_factory=list)
    """Notes stored with a warning (e.g. broken YAML frontmatter kept as text)."""
    lifted: int = 0
    seconds: float = 0.0
    paths: list[str] = field(default_factory=list)
    """Vault-relative paths whose revision this batch wrote (renames: old and new path)."""

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
        }

    def merge(self, other: BatchSummary) -> None:
        for name in ("added", "modified", "renamed", "deleted", "lifted"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.unchanged = other.unchanged
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)
        self.seconds += other.seconds
        if other.batch_id is not None:
            self.batch_id, self.known_at = other.batch_id, other.known_at
            self.paths.extend(other.paths)


# ---------------------------------------------------------------- scanning the disk


def scan(root: Path, under: str = "") -> tuple[dict[str, Observed], list[FileError]]:
    """Every note file below ``root`` (or below the folder ``under``), by NFC vault-relative path.

    Dot-folders and dot-files are skipped, symlinked folders are not entered, and a symlinked
    file counts only when it resolves inside the vault.
    """
    found: dict[str, Observed] = {}
    errors: list[FileError] = []
    real_root = os.path.realpath(root)
    start = os.path.join(root, under) if under else str(root)
    stack = [start]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            errors.append(FileError(_rel(root, folder) or ".", f"cannot list folder: {exc.strerror}"))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
            except OSError:
                continue
            if not entry.name.endswith(".md"):
                continue
            rel = nfc(_rel(root, entry.path))
            found[rel] = observe_file(root, real_root, entry.path)
            if isinstance(found[rel], Unreadable):
                errors.append(FileError(rel, found[rel].reason))  # type: ignore[union-attr]
    return found, errors


def _rel(root: Path, path: str) -> str:
    return os.path.relpath(path, root).replace(os.sep, "/")


def disk_path(root: Path, rel: str) -> str:
    """The file system path of an NFC vault-relative path, whatever normalization its names have on disk.

    A file named in NFD (as macOS writes them) is stored under its NFC path; on file systems that
    keep names as bytes the NFC path does not open it, so each missing part is matched by its NFC form.
    """
    direct = os.path.join(root, rel)
    if rel.isascii() or os.path.lexists(direct):
        return direct
    current = str(root)
    for part in rel.split("/"):
        candidate = os.path.join(current, part)
        if not os.path.lexists(candidate):
            try:
                with os.scandir(current) as entries:
                    candidate = next((e.path for e in entries if nfc(e.name) == part), candidate)
            except OSError:
                pass
        current = candidate
    return current


def observe_file(root: Path, real_root: str, fs_path: str) -> Observed:
    """Stat one file: Present, Absent, or Unreadable with the reason."""
    try:
        if os.path.islink(fs_path):
            target = os.path.realpath(fs_path)
            if os.path.commonpath([real_root, target]) != real_root:
                return Unreadable(f"symlink points outside the vault ({target})")
        st = os.stat(fs_path)
    except FileNotFoundError:
        return Absent()
    except OSError as exc:
        return Unreadable(f"cannot read: {exc.strerror}")
    if not os.path.isfile(fs_path):
        return Absent()
    if st.st_size > MAX_FILE_BYTES:
        return Unreadable(f"file is {st.st_size / 1e6:.1f} MB, over the {MAX_FILE_BYTES // 2**20} MB limit for a note")
    return Present(size=st.st_size, mtime_ns=st.st_mtime_ns, fs_path=fs_path)


def observe_paths(root: Path, paths: Iterable[str], live: Iterable[str]) -> tuple[dict[str, Observed], list[FileError]]:
    """Observe exactly the given vault-relative paths; a folder stands for everything under it."""
    real_root = os.path.realpath(root)
    live_paths = sorted(live)
    observed: dict[str, Observed] = {}
    errors: list[FileError] = []
    for raw in paths:
        rel = nfc(raw.replace(os.sep, "/").strip("/"))
        if rel in ("", ".") or rel.startswith("../"):
            continue
        fs_path = disk_path(root, rel)
        if os.path.isdir(fs_path) and not os.path.islink(fs_path):
            if not any(p.startswith(".") for p in rel.split("/")):
                sub, sub_errors = scan(root, _rel(root, fs_path))
                observed.update(sub)
                errors.extend(sub_errors)
        elif is_note_path(rel):
            obs = observe_file(root, real_root, fs_path)
            observed[rel] = obs
            if isinstance(obs, Unreadable):
                errors.append(FileError(rel, obs.reason))
        # whatever is gone, every live note under a vanished folder is gone too
        prefix = rel + "/"
        at = bisect.bisect_left(live_paths, prefix)  # live_paths is sorted: those under prefix are contiguous
        while at < len(live_paths) and live_paths[at].startswith(prefix):
            path = live_paths[at]
            at += 1
            if path not in observed:
                observed[path] = observe_file(root, real_root, disk_path(root, path))
    return observed, errors


# ---------------------------------------------------------------- planning and writing


def decode(path: str, data: bytes) -> str:
    """The note text, or ParseError naming what is wrong with the bytes."""
    if len(data) > MAX_FILE_BYTES:
        raise ParseError(f"{path}: over the {MAX_FILE_BYTES // 2**20} MB limit for a note")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ParseError(f"{path}: contains NUL bytes (binary file?), first at byte {nul}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(f"{path}: invalid UTF-8 at byte {exc.start}") from None


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _validity(frontmatter: Mapping[str, Any] | None, warnings: list[str]) -> tuple[int | None, int | None]:
    out: list[int | None] = []
    for key in ("valid_from", "valid_to"):
        value = (frontmatter or {}).get(key)
        if value in (None, ""):
            out.append(None)
            continue
        try:
            out.append(parse_time(str(value), key))
        except ConfigError as exc:
            warnings.append(str(exc))
            out.append(None)
    return out[0], out[1]


@dataclass
class _Change:
    path: str
    kind: str
    text: str
    hash: str
    obs: Present
    live_id: int | None = None
    prev_id: int | None = None
    renamed_from: str | None = None


PARALLEL_MIN_NOTES = 200
"""A batch with at least this many notes to parse parses them in worker processes."""

parallel_workers = 0
"""Worker processes for large batches; 0 parses in line. Programs opt in (the CLI does, with
``enable_parallel_parsing``) because workers are started with "spawn", which re-imports the
main module: only safe where it is guarded by ``if __name__ == "__main__"``."""


def enable_parallel_parsing(workers: int | None = None) -> None:
    global parallel_workers
    cores = os.cpu_count() or 1
    parallel_workers = workers if workers is not None else (min(4, cores) if cores > 1 else 0)


def parse_all(changes: list[_Change], stack: contextlib.ExitStack, indexers: list[Any]) -> Iterator[ParsedNote]:
    """Parsed notes in the order of ``changes``.

    Large batches (an import, a git checkout) parse in worker processes while this process
    writes and indexes what is already parsed; small ones (the watcher's) parse in line. A
    worker also does each indexer's ``ahead`` work (e.g. embedding), handed to ``take_ahead``.
    """
    workers = parallel_workers
    if len(changes) < PARALLEL_MIN_NOTES or workers < 1:
        return (parse_note(c.text, c.path) for c in changes)
    pool = stack.enter_context(
        ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                            initializer=_exit_with_parent, initargs=(os.getpid(),))
    )
    ahead = [ix for ix in indexers if getattr(ix, "ahead", None) is not None]
    for indexer in ahead:
        stack.callback(indexer.forget_ahead)  # whatever the batch did not use
    jobs = [(c.text, c.path, tuple(ix.ahead for ix in ahead)) for c in changes]

    def results() -> Iterator[ParsedNote]:
        for parsed, payloads in pool.map(_parse, jobs, chunksize=16):
            for indexer, payload in zip(ahead, payloads):
                indexer.take_ahead(payload)
            yield parsed

    return results()


def _parse(job: tuple[str, str, tuple[Callable[[ParsedNote], Any], ...]]) -> tuple[ParsedNote, list[Any]]:
    text, path, ahead = job
    parsed = parse_note(text, path)
    return parsed, [work(parsed) for work in ahead]


def _exit_with_parent(parent: int) -> None:
    """In a worker: end when the process that started it is gone (killed with -9, say)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def apply(
    store: Store,
    vault_id: int,
    vault_name: str,
    observed: Mapping[str, Observed],
    *,
    live: Mapping[str, tuple[int, str]],
    known_at: int | None = None,
    source: str = "import",
    detail: str | None = None,
    strict: bool = False,
    errors: list[FileError] | None = None,
    progress: Progress | None = None,
    full: bool = False,
    on_write: Callable[[BatchWriter], None] | None = None,
) -> BatchSummary:
    """Turn observations into one atomic batch. ``live`` is path → (revision id, hash) now.

    With ``full`` every live path missing from ``observed`` counts as deleted.
    """
    started = time.perf_counter()
    last = store.last_known_at(vault_id)
    if known_at is None:
        known_at = now_micros()
        if last is not None and known_at < last:
            known_at = last  # the wall clock went backwards: keep batch times monotonic
    elif last is not None and known_at < last:
        raise ConfigError(
            f"--known-at {format_time(known_at)} is earlier than the vault's last batch at {format_time(last)}"
        )

    summary = BatchSummary(vault=vault_name, errors=list(errors or []))
    with store.db.atomic() as con:  # the connection's lock: other threads may read through the same store
        states = q.file_states(con, vault_id)
    now_ns = time.time_ns()
    changes: list[_Change] = []
    gone: list[str] = []
    state_updates: list[tuple[str, int, int, str]] = []
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
        if (live_rev is not None and cached is not None and obs.mtime_ns is not None
                and cached[:2] == (obs.size, obs.mtime_ns) and cached[2] == live_rev[1]
                and now_ns - obs.mtime_ns > RACY_NS):
            summary.unchanged += 1
            continue
        try:
            data = obs.read()
            digest = content_hash(data)
            if live_rev is not None and live_rev[1] == digest:
                summary.unchanged += 1
                if obs.mtime_ns is not None:
                    state_updates.append((path, len(data), obs.mtime_ns, digest))
                continue
            text = decode(path, data)
        except ParseError as exc:
            summary.errors.append(FileError(path, str(exc).split(": ", 1)[1]))
            continue
        except OSError as exc:
            summary.errors.append(FileError(path, f"cannot read: {exc.strerror}"))
            continue
        kind = "modified" if live_rev is not None else "created"
        changes.append(_Change(path, kind, text, digest, obs, live_id=live_rev[0] if live_rev else None,
                               prev_id=live_rev[0] if live_rev else None))
    if full:
        gone.extend(p for p in live if p not in observed)
    error_paths = {e.path for e in summary.errors}
    # a folder that could not be listed hides its notes; they are not deleted ("." is the vault itself)
    unlisted = ("",) if "." in error_paths else tuple(p + "/" for p in error_paths)
    gone = sorted(p for p in set(gone) if p not in error_paths and not p.startswith(unlisted))

    # a path that disappeared and a new path with the same content in one batch: a rename
    by_hash: dict[str, list[str]] = {}
    for path in gone:
        by_hash.setdefault(live[path][1], []).append(path)
    renamed_away: dict[str, str] = {}
    for change in changes:
        candidates = by_hash.get(change.hash)
        if change.kind == "created" and candidates:
            old = candidates.pop(0)
            change.kind, change.renamed_from, change.prev_id = "renamed", old, live[old][0]
            renamed_away[old] = change.path

    if strict and summary.errors:
        raise ParseError("refusing the whole batch (--strict): " + "; ".join(map(str, summary.errors)))

    total = len(changes) + len(gone)
    with contextlib.ExitStack() as stack, store.db.atomic() as con:
        parsed_notes = parse_all(changes, stack, store.indexers)
        writer = BatchWriter(con, vault_id, known_at, source, detail, store.indexers)
        writer.prepare_dictionary([c.text for c in changes])
        done = 0
        for change, parsed in zip(changes, parsed_notes):
            warnings = list(parsed.warnings)
            valid_from, valid_to = _validity(parsed.frontmatter, warnings)
            parsed.warnings = tuple(warnings)
            summary.warnings.extend(FileError(change.path, w) for w in warnings)
            if strict and warnings:  # raising here rolls the whole transaction back
                raise ParseError(f"refusing the whole batch (--strict): {change.path}: {warnings[0]}")
            writer.add_revision(
                change.path, change.kind, parsed, change.hash, len(change.obs.read()),
                prev_id=change.prev_id, live_id=change.live_id, renamed_from=change.renamed_from,
                mtime_ns=change.obs.mtime_ns, valid_from=valid_from, valid_to=valid_to,
            )
            if change.obs.mtime_ns is not None:
                writer.set_file_state(change.path, change.obs.size, change.obs.mtime_ns, change.hash)
            change.obs.data = None
            done += 1
            if progress:
                progress(done, total)
        for path in gone:
            writer.add_tombstone(path, live[path][0], renamed_to=renamed_away.get(path))
            writer.drop_file_state(path)
            done += 1
            if progress:
                progress(done, total)
        for update in state_updates:
            writer.set_file_state(*update)
        if on_write is not None:
            on_write(writer)
    summary.paths = sorted({c.path for c in changes} | set(gone)) if writer.batch_id is not None else []
    summary.batch_id = writer.batch_id
    summary.known_at = known_at if writer.batch_id is not None else None
    summary.added = writer.counts["created"]
    summary.modified = writer.counts["modified"]
    summary.renamed = writer.counts["renamed"]
    summary.deleted = writer.counts["deleted"]
    summary.seconds = time.perf_counter() - started
    return summary

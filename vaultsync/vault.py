"""The library API: one ``Vault`` object that every door (CLI, watcher, MCP server) calls."""

from __future__ import annotations

import datetime as dt
import difflib
import hashlib
import os
import posixpath
import threading
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import edit, gitimport
from .config import default_db_path
from .errors import ConfigError, NoteNotFound, PathError, StoreError
from .links import LinkReport, link_report
from .search import api as search_api
from .store import Store
from .store import read as q
from .store.read import Revision
from .store.schema import APPEND_ONLY_TABLES
from .store.write import text_hash
from .parsers import split_lines
from .sync import BatchSummary, FileError, Progress, apply, nfc, observe_paths, scan
from .times import format_time, optional_time, to_micros

TimeLike = str | int | dt.datetime | None


def as_micros(value: TimeLike, what: str = "time") -> int | None:
    """Accepted time forms (see vaultsync.times) or an aware datetime, as UTC microseconds."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise ConfigError(f"{what} needs a time zone")
        return to_micros(value)
    return optional_time(value, what)


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
        }


class Vault:
    """A vault's history in a store: sync it, read it as of any time."""

    def __init__(self, store: Store, name: str, vault_id: int, root: Path) -> None:
        self.store = store
        self.name = name
        self.id = vault_id
        self.root = root
        self.lock = store.writer_lock(name)
        self._sync_lock = threading.RLock()
        if not store.readonly:
            search_api.attach(store)  # keyword + vector indexes, kept in each batch's transaction

    # ------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        db_path: str | os.PathLike[str] | None = None,
        *,
        root: str | os.PathLike[str] | None = None,
        name: str | None = None,
        readonly: bool = False,
    ) -> Vault:
        """Open a vault for writing (``root`` given: registered if new) or for reading (by ``name``)."""
        db = Path(db_path) if db_path is not None else default_db_path()
        if root is not None:
            vault_root = Path(root).expanduser().resolve()
            if not vault_root.is_dir():
                raise ConfigError(f"vault folder {root} does not exist or is not a folder")
            if db.resolve().is_relative_to(vault_root):
                raise ConfigError(f"the database {db} must not live inside the vault (sync services corrupt it); pass --db elsewhere")
            vault_name = name or vault_root.name
            store = Store(db, readonly=readonly)
            try:
                found = store.vault(vault_name)
                if found is not None and found[1] != str(vault_root) and Path(found[1]).is_dir():
                    raise ConfigError(
                        f"a vault named '{vault_name}' already lives at {found[1]}; give this one another name with --vault"
                    )
                if readonly:
                    if found is None:
                        raise ConfigError(f"no vault '{vault_name}' in {db}")
                    vault_id = found[0]
                else:
                    vault_id = store.ensure_vault(vault_name, vault_root)
            except BaseException:
                store.close()
                raise
            return cls(store, vault_name, vault_id, vault_root)
        store = Store(db, readonly=readonly)
        try:
            names = store.vault_names()
            if name is None:
                if len(names) != 1:
                    listed = ", ".join(names) if names else "none yet"
                    raise ConfigError(f"{db} holds {len(names)} vaults ({listed}); choose one with --vault NAME")
                name = names[0]
            found = store.vault(name)
            if found is None:
                raise ConfigError(f"no vault '{name}' in {db} (known: {', '.join(names) or 'none'})")
        except BaseException:
            store.close()
            raise
        return cls(store, name, found[0], Path(found[1]))

    def close(self) -> None:
        self.lock.release()
        self.store.close()

    def __enter__(self) -> Vault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ writing

    def sync(
        self,
        paths: Iterable[str] | None = None,
        *,
        known_at: TimeLike = None,
        strict: bool = False,
        source: str = "import",
        progress: Progress | None = None,
    ) -> BatchSummary:
        """Record what changed on disk as one atomic batch: every file (``paths=None``) or just ``paths``.

        ``paths`` are vault-relative; a folder stands for everything under it, a missing path for a
        deletion. This is the one function both ``import`` and the watcher call.
        """
        when = as_micros(known_at, "--known-at")
        self._sync_lock.acquire()  # one batch at a time in this process (watcher thread, write tools)
        held = self.lock.held
        try:
            self.lock.acquire()
            if paths is None:
                observed, errors = scan(self.root)
                with self.store.db.atomic() as con:  # the connection's lock: other threads may read this Vault
                    live = q.current_state(con, self.id)
                full = True
            else:
                with self.store.db.atomic() as con:
                    live = q.current_state(con, self.id)
                observed, errors = observe_paths(self.root, paths, live)
                full = False
            return apply(self.store, self.id, self.name, observed, live=live, known_at=when, source=source,
                         strict=strict, errors=errors, progress=progress, full=full)
        finally:
            if not held:
                self.lock.release()
            self._sync_lock.release()

    def import_git(self, *, strict: bool = False, progress: gitimport.OnCommit | None = None) -> GitImport:
        """Replay the first-parent git history of the vault's repository, one batch per commit."""
        history = gitimport.GitHistory(self.root)
        held = self.lock.held
        self.lock.acquire()
        result = GitImport(BatchSummary(vault=self.name))
        try:
            imported = {r[0] for r in self.store.db.query("SELECT sha FROM git_commits WHERE vault_id = ?", (self.id,))}
            todo = list(gitimport.pending(history, imported))
            result.skipped = len(imported)
            last = self.store.last_known_at(self.id)
            last_source = self.store.db.scalar(
                "SELECT source FROM batches WHERE vault_id = ? ORDER BY id DESC LIMIT 1", (self.id,))
            if todo and last is not None and last_source != "git" and todo[0][1].committed_at < last:
                raise ConfigError(
                    f"this vault already has batches up to {format_time(last)}, later than the first commit to import "
                    f"({format_time(todo[0][1].committed_at)}); import --from-git into a new vault name (--vault) or database"
                )
            for index, (parent, commit) in enumerate(todo, start=1):
                live = q.current_state(self.store.db.con, self.id)
                first = index == 1
                observed = history.tree(commit.sha) if first else history.changes(parent, commit.sha)
                when = commit.committed_at
                last = self.store.last_known_at(self.id)
                if last is not None and when < last:
                    when, result.lifted = last, result.lifted + 1
                summary = apply(
                    self.store, self.id, self.name, observed, live=live, known_at=when, source="git",
                    detail=commit.sha, strict=strict, full=first,
                    on_write=lambda w, c=commit: w.record_git_commit(c.sha, c.committed_at),
                )
                result.summary.merge(summary)
                result.commits += 1
                if progress:
                    progress(index, len(todo), commit)
        finally:
            history.close()
            if not held:
                self.lock.release()
        return result

    # ------------------------------------------------------------ reading

    def note_path(self, path: str) -> str:
        """A user-given note path as the vault-relative NFC path the store uses."""
        rel = nfc(str(path).replace("\\", "/").strip())
        if not rel or rel.startswith("/") or (len(rel) > 1 and rel[1] == ":"):
            raise PathError(f"{path!r} is not a vault-relative note path (like Folder/Note.md)")
        normal = posixpath.normpath(rel)
        if normal == ".." or normal.startswith("../"):
            raise PathError(f"{path!r} points outside the vault")
        return normal

    def _lookup(self, path: str, batch: int) -> Revision | None:
        rel = self.note_path(path)
        con = self.store.db.con
        rev = q.revision_at(con, self.id, rel, batch)
        if rev is None and not rel.endswith(".md"):
            rev = q.revision_at(con, self.id, rel + ".md", batch)
        return rev

    def _existing(self, path: str, batch: int, when: int | None) -> Revision:
        """The live revision of ``path`` at ``batch``, or NoteNotFound saying when (and any rename)."""
        rev = self._lookup(path, batch)
        if rev is None or rev.deleted:
            at = f" as of {format_time(when)}" if when is not None else ""
            extra = f" (it was renamed to {rev.renamed_to})" if rev is not None and rev.renamed_to else ""
            raise NoteNotFound(f"note {path!r} did not exist{at} in vault '{self.name}'{extra}")
        return rev

    def read(self, path: str, as_of: TimeLike = None) -> Note:
        """The note's exact text as of ``as_of`` (default now); NoteNotFound if it did not exist then."""
        when = as_micros(as_of, "--as-of")
        with self.store.db.atomic() as con:
            rev = self._existing(path, q.cutoff(con, self.id, when), when)
            q.attach_links(con, [rev])
            return Note(rev, q.content(con, rev.note_id))

    def ls(self, as_of: TimeLike = None, prefix: str = "") -> list[Revision]:
        """The notes that existed as of ``as_of``, by path."""
        when = as_micros(as_of, "--as-of")
        with self.store.db.atomic() as con:
            return q.revisions_at(con, self.id, q.cutoff(con, self.id, when), nfc(prefix))

    def history(self, path: str) -> list[Revision]:
        """Every revision of the note, oldest first, following renames back to its first name."""
        rel = self.note_path(path)
        with self.store.db.atomic() as con:
            revs = q.revisions_of_path(con, self.id, rel)
            if not revs and not rel.endswith(".md"):
                rel += ".md"
                revs = q.revisions_of_path(con, self.id, rel)
            if not revs:
                raise NoteNotFound(f"vault '{self.name}' has no history for {path!r}")
            seen = {rel}
            while revs[0].kind == "renamed" and revs[0].renamed_from and revs[0].renamed_from not in seen:
                old = revs[0].renamed_from
                seen.add(old)
                earlier = [r for r in q.revisions_of_path(con, self.id, old, revs[0].batch_id)
                           if not (r.deleted and r.renamed_to == revs[0].path and r.batch_id == revs[0].batch_id)]
                revs = earlier + revs
            return revs

    def diff(self, path: str, since: TimeLike, until: TimeLike = None) -> str:
        """Unified diff of the note between two times ('' when identical)."""
        start, end = as_micros(since, "--from"), as_micros(until, "--to")
        with self.store.db.atomic() as con:
            texts, labels = [], []
            for when in (start, end):
                rev = self._lookup(path, q.cutoff(con, self.id, when))
                stamp = format_time(when) if when is not None else "now"
                if rev is None or rev.deleted:
                    texts.append("")
                    labels.append(f"{path} (absent {stamp})")
                else:
                    texts.append(q.content(con, rev.note_id))
                    labels.append(f"{rev.path} @ {stamp}")
            if labels[0].endswith(")") and labels[1].endswith(")") and not texts[0] and not texts[1]:
                raise NoteNotFound(f"note {path!r} existed at neither time in vault '{self.name}'")
        lines = difflib.unified_diff(split_lines(texts[0]), split_lines(texts[1]),
                                     labels[0], labels[1])
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)

    def changes(self, since: TimeLike, until: TimeLike = None) -> list[Revision]:
        """Revisions learned after ``since`` up to and including ``until`` (default now), in order."""
        start, end = as_micros(since, "--since"), as_micros(until, "--until")
        if start is not None and end is not None and end < start:
            raise ConfigError("--until is earlier than --since")
        with self.store.db.atomic() as con:
            return q.revisions_between(con, self.id, q.cutoff(con, self.id, start), q.cutoff(con, self.id, end))

    def links(self, path: str, as_of: TimeLike = None) -> LinkReport:
        """The note's outgoing links (resolved) and the notes linking to it, both as of ``as_of``."""
        when = as_micros(as_of, "--as-of")
        with self.store.db.atomic() as con:
            batch = q.cutoff(con, self.id, when)
            rev = self._existing(path, batch, when)
            notes = q.attach_links(con, q.revisions_at(con, self.id, batch))
            q.attach_links(con, [rev])
        return link_report(rev, notes, when)

    def create_note(self, path: str, content: str) -> BatchSummary:
        """Create a new note file (never overwriting one) atomically, then record it as one batch."""
        return self.sync([edit.create_file(self.root, path, content)], source="write")

    def append_to_note(self, path: str, text: str) -> BatchSummary:
        """Append text to an existing note file atomically, then record it as one batch."""
        return self.sync([edit.append_file(self.root, path, text)], source="write")

    def search(
        self,
        query: str,
        *,
        as_of: TimeLike = None,
        valid_at: TimeLike = None,
        mode: str = "hybrid",
        limit: int = 10,
        prefix: str | None = None,
        tags: list[str] | None = None,
        where: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Hybrid search of the chunks visible at ``as_of`` (default now); see vaultsync.search.

        Returns ``{"query", "as_of", "mode", "hits": [...]}``, exactly what ``search --json`` prints.
        """
        return search_api.search(self, query, as_of=as_of, valid_at=valid_at, mode=mode, limit=limit,
                                 prefix=prefix, tags=tags, where=where)

    def export(self, as_of: TimeLike = None, valid_at: TimeLike = None) -> Iterator[dict[str, Any]]:
        """A header, then every chunk visible at ``as_of`` with the exact text the keyword index tokenizes."""
        return search_api.export(self, as_of=as_of, valid_at=valid_at)

    def reindex(self, *, full: bool = False) -> dict[str, Any]:
        """Bring the search index up to date (``full``: rebuild it from the revision tables)."""
        return search_api.reindex(self, full=full)

    def reembed(self, embedder: str) -> dict[str, Any]:
        """Re-embed every chunk text with another embedder (the store never mixes embedders)."""
        return search_api.reembed_vault(self, embedder)

    # ------------------------------------------------------------ upkeep

    def stats(self) -> dict[str, Any]:
        db = self.store.db
        with db.atomic() as con:
            one = lambda sql: con.execute(sql, (self.id,)).fetchone()[0]  # noqa: E731
            live = len(q.current_state(con, self.id))
            out = {
                "vault": self.name,
                "root": str(self.root),
                "database": self.store.path,
                "notes": live,
                "revisions": one("SELECT count(*) FROM notes WHERE vault_id = ?"),
                "batches": one("SELECT count(*) FROM batches WHERE vault_id = ?"),
                "chunk_revisions": one("SELECT count(*) FROM chunks c JOIN notes n ON n.id = c.note_id WHERE n.vault_id = ?"),
                "first_batch": format_time(one("SELECT min(known_at) FROM batches WHERE vault_id = ?")),
                "last_batch": format_time(one("SELECT max(known_at) FROM batches WHERE vault_id = ?")),
                "distinct_texts": con.execute("SELECT count(*) FROM texts").fetchone()[0],
                "database_bytes": sum(os.path.getsize(p) for p in (self.store.path, self.store.path + "-wal")
                                      if os.path.exists(p)),
            }
        return out

    def check(self) -> list[str]:
        """Verify the store; return the problems found (empty when healthy)."""
        problems: list[str] = []
        with self.store.db.atomic() as con:
            result = [r[0] for r in con.execute("PRAGMA integrity_check").fetchall()]
            if result != ["ok"]:
                problems += [f"SQLite integrity: {r}" for r in result]
            triggers = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
            for table in APPEND_ONLY_TABLES:
                for action in ("update", "delete"):
                    if f"{table}_no_{action}" not in triggers:
                        problems.append(f"append-only trigger {table}_no_{action} is missing")
            previous = None
            for batch_id, known_at in con.execute(
                "SELECT id, known_at FROM batches WHERE vault_id = ? ORDER BY id", (self.id,)
            ):
                if previous is not None and known_at < previous:
                    problems.append(f"batch {batch_id} goes back in time ({format_time(known_at)})")
                previous = known_at
            for table, what in (("texts", "chunk text"), ("blobs", "stored value")):
                for hash_, body in con.execute(f"SELECT hash, body FROM {table}"):
                    try:
                        intact = text_hash(q.unpack(body)) == hash_
                    except (ValueError, zlib.error):
                        intact = False
                    if not intact:
                        problems.append(f"{what} {hash_.hex()} does not match its hash")
            for note_id, path, expected, size in con.execute(
                "SELECT id, path, content_hash, size FROM notes WHERE vault_id = ? AND kind != 'deleted'", (self.id,)
            ).fetchall():
                try:
                    data = q.content(con, note_id).encode("utf-8", "surrogatepass")
                except (ValueError, zlib.error):
                    data = b"\0unreadable"
                if hashlib.sha256(data).hexdigest() != expected or len(data) != size:
                    problems.append(f"revision {note_id} of {path} does not match its content hash")
        return problems


@dataclass
class GitImport:
    """What a git backfill did."""

    summary: BatchSummary
    commits: int = 0
    skipped: int = 0
    lifted: int = 0

    def to_json(self) -> dict[str, Any]:
        return {**self.summary.to_json(), "commits": self.commits, "already_imported": self.skipped,
                "lifted": self.lifted}


__all__ = ["BatchSummary", "FileError", "GitImport", "Note", "Vault", "StoreError"]

"""A vault as the store knew it at one knowledge cutoff: every read the library makes, in one read transaction."""

from __future__ import annotations

import os
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import apsw

from ..disk.attachments import is_attachment
from ..disk.digest import content_hash
from ..errors import ConfigError
from ..search_filter import SearchFilter
from ..times import format_time
from . import files, timeline
from . import read as q
from .codec import content_key, unpack
from .provenance import PurgeRecord, locate, purge_records, revision_in_vault
from .purge import horizon
from .read import Revision
from .schema import APPEND_ONLY_TABLES, has_table
from .search import backfill, engine


def forgotten(vault_name: str, horizon: int) -> str:
    """The refusal of a question about a time before the vault's retention horizon."""
    return (
        f"vault '{vault_name}' forgot its history before {format_time(horizon)} (a retention purge); "
        f"ask about {format_time(horizon)} or later"
    )


def no_history(vault_name: str, first_batch: str | None) -> str:
    """Why nothing was known at a cutoff before the vault's first batch (``first_batch``: its time), in words."""
    if first_batch is None:
        return f"vault '{vault_name}' has no history yet"
    return f"vault '{vault_name}' has no history before {first_batch} (its first batch)"


CHECK_PAGE = 1000
"""How many revisions ``check`` reads in one query."""


class View:
    """Reads of one vault as of ``as_of`` (None: now), valid at ``valid_at``; see ``Store.view``.

    ``batch`` is the cutoff: the last batch known at ``as_of`` (0 when none). Every method reads
    inside the same transaction, so a view never sees a batch land halfway through.

    With ``valid_at``, notes read, listed, followed in history and reported as changes are those
    that apply at that validity time under the interval overlay (``read.effective``: a revision
    declaring ``valid_from``/``valid_to`` applies only inside its half-open interval; outside it,
    the newest earlier revision of the same note that is valid then applies). Without it, those
    reads are the revisions exactly as recorded. Search and export always apply the overlay, at
    ``valid_at`` or by default at the cutoff (see ``search.snapshot``).
    """

    rankers: ClassVar[engine.Rankers] = engine.SQLITE
    """What search ranks with (an engine's view sets its own; the rest of search is ``search.engine``'s)."""

    def __init__(
        self,
        con: apsw.Connection,
        db_path: str,
        vault_id: int,
        vault_name: str,
        as_of: int | None,
        valid_at: int | None,
    ) -> None:
        self._con = con
        self._db_path = db_path
        self.vault_id = vault_id
        self.vault_name = vault_name
        self.as_of = as_of
        self.valid_at = valid_at
        self.batch = q.cutoff(con, vault_id, as_of)
        self.horizon = horizon(con, vault_id)
        """History before this time was removed by a retention purge (None: none was)."""
        if as_of is not None and self.horizon is not None and as_of < self.horizon:
            raise ConfigError(forgotten(vault_name, self.horizon), argument="as_of")

    @property
    def before_history(self) -> bool:
        """True when the cutoff is before the vault's first batch (or the vault has none yet): nothing was known."""
        return self.batch == 0

    def first_known_at(self) -> int | None:
        """When the vault's first batch was learned, where its history starts (None: it has no batch yet)."""
        return self._con.execute("SELECT min(known_at) FROM batches WHERE vault_id = ?", (self.vault_id,)).fetchone()[0]

    def at(self, as_of: int | None) -> View:
        """The same vault at another cutoff, in the same transaction."""
        return View(self._con, self._db_path, self.vault_id, self.vault_name, as_of, self.valid_at)

    def upto(self, batch: int) -> View:
        """This view cut exactly after ``batch`` (a revision id's: ``r12``), where its ``as_of`` is that batch's
        time: later batches that share the time stay unseen. Returns the view itself."""
        self.batch = min(self.batch, batch)
        return self

    # ------------------------------------------------------------ notes

    def revision(self, path: str) -> Revision | None:
        """The latest revision of ``path`` at the cutoff: a live one, a tombstone, or None if never seen."""
        return q.revision_at(self._con, self.vault_id, path, self.batch)

    def content(self, revision: Revision) -> str:
        """A revision's exact text."""
        return q.content(self._con, revision.note_id)

    def body(self, revision: Revision) -> Iterator[bytes] | None:
        """An attachment revision's exact bytes, piece by piece (``store/files.py``); None when they were not kept
        (over the size limit when recorded: its hash and size alone)."""
        assert revision.content_hash is not None, "a tombstone has no bytes"
        stored = files.info(self._con, revision.content_hash)
        if stored is None or not stored.kept:
            return None
        return files.pieces(self._con, revision.content_hash)

    def applies(self, revision: Revision | None) -> Revision | None:
        """The revision that applies at ``valid_at`` when ``revision`` is the one visible (itself without
        ``valid_at``; None when no revision of the note is valid then)."""
        if self.valid_at is None or revision is None or revision.deleted:
            return revision
        return q.effective(self._con, revision, self.valid_at)

    def ls(self, prefix: str = "") -> list[Revision]:
        """Every note that existed at the cutoff (and, with ``valid_at``, applied then), by path."""
        found = q.revisions_at(self._con, self.vault_id, self.batch, prefix)
        if self.valid_at is None:
            return found
        return [r for r in map(self.applies, found) if r is not None]

    def with_links(self, revisions: list[Revision]) -> list[Revision]:
        """Fill each revision's ``links``."""
        return q.attach_links(self._con, revisions)

    def revisions_of(self, path: str, before_batch: int | None = None) -> list[Revision]:
        """Every revision ever stored at ``path`` (up to ``before_batch``), oldest first, whatever the cutoff."""
        return q.revisions_of_path(self._con, self.vault_id, path, before_batch)

    def history(self, path: str) -> list[Revision]:
        """Every revision stored at ``path``, oldest first, and, behind each rename that brought a note
        here, the revisions it had under its earlier name (and so on back): a folder moved away, edited
        there and moved back keeps the whole story. A rename's tombstone is left out where the rename
        itself is listed (one revision a batch)."""
        found: dict[int, Revision] = {}
        todo: list[tuple[str, int | None]] = [(path, None)]
        done: set[tuple[str, int | None]] = set()
        while todo:
            at, before = todo.pop()
            if (at, before) in done:
                continue
            done.add((at, before))
            for r in self.revisions_of(at, before):
                if before is not None and r.batch_id >= before:
                    continue  # the rename's other end, or another note arriving here in that batch
                found[r.note_id] = r
                if r.kind == "renamed" and r.renamed_from:
                    todo.append((r.renamed_from, r.batch_id))
        revs = sorted(found.values(), key=lambda r: (r.batch_id, r.note_id))
        batches = Counter(r.batch_id for r in revs)
        return [r for r in revs if not (r.deleted and r.renamed_to and batches[r.batch_id] > 1)]

    def history_valid(self, path: str) -> list[Revision]:
        """With ``valid_at``: the revisions that in turn applied at that validity time as knowledge grew
        (each when it started to apply; a deletion when the note went), oldest first."""
        out: list[Revision] = []
        for r in self.history(path):
            if r.deleted and r.renamed_to:
                continue  # the renamed revision that follows carries the note on
            now = r if r.deleted else self.applies(r)
            if now is not None and (not out or out[-1].note_id != now.note_id):
                out.append(now)
        return out

    def changes(self, since: View, limit: int | None = None) -> list[Revision]:
        """Revisions learned after ``since``'s cutoff up to and including this one, in order (the first
        ``limit``, taken in the store when there is no ``valid_at``).

        With ``valid_at``: only those that changed which revision applies at that validity time
        (the revision that applies from then on, or the deletion or rename that ended the note)."""
        if self.valid_at is None:
            return q.revisions_between(self._con, self.vault_id, since.batch, self.batch, limit)
        found = q.revisions_between(self._con, self.vault_id, since.batch, self.batch)
        state: dict[str, int | None] = {}

        def applying(path: str) -> int | None:
            if path not in state:
                now = since.applies(q.revision_at(self._con, self.vault_id, path, since.batch))
                state[path] = None if now is None or now.deleted else now.note_id
            return state[path]

        out: list[Revision] = []
        for r in found:
            before = applying(r.path)
            gone = r.kind == "renamed" and r.renamed_from is not None and applying(r.renamed_from) is not None
            if r.kind == "renamed" and r.renamed_from is not None:
                state[r.renamed_from] = None
            now = None if r.deleted else self.applies(r)
            state[r.path] = None if now is None else now.note_id
            if state[r.path] != before or gone:
                out.append(now if now is not None else r)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def change_counts(self, since: View) -> dict[str, int]:
        """How many of ``changes(since)`` are of each kind (created, modified, renamed, deleted)."""
        if self.valid_at is None:
            return q.kinds_between(self._con, self.vault_id, since.batch, self.batch)
        counts: dict[str, int] = {}
        for r in self.changes(since):
            counts[r.kind] = counts.get(r.kind, 0) + 1
        return counts

    def batch_times(self) -> list[tuple[int, int, int]]:
        """Every batch up to the cutoff as ``(batch id, known_at, changes)``, oldest first."""
        return timeline.batch_times(self._con, self.vault_id, self.batch)

    def listing(self) -> list[tuple[str, str | None, str | None]]:
        """``(path, title, content hash)`` of every note at the cutoff, by path (``ls`` without the details)."""
        return timeline.listing(self._con, self.vault_id, self.batch)

    def fates(self, paths: list[str]) -> dict[str, str | None]:
        """Where each of ``paths`` (live at the cutoff) went later: its path now, or None if deleted;
        paths never ended are left out."""
        return timeline.fates(self._con, self.vault_id, self.batch, paths)

    # ------------------------------------------------------------ provenance (whatever the cutoff)

    def locate(self, keys: Sequence[tuple[str, str, int]]) -> list[int | None]:
        """The id of the revision stored at each ``(path, content hash, known_at)``; None where none is."""
        return locate(self._con, self.vault_id, keys)

    def revision_by_id(self, note_id: int) -> Revision | None:
        """Revision ``note_id`` of this vault, whatever the cutoff (None: not in this vault's store)."""
        return revision_in_vault(self._con, self.vault_id, note_id)

    def purges(self) -> list[PurgeRecord]:
        """The vault's purge records, oldest first."""
        return purge_records(self._con, self.vault_id)

    # ------------------------------------------------------------ search

    def search(
        self,
        query: str,
        *,
        mode: str = engine.DEFAULT_MODE,
        limit: int = 10,
        filters: SearchFilter | None = None,
    ) -> dict[str, Any]:
        """Hybrid search of the chunks visible at the cutoff of the notes ``filters`` admit (see
        ``vaultsync.store.search.engine``)."""
        return engine.search(
            self._con,
            self.vault_id,
            self.vault_name,
            query,
            as_of=self.as_of,
            batch=self.batch,
            valid_at=self.valid_at,
            mode=mode,
            limit=limit,
            filters=filters,
            rankers=self.rankers,
        )

    def export(self) -> Iterator[dict[str, Any]]:
        """A header, then every chunk visible at the cutoff with the exact text the keyword index tokenizes."""
        return engine.export(
            self._con, self.vault_id, self.vault_name, as_of=self.as_of, valid_at=self.valid_at, batch=self.batch
        )

    # ------------------------------------------------------------ upkeep

    def stats(self) -> dict[str, Any]:
        """Counts of notes, revisions, batches and stored texts, and the database's size."""
        con, vault = self._con, {"v": self.vault_id}

        def one(sql: str) -> Any:
            return con.execute(sql, vault).fetchone()[0]

        return {
            "vault": self.vault_name,
            "database": self._db_path,
            "notes": len(q.current_state(con, self.vault_id)),
            "revisions": one("SELECT count(*) FROM notes WHERE vault_id = :v"),
            "batches": one("SELECT count(*) FROM batches WHERE vault_id = :v"),
            "chunk_revisions": one(
                "SELECT count(*) FROM chunks c JOIN notes n ON n.id = c.note_id WHERE n.vault_id = :v"
            ),
            "first_batch": format_time(one("SELECT min(known_at) FROM batches WHERE vault_id = :v")),
            "last_batch": format_time(one("SELECT max(known_at) FROM batches WHERE vault_id = :v")),
            "distinct_texts": con.execute("SELECT count(*) FROM texts").fetchone()[0],
            "database_bytes": self._database_bytes(),
            "semantic_vectors": self.vector_progress(),
        }

    def vector_progress(self) -> dict[str, Any] | None:
        """How many current texts, and texts of the whole history, have their vectors (``search.backfill.Progress``)
        when the store's embedder fills them after each batch; None when every batch writes its vectors (or there is
        no search index)."""
        from ..errors import VaultsyncError
        from .search.embedding import query_embedder
        from .search.schema import has_schema

        if self.rankers is engine.SQLITE and not has_schema(self._con):  # (PostgreSQL's schema always has it)
            return None
        try:
            embedder = query_embedder(self._con)
        except VaultsyncError:  # another embedder's vectors, or one this vaultsync lacks: nothing is being filled
            return None
        if not embedder.background:
            return None
        found = self.rankers.progress(self._con, self.vault_id, embedder.embedder_id)
        return backfill.with_history(self._con, self.vault_id, found).to_json()

    def _database_bytes(self) -> int:
        """Bytes of the database file and its WAL (the engine's own measure)."""
        return sum(os.path.getsize(p) for p in (self._db_path, self._db_path + "-wal") if os.path.exists(p))

    def _engine_problems(self) -> list[str]:
        """What only this engine can check: SQLite's integrity check and its append-only triggers."""
        from .expected_shape import SQLITE
        from .migrations import problems as schema_problems
        from .schema import PROBES, state
        from .shape import sqlite_shape

        con = self._con
        problems = [
            f"SQLite integrity: {r[0]}" for r in con.execute("PRAGMA integrity_check").fetchall() if r[0] != "ok"
        ]
        problems += schema_problems(state(con), sqlite_shape(con), SQLITE, PROBES, on_write=True)
        triggers = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        for table in APPEND_ONLY_TABLES:
            for action in ("update", "delete"):
                if f"{table}_no_{action}" not in triggers:
                    problems.append(f"append-only trigger {table}_no_{action} is missing")
        return problems

    def index_problems(self) -> list[str]:
        """The search index behind or inconsistent (``search.health``), and its current rows and its FTS5 table of
        current chunks apart (SQLite's)."""
        from .search import health
        from .search.schema import has_schema, live_table

        con = self._con
        if not has_schema(con):
            return []
        problems = health.problems(con, self.vault_id)
        table = live_table(self.vault_id)
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (f"{table}_docsize",)).fetchone():
            rows = con.execute(
                "SELECT count(*) FROM search_rows INDEXED BY search_rows_live WHERE vault_id = ? AND died IS NULL",
                (self.vault_id,),
            ).fetchone()[0]
            (terms,) = con.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()
            if rows != terms:
                problems.append(f"the search index's words of current chunks hold {terms} chunks, its rows {rows}")
        return problems

    def check(self) -> list[str]:
        """Verify the store; return the problems found (empty when healthy)."""
        con = self._con
        from .search.health import REINDEX

        problems = self._engine_problems() + [f"{problem} ({REINDEX})" for problem in self.index_problems()]
        previous = None
        for batch_id, known_at in con.execute(
            "SELECT id, known_at FROM batches WHERE vault_id = ? ORDER BY id", (self.vault_id,)
        ).fetchall():
            if previous is not None and known_at < previous:
                problems.append(f"batch {batch_id} goes back in time ({format_time(known_at)})")
            previous = known_at
        for table, what in (("texts", "chunk text"), ("blobs", "stored value")):
            for hash_, body in con.execute(f"SELECT hash, body FROM {table}").fetchall():
                try:
                    intact = content_key(unpack(body)) == hash_
                except (ValueError, zlib.error):
                    intact = False
                if not intact:
                    problems.append(f"{what} {bytes(hash_).hex()} does not match its hash")
        revisions = con.execute(
            "SELECT id, path, content_hash, size FROM notes WHERE vault_id = ? AND kind != 'deleted' ORDER BY id",
            (self.vault_id,),
        ).fetchall()
        for start in range(0, len(revisions), CHECK_PAGE):  # a query a page of revisions, not one a revision
            page = revisions[start : start + CHECK_PAGE]
            texts: dict[int, str | None]
            try:
                texts = dict(q.contents(con, [row[0] for row in page]))
            except (ValueError, zlib.error):  # a damaged text: find which revisions it is in, one by one
                texts = {row[0]: self._content_or_none(row[0]) for row in page}
            for note_id, path, expected, size in page:
                if is_attachment(path):  # its bytes are checked by their hash (``files.problems``)
                    continue
                text = texts[note_id]
                data = b"\0unreadable" if text is None else text.encode("utf-8", "surrogatepass")
                if content_hash(data) != expected or len(data) != size:
                    problems.append(f"revision {note_id} of {path} does not match its content hash")
        if not has_table(con, "attachment_bodies"):  # an older database read as it is: it holds notes only
            return problems
        return problems + files.problems(con, self.vault_id)

    def _content_or_none(self, note_id: int) -> str | None:
        try:
            return q.content(self._con, note_id)
        except (ValueError, zlib.error):
            return None

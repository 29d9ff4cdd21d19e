"""Vectors filled after their batch: the texts of a background embedder (``Embedder.background``), embedded by
whichever process holds the vault's writer role, a few at a time, newest notes first.

A batch written with such an embedder indexes its texts for keyword search only, as fast as words alone; each
``fill`` step then gives up to ``STEP`` of the vault's texts their vectors, in its own short transaction:

1. the texts of current chunks without a current vector (SQLite's ``search_live_vectors``), the vault's newest batch
   first and, within a batch (a first import), the most recently modified files first;
2. once every current text has one, the texts only past cutoffs see, newest first.

A text written meanwhile, or taken out by a purge, is checked by its hash when its vector is stored; the current
vectors of every vault using it are written with it (SQLite's; PostgreSQL keeps each vector once: ``pg/backfill.py``).

What search promises holds for what is filled: at any cutoff the vector ranking is that of a fresh comparison
with the vectors of exactly the visible chunks whose text has one (``tests/search/test_search_backfill.py``), and
the fused default mode is the same pipeline over those. ``progress`` says how far the current texts are.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ...embed.provider import Embedder
from .embedding import embed_quantized, stored_text

STEP = 32
"""Texts looked up per step (about a second of MiniLM on one free core)."""

RUN = 8
"""Texts embedded between two calls of a step's ``pause``: a quarter of a step, so that a filler running beside the
watcher (``vaultsync.live.filling``) gives the processor back to a batch within about that much embedding."""


@dataclass(frozen=True, slots=True)
class Progress:
    """How many of a vault's texts have their vectors: the current ones (what a search now ranks), and either every
    text of its history (``history_*``, for its status) or those visible at a past cutoff (``as_of``, for a search)."""

    embedder: str
    """The embedder filling them (its registry name)."""
    filled: int
    total: int
    """The current texts with their vector, and all of them; or, with ``as_of``, the texts visible then."""
    history_filled: int | None = None
    history_total: int | None = None
    """Every text the vault ever held (current and past revisions): with its vector, and all (None: not counted)."""
    as_of: str | None = None
    """Set when ``filled``/``total`` count the texts visible at this past cutoff rather than the current ones."""

    @property
    def complete(self) -> bool:
        return self.filled >= self.total

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"embedder": self.embedder, "filled": self.filled, "total": self.total}
        if self.history_total is not None:
            out.update(history_filled=self.history_filled, history_total=self.history_total)
        if self.as_of is not None:
            out["as_of"] = self.as_of
        return out

    def sentence(self) -> str:
        """One line for a person: how far, and what search does meanwhile."""
        share = 100 * self.filled // self.total if self.total else 100
        which = f"texts visible at {self.as_of}" if self.as_of else "current texts"
        return (
            f"semantic vectors: {self.filled:,} of {self.total:,} {which} so far ({share}%); "
            "the rest are found by their words until the vault's watcher fills them"
        )

    def summary(self) -> str:
        """``stats``' line: the current texts, then the whole history."""
        line = f"{self.filled:,} of {self.total:,} current texts"
        if self.history_total is not None:
            line += f", {self.history_filled:,} of {self.history_total:,} in the whole history"
        return f"{line} ({self.embedder})"


HISTORY = """
    SELECT count(*), count(v.doc_id) FROM (SELECT DISTINCT doc_id FROM search_rows WHERE vault_id = :v) d
    LEFT JOIN search_vectors v ON v.doc_id = d.doc_id"""
"""Every text of the vault's history, and how many have their vector (both engines, through ``con.execute``)."""


def with_history(con: Any, vault_id: int, found: Progress) -> Progress:
    """``found`` (the current texts) with the whole history's counts."""
    total, filled = con.execute(HISTORY, {"v": vault_id}).fetchone()
    return replace(found, history_filled=int(filled), history_total=int(total))


def progress_at(con: Any, snap: Any, embedder: str, as_of: str | None) -> Progress:
    """How many of the texts visible in a past snapshot (``search.snapshot``) have their vector: the ones a vector
    ranking at that cutoff compares (both engines)."""
    from .snapshot import rows_source

    source, params = rows_source(snap, None)
    total, filled = con.execute(
        f"SELECT count(*), count(v.doc_id) FROM (SELECT DISTINCT doc_id FROM ({source}) s) d "
        "LEFT JOIN search_vectors v ON v.doc_id = d.doc_id",
        params,
    ).fetchone()
    return Progress(embedder, int(filled), int(total), as_of=as_of)


CURRENT = """
    SELECT r.doc_id FROM search_rows r {live} JOIN notes n ON n.id = r.note_id
    WHERE r.vault_id = :v AND r.died IS NULL AND r.doc_id NOT IN (SELECT value FROM json_each(:skip))
      AND NOT EXISTS ({vector})
    GROUP BY r.doc_id ORDER BY max(r.born) DESC, max(coalesce(n.mtime_ns, 0)) DESC, r.doc_id DESC LIMIT :n"""
"""Current texts without a current vector, newest first (``{live}``: SQLite's index hint for current rows;
``{vector}``: the engine's test of a current row's vector, ``LIVE_VECTOR`` on SQLite)."""

LIVE_VECTOR = "SELECT 1 FROM search_live_vectors l WHERE l.vault_id = :v AND l.doc_id = r.doc_id"
"""SQLite's current vectors (``search_live_vectors``); PostgreSQL keeps each vector once (``pg/backfill.py``)."""

PAST = """
    SELECT r.doc_id FROM search_rows r
    WHERE r.vault_id = :v AND r.doc_id NOT IN (SELECT value FROM json_each(:skip))
      AND NOT EXISTS (SELECT 1 FROM search_vectors x WHERE x.doc_id = r.doc_id)
    GROUP BY r.doc_id ORDER BY max(r.born) DESC, r.doc_id DESC LIMIT :n"""
"""Texts of past chunks without a vector, newest first."""

TEXTS = """
    SELECT r.doc_id, d.hash, c.heading_path, t.body, n.title, n.aliases,
           EXISTS (SELECT 1 FROM search_vectors x WHERE x.doc_id = r.doc_id)
    FROM (SELECT doc_id, min(id) AS id FROM search_rows WHERE doc_id IN (SELECT value FROM json_each(:docs))
          GROUP BY doc_id) r
    JOIN search_docs d ON d.id = r.doc_id JOIN chunks c ON c.id = r.id JOIN texts t ON t.id = c.text_id
    JOIN notes n ON n.id = c.note_id"""
"""Each wanted doc's hash, its ``indexed_text`` (from one chunk revision using it) and whether it has a vector."""


@dataclass(slots=True)
class Wanted:
    """One text a step fills: its doc, its hash, and its vector (None: it has one already, only not current)."""

    doc_id: int
    hash: bytes
    text: str
    blob: bytes | None = None
    has_vector: bool = False


def wanted(
    con: Any, vault_id: int, limit: int, skip: set[int], live_hint: str = "", vector: str = LIVE_VECTOR
) -> list[Wanted]:
    """Up to ``limit`` texts of the vault waiting for vectors (current ones first, newest first); ``skip``: docs
    left out (this process found their vectors empty: nothing to store, see ``Filler``)."""
    params = {"v": vault_id, "n": limit, "skip": json.dumps(sorted(skip))}
    docs = [int(r[0]) for r in con.execute(CURRENT.format(live=live_hint, vector=vector), params).fetchall()]
    if not docs:
        docs = [int(r[0]) for r in con.execute(PAST, params).fetchall()]
    if not docs:
        return []
    found = {
        int(doc): Wanted(int(doc), bytes(key), stored_text(title, aliases, heading, bytes(body)), None, bool(has))
        for doc, key, heading, body, title, aliases, has in con.execute(TEXTS, {"docs": json.dumps(docs)}).fetchall()
    }
    return [found[doc] for doc in docs if doc in found]


@dataclass(slots=True)
class Filler:
    """One engine's part in filling: its transaction, how it stores a step, and how it counts what is filled."""

    atomic: Callable[[], Any]
    """A context manager yielding a connection in one transaction (the engine's ``db.atomic``)."""
    store: Callable[[Any, list[Wanted]], None]
    """Inside that transaction: store the step's vectors (checked by hash) and the current vectors of its docs."""
    live_hint: str = ""
    vector: str = LIVE_VECTOR
    """``CURRENT``'s test of a current text's vector on this engine."""
    skip: set[int] | None = None
    """Docs whose vector came out empty (all zero, nothing to compare): not asked for again by this process."""

    def step(
        self,
        embedder: Embedder,
        vault_id: int,
        limit: int = STEP,
        *,
        writing: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
        pause: Callable[[], None] | None = None,
    ) -> int:
        """Fill up to ``limit`` texts; how many were filled (0: none is left). ``writing`` (the vault's batch and
        writer lock) is held around each of the step's two short transactions only, never while the model embeds:
        a batch waits for no embedding. ``pause`` is called between runs of ``RUN`` texts and before the vectors are
        stored (the watcher's filler waits there while a batch is due)."""
        if getattr(embedder, "threads", 0) is None and not getattr(embedder, "_session", None):
            # one thread: background work leaves the other cores to the person, and on a busy machine one thread
            # embedded over twice the texts per CPU-second two did (each run waits for its slowest thread)
            embedder.threads = 1  # type: ignore[attr-defined]  # MiniLMEmbedder's, read when it loads
        guard = writing or contextlib.nullcontext
        skip = self.skip if self.skip is not None else set()
        self.skip = skip
        with guard(), self.atomic() as con:
            found = wanted(con, vault_id, limit, skip, self.live_hint, self.vector)
        todo = [w for w in found if not w.has_vector]
        # outside any transaction and lock: the model takes its time, batches, readers and the database do not wait
        for start in range(0, len(todo), RUN):
            if pause is not None and start:
                pause()
            run = todo[start : start + RUN]
            for item, blob in zip(run, embed_quantized(embedder, [w.text for w in run])):
                item.blob = blob
        empty = {w.doc_id for w in todo if not any(w.blob or b"")}
        skip |= empty
        kept = [w for w in found if w.doc_id not in empty]
        if kept:
            if pause is not None:
                pause()
            with guard(), self.atomic() as con:  # checked by hash: a batch written meanwhile is no harm
                self.store(con, kept)
        return len(found)


def store_sqlite(con: Any, done: list[Wanted]) -> None:
    """SQLite's ``Filler.store``: the vectors, then the current vectors of every vault using their docs."""
    con.executemany(
        "INSERT OR IGNORE INTO search_vectors (doc_id, embedding) "
        "SELECT ?, ? WHERE EXISTS (SELECT 1 FROM search_docs WHERE id = ? AND hash = ?)",
        [(w.doc_id, w.blob, w.doc_id, w.hash) for w in done if w.blob is not None],
    )
    con.execute(
        """INSERT INTO search_live_vectors (vault_id, doc_id, refs, embedding)
           SELECT r.vault_id, r.doc_id, count(*), v.embedding FROM search_rows r INDEXED BY search_rows_by_doc
           JOIN search_vectors v ON v.doc_id = r.doc_id
           WHERE r.doc_id IN (SELECT value FROM json_each(?)) AND r.died IS NULL GROUP BY r.vault_id, r.doc_id
           ON CONFLICT (vault_id, doc_id) DO NOTHING""",
        (json.dumps([w.doc_id for w in done]),),
    )


def progress_sqlite(con: Any, vault_id: int, embedder: str) -> Progress:
    """SQLite's ``Progress`` of a vault: its current texts (distinct docs of current rows) and their vectors."""
    total = con.execute(
        "SELECT count(DISTINCT doc_id) FROM search_rows INDEXED BY search_rows_live WHERE vault_id = ? "
        "AND died IS NULL",
        (vault_id,),
    ).fetchone()[0]
    filled = con.execute("SELECT count(*) FROM search_live_vectors WHERE vault_id = ?", (vault_id,)).fetchone()[0]
    return Progress(embedder, int(filled), int(total))

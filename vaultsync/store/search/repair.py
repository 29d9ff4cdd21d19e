"""Repairing the search index around a purge, instead of rebuilding it.

A purge changes a few revisions; the index rows of exactly those revisions are taken out before the
revision tables change (``take_out``, which still reads the old text of the rows FTS5 needs it for),
and the rows of the ones that remain are put back from the rewritten tables (``put_back``). Per-batch
statistics are corrected by the same deltas the rows carried (``rows``/``tokens`` at the batch each row
was born in and the one it died in), so a cutoff's N and total tokens are those of a fresh index.
Distinct docs (search_fts rows, their vectors) that no chunk row of any vault uses any more are deleted
with the text they were indexed with (``finish``); both FTS5 tables touched are then merged into one
segment each, so no deleted entry survives in an older segment.

The result answers every query as a fresh index over the purged history does (same chunks, order and
scores); only doc ids differ, which no answer exposes (a rewritten revision's new docs take new ids
and raise its batch's ``max_doc``, an upper bound the cutoff queries use to skip later docs).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable

import apsw

from ...embed.tokenizer import indexable, indexed_text
from ..codec import content_key, unpack
from .embedding import stored_text, write_vectors
from .schema import live_table


def _ids(values: Iterable[int]) -> str:
    return json.dumps(sorted(values))


def _texts(con: apsw.Connection, note_ids: Iterable[int]) -> dict[int, list[tuple[int, str]]]:
    """revision id → [(chunk row id, indexed text)] of its indexable chunks, in order (as ``_replay``)."""
    out: dict[int, list[tuple[int, str]]] = {}
    found: dict[int, list[tuple]] = defaultdict(list)
    heads: dict[int, tuple] = {}
    for note_id, title, aliases, row_id, heading_path, body in con.execute(
        """SELECT n.id, n.title, n.aliases, c.id, c.heading_path, t.body FROM notes n
               JOIN chunks c ON c.note_id = n.id JOIN texts t ON t.id = c.text_id
               WHERE n.id IN (SELECT value FROM json_each(?)) AND n.kind != 'deleted' ORDER BY n.id, c.ord""",
        (_ids(note_ids),),
    ):
        heads[note_id] = (title, json.loads(aliases or "[]"))
        found[note_id].append((row_id, json.loads(heading_path), unpack(body)))
    for note_id, chunks in found.items():
        title, aliases = heads[note_id]
        out[note_id] = [
            (row_id, indexed_text(title, aliases, heading, text))
            for (row_id, heading, text), keep in zip(chunks, indexable([c[2] for c in chunks]))
            if keep
        ]
    return out


def _row_texts(con: apsw.Connection, row_ids: Iterable[int]) -> dict[int, str]:
    """search row id (= chunk row id) → the text it was indexed with (an indexed row's chunk is indexable)."""
    out: dict[int, str] = {}
    for row_id, title, aliases, heading_path, body in con.execute(
        """SELECT c.id, n.title, n.aliases, c.heading_path, t.body FROM chunks c
               JOIN notes n ON n.id = c.note_id JOIN texts t ON t.id = c.text_id
               WHERE c.id IN (SELECT value FROM json_each(?))""",
        (_ids(row_ids),),
    ):
        out[row_id] = stored_text(title, aliases, heading_path, body)
    return out


class Repair:
    """One purge's repair of vault ``vault_id``'s index: ``take_out``, then ``put_back``, then ``finish``."""

    def __init__(self, con: apsw.Connection, vault_id: int, indexer) -> None:
        self.con, self.vault_id, self.indexer = con, vault_id, indexer
        self.stats: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
        self.doc_text: dict[int, str] = {}
        """Docs taken-out rows may have left unused → the text they were indexed with (to delete them if so)."""
        self.live_changed = False
        self.live_docs: list[int] = []

    def _delta(self, batch: int, rows: int, tokens: int, max_doc: int = 0) -> None:
        entry = self.stats[batch]
        entry[0] += rows
        entry[1] += tokens
        entry[2] = max(entry[2], max_doc)

    def take_out(self, note_ids: Iterable[int]) -> None:
        """Remove every index row of revisions ``note_ids`` (call before the revision tables change).

        Set-based, so a retention purge of much of a history costs what it removes: the statistics' deltas
        are summed per batch in SQL; texts are read only for the live rows (FTS5 needs a row's text to
        delete it) and for one row of each doc no revision outside ``note_ids`` uses (``finish`` deletes
        the docs left unused)."""
        con, live = self.con, live_table(self.vault_id)
        ids = _ids(set(note_ids))
        chosen = "r.note_id IN (SELECT value FROM json_each(:ids))"
        for column, sign in (("born", -1), ("died", 1)):
            for batch, rows, tokens in con.execute(
                f"""SELECT r.{column}, count(*), sum(d.length) FROM search_rows r JOIN search_docs d
                        ON d.id = r.doc_id WHERE {chosen} AND r.{column} IS NOT NULL GROUP BY r.{column}""",
                {"ids": ids},
            ):
                self._delta(batch, sign * rows, sign * tokens)
        alone = con.execute(
            f"""WITH taken AS MATERIALIZED (SELECT r.doc_id, min(r.id) AS row_id FROM search_rows r
                                            WHERE {chosen} GROUP BY r.doc_id)
                SELECT doc_id, row_id FROM taken WHERE NOT EXISTS
                (SELECT 1 FROM search_rows o INDEXED BY search_rows_by_doc WHERE o.doc_id = taken.doc_id
                 AND o.note_id NOT IN (SELECT value FROM json_each(:ids)))""",
            {"ids": ids},
        ).fetchall()
        living = con.execute(
            f"SELECT r.id, r.doc_id FROM search_rows r WHERE {chosen} AND r.died IS NULL", {"ids": ids}
        ).fetchall()
        texts = _row_texts(con, [row_id for _, row_id in alone] + [row_id for row_id, _ in living])
        for doc_id, row_id in alone:
            self.doc_text.setdefault(doc_id, texts[row_id])
        for row_id, doc_id in living:
            self.doc_text.setdefault(doc_id, texts[row_id])
            con.execute(
                f"INSERT INTO {live} ({live}, rowid, indexed_text) VALUES ('delete', ?, ?)", (row_id, texts[row_id])
            )
            con.execute(
                "UPDATE search_live_vectors SET refs = refs - 1 WHERE vault_id = ? AND doc_id = ?",
                (self.vault_id, doc_id),
            )
            self.live_changed = True
        con.execute("DELETE FROM search_live_vectors WHERE vault_id = ? AND refs <= 0", (self.vault_id,))
        con.execute("DELETE FROM search_rows WHERE note_id IN (SELECT value FROM json_each(?))", (ids,))
        con.execute("DELETE FROM search_bounded WHERE note_id IN (SELECT value FROM json_each(?))", (ids,))

    def put_back(self, note_ids: Iterable[int]) -> None:
        """Index again those of revisions ``note_ids`` that still exist, with their current birth and end."""
        con, live = self.con, live_table(self.vault_id)
        wanted = _ids(set(note_ids))
        notes = con.execute(
            """SELECT n.id, n.batch_id, e.batch_id, n.valid_from IS NOT NULL OR n.valid_to IS NOT NULL
               FROM notes n LEFT JOIN note_ends e ON e.note_id = n.id
               WHERE n.id IN (SELECT value FROM json_each(?)) AND n.kind != 'deleted'""",
            (wanted,),
        ).fetchall()
        texts = _texts(con, [n[0] for n in notes])
        new_docs: list[tuple[int, str]] = []
        for note_id, born, died, bounded in notes:
            rows = texts.get(note_id, [])
            docs = [self.indexer._doc(con, text, new_docs) for _, text in rows]
            con.executemany(
                "INSERT INTO search_rows (id, vault_id, note_id, doc_id, born, died) VALUES (?,?,?,?,?,?)",
                [(row_id, self.vault_id, note_id, doc_id, born, died) for (row_id, _), (doc_id, _) in zip(rows, docs)],
            )
            tokens = sum(length for _, length in docs)
            self._delta(born, len(rows), tokens, max((d for d, _ in docs), default=0))
            if died is not None:
                self._delta(died, -len(rows), -tokens)
            elif rows:
                self.live_changed = True
                con.executemany(f"INSERT INTO {live} (rowid, indexed_text) VALUES (?, ?)", rows)
                self.live_docs += [doc_id for doc_id, _ in docs]
            if bounded:
                con.execute(
                    "INSERT OR IGNORE INTO search_bounded (note_id, vault_id) VALUES (?, ?)", (note_id, self.vault_id)
                )
        if new_docs and not self.indexer.embedder.background:  # ``_doc`` counted them in search_doc_totals (a
            # background embedder's vectors are filled after: ``backfill``)
            write_vectors(con, self.indexer.embedder, new_docs)
        con.executemany(
            """INSERT INTO search_live_vectors (vault_id, doc_id, refs, embedding)
               SELECT ?, doc_id, 1, embedding FROM search_vectors WHERE doc_id = ?
               ON CONFLICT (vault_id, doc_id) DO UPDATE SET refs = refs + 1""",
            [(self.vault_id, doc_id) for doc_id in self.live_docs],
        )
        self.live_docs = []

    def finish(self) -> None:
        """Write the statistics' corrections, delete docs nothing uses, compact the FTS5 tables touched."""
        con = self.con
        con.executemany(
            """INSERT INTO search_stats (vault_id, batch_id, rows, tokens, max_doc) VALUES (?,?,?,?,?)
               ON CONFLICT (vault_id, batch_id) DO UPDATE SET rows = rows + excluded.rows,
                   tokens = tokens + excluded.tokens, max_doc = max(max_doc, excluded.max_doc)""",
            [(self.vault_id, batch, rows, tokens, max_doc) for batch, (rows, tokens, max_doc) in self.stats.items()],
        )
        con.execute(
            "DELETE FROM search_stats WHERE vault_id = ? AND batch_id NOT IN (SELECT id FROM batches)", (self.vault_id,)
        )
        unused = [
            doc_id
            for (doc_id,) in con.execute(
                """SELECT value FROM json_each(?) WHERE NOT EXISTS
               (SELECT 1 FROM search_rows r INDEXED BY search_rows_by_doc WHERE r.doc_id = value)""",
                (_ids(self.doc_text),),
            )
        ]
        for doc_id in unused:
            text = self.doc_text[doc_id]
            length, key = con.execute("SELECT length, hash FROM search_docs WHERE id = ?", (doc_id,)).fetchone()
            if key != content_key(text):  # never hand FTS5 a text the doc was not indexed with
                raise AssertionError(f"search doc {doc_id} does not hold the text it is deleted with")
            con.execute(
                "INSERT INTO search_fts (search_fts, rowid, indexed_text) VALUES ('delete', ?, ?)", (doc_id, text)
            )
            con.execute("DELETE FROM search_docs WHERE id = ?", (doc_id,))
            con.execute("DELETE FROM search_vectors WHERE doc_id = ?", (doc_id,))
            con.execute("UPDATE search_doc_totals SET docs = docs - 1, tokens = tokens - ? WHERE id = 1", (length,))
        tables = (["search_fts"] if unused else []) + ([live_table(self.vault_id)] if self.live_changed else [])
        for table in tables:  # one segment each: no deleted entry is left in an older segment
            con.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")

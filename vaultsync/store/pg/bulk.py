"""A vault's whole search index built in one pass on PostgreSQL (``vaultsync copy`` into a PostgreSQL database).

Batch by batch, the keyword indexer (``pg/keyword.py``) writes each chunk revision's doc, postings, vector and row,
then keeps the live set, the spans and the statistics in step, in some thirty statements per revision: copying the
Hub's whole history so took over a quarter of an hour, and the updates of the live tables, the rows and the spans
left dead row versions behind that grew the database several times. A copy writes its vaults' batches without the
indexer (``PgStore.deferred_index``) and then builds each copied vault's index here, in one transaction, from what
the batches wrote:

- the docs, in the order the indexer would have met them (revision by revision, each revision's indexable chunks in
  order), so each gets the id it would have had; their postings (each doc's once, in the table where it ends:
  ``search_live_terms`` for the docs of the vault's current revisions, found first, ``_final``), vectors (made by
  the store's embedder, as ``search.embedding.write_vectors`` makes them; none for a background embedder: filled
  after, as always) and the chunk rows (born: the revision's batch, died: the batch that ended it) streamed in
  with ``COPY``;
- then the rest computed in SQL from those rows, by the definitions the tests compare the kept tables with (the
  statistics, the live set, the spans), for this vault alone.

The tables are then those the indexer would have left (``tests/store/test_pg_bulk.py`` compares them, row for row),
so every answer is too. Only a vault with no index at all is built so (``PgStore.deferred_index`` decides). Copied
into a database that held no other vault, the indexes its batches grew row by row are then built again (``compact``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...embed.tokenizer import indexable, indexed_text
from ..codec import content_key, unpack
from ..search.embedding import embed_quantized
from . import postings, spans
from .ranking import tokens

STEP = 4000
"""Chunk revisions read (and their new docs written) per round."""

_ROWS = """SELECT n.id, n.batch_id, e.batch_id, n.title, n.aliases, c.id, c.heading_path, t.body
    FROM notes n JOIN chunks c ON c.note_id = n.id JOIN texts t ON t.id = c.text_id
    LEFT JOIN note_ends e ON e.note_id = n.id
    WHERE n.vault_id = %s AND n.kind <> 'deleted' ORDER BY n.id, c.ord"""
_CURRENT_ROWS = _ROWS.replace(" ORDER BY", " AND e.batch_id IS NULL ORDER BY")
"""``_ROWS`` of the revisions current at the end of the history (none ended them)."""

STATS = """
INSERT INTO search_stats (vault_id, batch_id, rows, tokens, max_doc)
    SELECT %(v)s, batch_id, sum(d_rows) OVER w, sum(d_tokens) OVER w, max(d_max) OVER w FROM (
        SELECT batch_id, sum(d_rows) AS d_rows, sum(d_tokens) AS d_tokens, max(d_max) AS d_max FROM (
            SELECT r.born AS batch_id, 1 AS d_rows, d.length AS d_tokens, r.doc_id AS d_max
                FROM search_rows r JOIN search_docs d ON d.id = r.doc_id WHERE r.vault_id = %(v)s
            UNION ALL
            SELECT r.died, -1, -d.length, NULL FROM search_rows r JOIN search_docs d ON d.id = r.doc_id
                WHERE r.vault_id = %(v)s AND r.died IS NOT NULL) AS x
        GROUP BY batch_id) AS y
    WINDOW w AS (ORDER BY batch_id)
"""
"""The vault's ``search_stats`` from its rows (``schema.STATS_FROM_ROWS`` and ``MAX_DOC_FROM_ROWS`` for one vault)."""

LIVE = """
INSERT INTO search_live (vault_id, doc_id, rows, length)
    SELECT r.vault_id, r.doc_id, count(*), min(d.length) FROM search_rows r JOIN search_docs d ON d.id = r.doc_id
    WHERE r.vault_id = %(v)s AND r.died IS NULL GROUP BY r.vault_id, r.doc_id
"""
"""The vault's live docs (``live.LIVE_FROM_ROWS`` for one vault)."""


ROWS_INDEXES = ["search_rows_by_doc", "search_rows_at"]
"""The chunk rows' indexes ``build`` drops and makes again after copying a database's first vault (as the postings'
GIN indexes: built over a whole table, an index takes less than one grown row by row)."""


COMPACTED = [
    "notes_by_path",
    "notes_by_hash",
    "notes_by_prev",
    "note_ends_pkey",
    "texts_hash_key",
    "blobs_hash_key",
    "chunks_by_text",
    "chunks_by_links",
    "search_docs_hash_key",
    f"{spans.TABLE}_at",
]
"""The indexes a copy fills row by row in an order their keys do not follow (hashes, paths, the notes' ids as they
end), which ``compact`` builds again: pages split as rows come are left two thirds to three quarters full, a built
index's 90% (on the Hub's first 150 commits, measured once by hand, 4.5 MB of them become 3.4 MB, for 2.9 MB of WAL
beside the copy's 50 MB and a tenth of a second). The others grow in their keys' order (the ids) and are as compact
grown as built."""


def compact(raw: Any) -> None:
    """Build ``COMPACTED`` again, in the caller's transaction: after copying into a database that held no other
    vault, and in migration m018 (``REINDEX`` locks each index's table against writes and the index against readers
    until the commit)."""
    raw.execute("; ".join(f"REINDEX INDEX {name}" for name in COMPACTED))


def build(con: Any, vault_id: int, embedder: Any) -> int:
    """Build the search index of vault ``vault_id``, which has none, from its revisions (see the module's text), in
    the caller's transaction; ``embedder``: whose vectors new docs get (None: none). Returns the chunk rows indexed."""
    raw = con.raw
    known = _Docs(raw)
    remade: list[str] = []  # the first vault of the database: the indexes of its rows made at once after them
    if not known.others:
        remade = _dropped(raw, ROWS_INDEXES)
        _dropped(raw, postings.INDEXES)  # (``postings.INDEX`` makes them again)
    writer = postings.Writer(raw)
    final = _final(raw, vault_id)
    count = 0
    for part in _revisions(raw, vault_id):
        docs: list[tuple[int, bytes, int]] = []
        fresh: list[tuple[int, dict[str, list[int]]]] = []
        live: set[int] = set()  # the new docs live at the end: written where ``live.add`` would leave them
        texts: list[tuple[int, str]] = []
        rows = []
        for note_id, born, died, chunk_id, text in part:
            key = content_key(text)
            doc = known.get(key)
            if doc is None:
                terms = tokens(text)
                doc = known.add(key, len(terms))
                docs.append((doc, key, len(terms)))
                fresh.append((doc, postings.by_term(terms)))
                texts.append((doc, text))
                if key in final:
                    live.add(doc)
            rows.append((chunk_id, vault_id, note_id, doc, born, died))
        _copy(raw, "search_docs (id, hash, length)", docs)
        writer.learn({term for _, at in fresh for term in at})  # (the new terms in one sorted run)
        writer.write([d for d in fresh if d[0] not in live])
        writer.write([d for d in fresh if d[0] in live], live=True)
        if texts and embedder is not None and not embedder.background:  # else filled after (``backfill``)
            blobs = embed_quantized(embedder, [text for _, text in texts])
            _copy(raw, "search_vectors (doc_id, embedding)", [(d, b) for (d, _), b in zip(texts, blobs) if any(b)])
        _copy(raw, "search_rows (id, vault_id, note_id, doc_id, born, died)", rows)
        count += len(rows)
    writer.flush()
    known.close()
    for definition in remade:
        raw.execute(definition)
    params = {"v": vault_id}
    raw.execute(
        "INSERT INTO search_bounded (note_id, vault_id) SELECT id, vault_id FROM notes WHERE vault_id = %(v)s "
        "AND kind <> 'deleted' AND (valid_from IS NOT NULL OR valid_to IS NOT NULL) ON CONFLICT DO NOTHING",
        params,
    )
    raw.execute(STATS, params)
    raw.execute(LIVE, params)
    raw.execute(postings.enter("SELECT doc_id FROM search_live WHERE vault_id = %(v)s"), params)
    if not known.others:
        raw.execute(postings.INDEX)
    if raw.execute("SELECT to_regclass(%s)", (spans.TABLE,)).fetchone()[0] is not None:
        spans.insert(raw, "vault_id = %(v)s", params)
    last = raw.execute("SELECT max(id) FROM batches WHERE vault_id = %s", (vault_id,)).fetchone()[0]
    if last is not None:  # (every batch holds a revision or a tombstone: the indexer saw the last one)
        raw.execute(
            "INSERT INTO search_state (vault_id, last_batch) VALUES (%s, %s) ON CONFLICT (vault_id) "
            "DO UPDATE SET last_batch = excluded.last_batch",
            (vault_id, last),
        )
    raw.execute(
        "ANALYZE search_docs, search_term_blocks, search_doc_terms, search_live_terms, search_rows, search_stats, "
        f"search_live, search_vectors, {spans.TABLE}"
    )
    return count


def _final(raw: Any, vault_id: int) -> set[bytes]:
    """The content keys of the docs live at the end of the vault's history (its current revisions' indexable chunks):
    each new doc's postings are written once, in the table where they end (``search_live_terms`` for these), none
    moved by ``postings.enter`` after (a row moved leaves a dead one behind, in the heap and its GIN index)."""
    return {content_key(text) for part in _revisions(raw, vault_id, current=True) for *_, text in part}


def _revisions(
    raw: Any, vault_id: int, *, current: bool = False
) -> Iterator[list[tuple[int, int, int | None, int, str]]]:
    """The vault's indexable chunk revisions in the indexer's order, ``STEP`` at a time: (note, born, died, chunk
    row id, indexed text); read through a server-side cursor (the whole history never in memory at once); with
    ``current``, only those of the revisions current at the end (not ended)."""
    part: list[tuple[int, int, int | None, int, str]] = []
    note: list[tuple] = []

    def flush() -> None:
        keep = indexable([text for *_, text in note])
        for (note_id, born, died, title, aliases, chunk_id, heading, text), ok in zip(note, keep):
            if ok:
                part.append((note_id, born, died, chunk_id, _indexed(title, aliases, heading, text)))
        note.clear()

    with raw.cursor(name="vaultsync_bulk_index") as cur:
        cur.itersize = STEP
        cur.execute(_CURRENT_ROWS if current else _ROWS, (vault_id,))
        for note_id, born, died, title, aliases, chunk_id, heading, body in cur:
            if note and note[0][0] != note_id:
                flush()
                if len(part) >= STEP:
                    yield part
                    part = []
            note.append((note_id, born, died, title, aliases, chunk_id, heading, unpack(bytes(body))))
        flush()
    if part:
        yield part


def _indexed(title: str | None, aliases: str | None, heading: str, text: str) -> str:
    import json

    return indexed_text(title, json.loads(aliases or "[]"), json.loads(heading), text)


class _Docs:
    """The docs met so far (hash → id): those already in the database (another vault's) and those made
    here, with ids taken from ``search_docs``' own sequence in the order they are met."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.found: dict[bytes, int] = {}
        self.others = raw.execute("SELECT EXISTS (SELECT 1 FROM search_docs)").fetchone()[0]
        self.sequence = raw.execute("SELECT pg_get_serial_sequence('search_docs', 'id')").fetchone()[0]
        self.next: int | None = None
        self.last: int | None = None

    def get(self, key: bytes) -> int | None:
        """The doc of this hash, met before or in the database (None: a new one)."""
        doc = self.found.get(key)
        if doc is None and self.others:
            row = self.raw.execute("SELECT id FROM search_docs WHERE hash = %s", (key,)).fetchone()
            if row is not None:
                doc = self.found[key] = int(row[0])
        return doc

    def add(self, key: bytes, length: int) -> int:
        """A new doc's id: the sequence's next, as an INSERT would have taken it."""
        if self.next is None:
            self.next = int(self.raw.execute("SELECT nextval(%s)", (self.sequence,)).fetchone()[0])
        doc, self.next = self.next, self.next + 1
        self.found[key] = doc
        self.last = doc
        return doc

    def close(self) -> None:
        """The sequence set past the last doc made (as if each had been inserted with it)."""
        if self.last is not None:
            self.raw.execute("SELECT setval(%s, %s)", (self.sequence, self.last))


def _dropped(raw: Any, names: list[str]) -> list[str]:
    """The definitions of the indexes ``names``, dropped."""
    found = [r[0] for r in raw.execute("SELECT pg_get_indexdef(i::regclass) FROM unnest(%s::text[]) AS i", (names,))]
    raw.execute("; ".join(f"DROP INDEX {name}" for name in names))
    return found


def _copy(raw: Any, target: str, rows: list[tuple]) -> None:
    if not rows:
        return
    with raw.cursor() as cur, cur.copy(f"COPY {target} FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)

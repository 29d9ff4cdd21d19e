"""The search index, kept in lock-step with the revision tables inside each batch's transaction.

Tables (all derived from the revision tables; ``vaultsync reindex --full`` rebuilds them):

- ``search_docs`` + ``search_fts``: every distinct ``indexed_text`` ever seen, indexed once
  (contentless FTS5, rowid = doc id, which grows with time), with its token count.
- ``search_rows``: one row per chunk revision (id = ``chunks.id``): its doc, and the batches in
  which it became visible (``born``) and stopped being visible (``died``).
- ``search_live_<vault>``: a contentless FTS5 table holding exactly the chunks visible now
  (insert on appear, the FTS5 ``'delete'`` command with the exact old text on end), so ``bm25()``
  on it is that of a fresh table over the current chunks.
- ``search_stats``: per batch, the change in visible chunk rows and tokens (cutoff statistics).
- ``search_vectors``: one int8 embedding per distinct doc; ``search_meta`` names the embedder.
- ``search_bounded``: note revisions that declare a validity interval.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable

import apsw

from ..embed import DEFAULT_EMBEDDER, EMBEDDERS, Embedder, get_embedder, quantize
from ..errors import ProviderError, StoreError
from ..store.read import unpack
from ..store.write import ChunkRow
from .text import TEXT_VERSION, TOKENIZE, indexed_text

logger = logging.getLogger(__name__)

def live_table(vault_id: int) -> str:
    return f"search_live_{int(vault_id)}"


def doc_hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def has_schema(con: apsw.Connection) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE name = 'search_meta'").fetchone() is not None


def meta(con: apsw.Connection, key: str) -> str | None:
    row = con.execute("SELECT value FROM search_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def set_meta(con: apsw.Connection, key: str, value: str) -> None:
    con.execute("INSERT OR REPLACE INTO search_meta (key, value) VALUES (?, ?)", (key, value))


LIVE_VECTORS_REBUILD = """
    DELETE FROM search_live_vectors;
    INSERT INTO search_live_vectors (vault_id, doc_id, refs, embedding)
    SELECT r.vault_id, r.doc_id, count(*), v.embedding FROM search_rows r INDEXED BY search_rows_live
    JOIN search_vectors v ON v.doc_id = r.doc_id WHERE r.died IS NULL GROUP BY r.vault_id, r.doc_id;"""

UPGRADES = [
    # 2: covering indexes for the visible rows at a cutoff (vectors scan them) and now
    """DROP INDEX IF EXISTS search_rows_by_born;
    CREATE INDEX IF NOT EXISTS search_rows_at ON search_rows(vault_id, born, died, doc_id, note_id);
    CREATE INDEX IF NOT EXISTS search_rows_live ON search_rows(vault_id, doc_id, note_id) WHERE died IS NULL;""",
    # 3: the vectors of the docs visible now, per vault, so that a query now scans only those
    """CREATE TABLE IF NOT EXISTS search_live_vectors (
        vault_id  INTEGER NOT NULL,
        doc_id    INTEGER NOT NULL,
        refs      INTEGER NOT NULL,               -- visible chunk rows using the doc
        embedding BLOB NOT NULL,
        PRIMARY KEY (vault_id, doc_id)
    ) WITHOUT ROWID;""" + LIVE_VECTORS_REBUILD,
]
"""Schema changes after version 1, applied in order (``search_meta.schema_version`` counts them)."""


def ensure_schema(con: apsw.Connection) -> None:
    """Create or upgrade the search tables (idempotent); refuse an index built another way."""
    if has_schema(con):
        stored = (meta(con, "tokenizer"), meta(con, "text_version"))
        if stored != (TOKENIZE, str(TEXT_VERSION)):
            raise StoreError(
                f"the search index was built with tokenizer {stored[0]!r}, text version {stored[1]}; "
                "run `vaultsync reindex --full` to rebuild it"
            )
        _upgrade(con)
        return
    _create(con)
    _upgrade(con)


def _upgrade(con: apsw.Connection) -> None:
    version = int(meta(con, "schema_version") or 1)
    for number, step in enumerate(UPGRADES[version - 1:], start=version + 1):
        with con:
            con.execute(step)
            set_meta(con, "schema_version", str(number))


def _create(con: apsw.Connection) -> None:
    with con:
        con.execute(
            f"""
            CREATE TABLE search_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE search_docs (
                id      INTEGER PRIMARY KEY,           -- = search_fts rowid; grows with time
                hash    BLOB NOT NULL UNIQUE,          -- blake2b-128 of indexed_text
                length  INTEGER NOT NULL               -- tokens, as FTS5 counted them
            );
            CREATE TABLE search_doc_totals (id INTEGER PRIMARY KEY CHECK (id = 1), docs INTEGER, tokens INTEGER);
            INSERT INTO search_doc_totals VALUES (1, 0, 0);
            CREATE VIRTUAL TABLE search_fts USING fts5(indexed_text, content='', tokenize='{TOKENIZE}');
            CREATE TABLE search_rows (
                id       INTEGER PRIMARY KEY,          -- = chunks.id
                vault_id INTEGER NOT NULL,
                note_id  INTEGER NOT NULL,
                doc_id   INTEGER NOT NULL,
                born     INTEGER NOT NULL,             -- batch in which it became visible
                died     INTEGER                       -- batch in which it stopped being visible
            );
            CREATE INDEX search_rows_by_doc ON search_rows(doc_id, born, died, vault_id, note_id);
            CREATE INDEX search_rows_by_note ON search_rows(note_id);
            CREATE TABLE search_stats (
                vault_id INTEGER NOT NULL,
                batch_id INTEGER NOT NULL,
                rows     INTEGER NOT NULL,             -- change in visible chunk rows
                tokens   INTEGER NOT NULL,             -- change in their total tokens
                max_doc  INTEGER NOT NULL,             -- highest doc id after the batch
                PRIMARY KEY (vault_id, batch_id)
            ) WITHOUT ROWID;
            CREATE TABLE search_vectors (doc_id INTEGER PRIMARY KEY, embedding BLOB NOT NULL);
            CREATE TABLE search_state (vault_id INTEGER PRIMARY KEY, last_batch INTEGER NOT NULL);
            CREATE TABLE search_bounded (note_id INTEGER PRIMARY KEY, vault_id INTEGER NOT NULL);
            """
        )
        set_meta(con, "schema_version", "1")
        set_meta(con, "tokenizer", TOKENIZE)
        set_meta(con, "text_version", str(TEXT_VERSION))


def drop_schema(con: apsw.Connection) -> None:
    """Remove every search table (before a full rebuild)."""
    names = [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'search\\_%' ESCAPE '\\' "
        "AND sql LIKE 'CREATE VIRTUAL%'")]
    names += [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'search\\_%' ESCAPE '\\' "
        "AND sql NOT LIKE 'CREATE VIRTUAL%' AND name NOT LIKE 'search\\_fts\\_%' ESCAPE '\\' "
        "AND name NOT LIKE 'search\\_live\\_%\\_%' ESCAPE '\\'")]
    with con:
        for name in names:
            con.execute(f'DROP TABLE IF EXISTS "{name}"')


def _varint(blob: bytes) -> int:
    """The first SQLite varint of an FTS5 ``%_docsize`` record (the row's token count)."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return value


def check_embedder(con: apsw.Connection, embedder: Embedder) -> str | None:
    """Why ``embedder``'s vectors may not join the store's (None when they may)."""
    recorded = meta(con, "embedder_signature")
    if recorded is None or recorded == embedder.signature:
        return None
    return (f"this store's vectors were made by embedder {recorded}, not {embedder.signature}; vectors are never "
            f"mixed: run `vaultsync reembed --embedder {embedder.embedder_id}` to switch")


def unknown_embedder(name: str) -> str:
    return (f"this store's vectors were made by embedder {name!r}, which this vaultsync does not have; "
            f"run `vaultsync reembed --embedder {DEFAULT_EMBEDDER}` to switch")


def query_embedder(con: apsw.Connection) -> Embedder:
    """The embedder that made the store's vectors (ProviderError when it is missing or has changed)."""
    name = store_embedder(con)
    if name not in EMBEDDERS:
        raise ProviderError(unknown_embedder(name))
    embedder = get_embedder(name)
    problem = check_embedder(con, embedder)
    if problem:
        raise ProviderError(problem)
    return embedder


def store_embedder(con: apsw.Connection) -> str:
    """The registry name of the embedder whose vectors the store holds (recording the default if none)."""
    return meta(con, "embedder") or DEFAULT_EMBEDDER


class SearchIndexer:
    """The ``Indexer`` the batch writer calls: docs, rows, live table, statistics and vectors."""

    def __init__(self, con: apsw.Connection, embedder: Embedder | None = None) -> None:
        ensure_schema(con)
        with con:
            name = meta(con, "embedder")
            if name is None:
                name = DEFAULT_EMBEDDER if embedder is None else embedder.embedder_id
                set_meta(con, "embedder", name)
                set_meta(con, "embedder_signature", (embedder or get_embedder(name)).signature)
        if embedder is None and name not in EMBEDDERS:
            self.embedder = get_embedder(DEFAULT_EMBEDDER)
            self.mismatch: str | None = unknown_embedder(name)
        else:
            self.embedder = embedder or get_embedder(name)
            self.mismatch = check_embedder(con, self.embedder)
        if embedder is not None and self.mismatch:
            raise ProviderError(self.mismatch)
        self._checked: int | None = None
        self._live_ready: set[int] = set()

    # ------------------------------------------------------------ the Indexer hooks

    def on_revision(self, con: apsw.Connection, batch_id: int, note_id: int, chunks: list[ChunkRow]) -> None:
        if self.mismatch:
            raise ProviderError(self.mismatch)
        vault_id, valid_from, valid_to = con.execute(
            "SELECT vault_id, valid_from, valid_to FROM notes WHERE id = ?", (note_id,)).fetchone()
        self._catch_up_before(con, vault_id, batch_id)
        self._add(con, vault_id, batch_id, note_id,
                  [(c.row_id, indexed_text(c.title, c.aliases, c.heading_path, c.text)) for c in chunks],
                  bounded=valid_from is not None or valid_to is not None)

    def on_end(self, con: apsw.Connection, batch_id: int, note_id: int) -> None:
        vault_id = con.execute("SELECT vault_id FROM notes WHERE id = ?", (note_id,)).fetchone()[0]
        self._catch_up_before(con, vault_id, batch_id)
        self._end(con, vault_id, batch_id, note_id)

    # ------------------------------------------------------------ the work

    def _live(self, con: apsw.Connection, vault_id: int) -> str:
        name = live_table(vault_id)
        if vault_id not in self._live_ready:
            con.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5(indexed_text, content='', "
                        f"tokenize='{TOKENIZE}')")
            self._live_ready.add(vault_id)
        return name

    def _doc(self, con: apsw.Connection, text: str, new_docs: list[tuple[int, str]]) -> tuple[int, int]:
        key = doc_hash(text)
        row = con.execute("SELECT id, length FROM search_docs WHERE hash = ?", (key,)).fetchone()
        if row is not None:
            return row[0], row[1]
        doc_id = con.execute("SELECT coalesce(max(id), 0) + 1 FROM search_docs").fetchone()[0]
        con.execute("INSERT INTO search_fts (rowid, indexed_text) VALUES (?, ?)", (doc_id, text))
        size = con.execute("SELECT sz FROM search_fts_docsize WHERE id = ?", (doc_id,)).fetchone()
        length = _varint(size[0]) if size else 0
        con.execute("INSERT INTO search_docs (id, hash, length) VALUES (?, ?, ?)", (doc_id, key, length))
        con.execute("UPDATE search_doc_totals SET docs = docs + 1, tokens = tokens + ? WHERE id = 1", (length,))
        new_docs.append((doc_id, text))
        return doc_id, length

    def _add(self, con: apsw.Connection, vault_id: int, batch_id: int, note_id: int,
             rows: list[tuple[int, str]], *, bounded: bool) -> None:
        live = self._live(con, vault_id)
        new_docs: list[tuple[int, str]] = []
        tokens = 0
        docs = []
        for _, text in rows:
            docs.append(self._doc(con, text, new_docs))
        if new_docs:
            _write_vectors(con, self.embedder, new_docs)
        for (row_id, text), (doc_id, length) in zip(rows, docs):
            tokens += length
            con.execute("INSERT INTO search_rows (id, vault_id, note_id, doc_id, born) VALUES (?,?,?,?,?)",
                        (row_id, vault_id, note_id, doc_id, batch_id))
            con.execute(f"INSERT INTO {live} (rowid, indexed_text) VALUES (?, ?)", (row_id, text))
            con.execute(
                """INSERT INTO search_live_vectors (vault_id, doc_id, refs, embedding)
                   SELECT ?, doc_id, 1, embedding FROM search_vectors WHERE doc_id = ?
                   ON CONFLICT (vault_id, doc_id) DO UPDATE SET refs = refs + 1""", (vault_id, doc_id))
        if bounded:
            con.execute("INSERT OR IGNORE INTO search_bounded (note_id, vault_id) VALUES (?, ?)", (note_id, vault_id))
        self._stats(con, vault_id, batch_id, len(rows), tokens)

    def _end(self, con: apsw.Connection, vault_id: int, batch_id: int, note_id: int) -> None:
        live = self._live(con, vault_id)
        rows = con.execute(
            """SELECT c.id, c.heading_path, t.body, n.title, n.aliases, d.length, d.id
               FROM chunks c JOIN texts t ON t.id = c.text_id JOIN notes n ON n.id = c.note_id
               JOIN search_rows r ON r.id = c.id JOIN search_docs d ON d.id = r.doc_id
               WHERE c.note_id = ? AND r.died IS NULL""",
            (note_id,),
        ).fetchall()
        tokens = 0
        for row_id, heading_path, body, title, aliases, length, doc_id in rows:
            text = indexed_text(title, json.loads(aliases or "[]"), json.loads(heading_path), unpack(body))
            con.execute(f"INSERT INTO {live} ({live}, rowid, indexed_text) VALUES ('delete', ?, ?)", (row_id, text))
            con.execute("UPDATE search_live_vectors SET refs = refs - 1 WHERE vault_id = ? AND doc_id = ?",
                        (vault_id, doc_id))
            tokens += length
        con.execute("DELETE FROM search_live_vectors WHERE vault_id = ? AND refs <= 0", (vault_id,))
        con.execute("UPDATE search_rows SET died = ? WHERE note_id = ? AND died IS NULL", (batch_id, note_id))
        self._stats(con, vault_id, batch_id, -len(rows), -tokens)

    def _stats(self, con: apsw.Connection, vault_id: int, batch_id: int, rows: int, tokens: int) -> None:
        max_doc = con.execute("SELECT coalesce(max(id), 0) FROM search_docs").fetchone()[0]
        con.execute(
            """INSERT INTO search_stats (vault_id, batch_id, rows, tokens, max_doc) VALUES (?,?,?,?,?)
               ON CONFLICT (vault_id, batch_id) DO UPDATE SET rows = rows + excluded.rows,
                   tokens = tokens + excluded.tokens, max_doc = excluded.max_doc""",
            (vault_id, batch_id, rows, tokens, max_doc),
        )

    # ------------------------------------------------------------ catching up

    def _catch_up_before(self, con: apsw.Connection, vault_id: int, batch_id: int) -> None:
        """Index any earlier batch written without this indexer (e.g. a database from before search)."""
        if self._checked == batch_id:
            return
        self.catch_up(con, vault_id, upto=batch_id - 1)
        con.execute("INSERT OR REPLACE INTO search_state (vault_id, last_batch) VALUES (?, ?)", (vault_id, batch_id))
        self._checked = batch_id

    def catch_up(self, con: apsw.Connection, vault_id: int, upto: int | None = None) -> int:
        """Index the vault's batches after the last indexed one, up to ``upto`` (default all); return how many."""
        row = con.execute("SELECT last_batch FROM search_state WHERE vault_id = ?", (vault_id,)).fetchone()
        last = row[0] if row else 0
        batches = [r[0] for r in con.execute(
            "SELECT id FROM batches WHERE vault_id = ? AND id > ? AND id <= ? ORDER BY id",
            (vault_id, last, upto if upto is not None else 1 << 62))]
        for batch_id in batches:
            self._replay(con, vault_id, batch_id)
            con.execute("INSERT OR REPLACE INTO search_state (vault_id, last_batch) VALUES (?, ?)", (vault_id, batch_id))
        if batches:
            logger.info("search index: caught up %d batches of vault %d", len(batches), vault_id)
        return len(batches)

    def _replay(self, con: apsw.Connection, vault_id: int, batch_id: int) -> None:
        for (note_id,) in con.execute("SELECT note_id FROM note_ends WHERE batch_id = ? ORDER BY note_id",
                                      (batch_id,)).fetchall():
            self._end(con, vault_id, batch_id, note_id)
        notes = con.execute(
            """SELECT id, title, aliases, valid_from, valid_to FROM notes
               WHERE batch_id = ? AND kind != 'deleted' ORDER BY id""", (batch_id,)).fetchall()
        for note_id, title, aliases, valid_from, valid_to in notes:
            alias_list = json.loads(aliases or "[]")
            rows = [(row_id, indexed_text(title, alias_list, json.loads(heading_path), unpack(body)))
                    for row_id, heading_path, body in con.execute(
                        """SELECT c.id, c.heading_path, t.body FROM chunks c JOIN texts t ON t.id = c.text_id
                           WHERE c.note_id = ? ORDER BY c.ord""", (note_id,))]
            self._add(con, vault_id, batch_id, note_id, rows,
                      bounded=valid_from is not None or valid_to is not None)


def index_lag(con: apsw.Connection, vault_id: int) -> int:
    """How many of the vault's batches the search index has not seen (-1: no search index at all)."""
    if not has_schema(con):
        return -1
    row = con.execute("SELECT last_batch FROM search_state WHERE vault_id = ?", (vault_id,)).fetchone()
    last = row[0] if row else 0
    return con.execute("SELECT count(*) FROM batches WHERE vault_id = ? AND id > ?", (vault_id, last)).fetchone()[0]


def doc_texts(con: apsw.Connection) -> Iterable[tuple[int, str]]:
    """Every indexed doc with its ``indexed_text``, regenerated from one chunk revision that uses it."""
    rows = con.execute(
        """SELECT r.doc_id, c.heading_path, t.body, n.title, n.aliases
           FROM (SELECT doc_id, min(id) AS id FROM search_rows GROUP BY doc_id) r
           JOIN chunks c ON c.id = r.id JOIN texts t ON t.id = c.text_id JOIN notes n ON n.id = c.note_id
           ORDER BY r.doc_id""")
    for doc_id, heading_path, body, title, aliases in rows:
        yield doc_id, indexed_text(title, json.loads(aliases or "[]"), json.loads(heading_path), unpack(body))


def reembed(con: apsw.Connection, embedder: Embedder) -> int:
    """Replace every vector with ``embedder``'s, in one transaction; return how many docs were embedded."""
    ensure_schema(con)
    with con:
        con.execute("DELETE FROM search_vectors")
        count = 0
        batch: list[tuple[int, str]] = []
        for doc in list(doc_texts(con)):
            batch.append(doc)
            if len(batch) >= 512:
                _write_vectors(con, embedder, batch)
                count, batch = count + len(batch), []
        _write_vectors(con, embedder, batch)
        count += len(batch)
        con.execute(LIVE_VECTORS_REBUILD)
        set_meta(con, "embedder", embedder.embedder_id)
        set_meta(con, "embedder_signature", embedder.signature)
    return count


def _write_vectors(con: apsw.Connection, embedder: Embedder, docs: list[tuple[int, str]]) -> None:
    for (doc_id, _), vector in zip(docs, embedder.embed_many(t for _, t in docs)):
        blob = quantize(vector)
        if any(blob):
            con.execute("INSERT INTO search_vectors (doc_id, embedding) VALUES (?, ?)", (doc_id, blob))

"""The search index's tables (created by the store's migration ``m002_search``) and its metadata record.

See ``index`` for what each table holds."""

from __future__ import annotations

import apsw

from ...embed.tokenizer import TEXT_VERSION, TOKENIZE
from ...errors import StoreError


def live_table(vault_id: int) -> str:
    return f"search_live_{int(vault_id)}"


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

OPEN = 9223372036854775807
"""``search_spans.died`` of rows still visible (later than any batch)."""

SPANS = f"""
    CREATE TABLE IF NOT EXISTS search_spans (
        doc_id   INTEGER NOT NULL,
        vault_id INTEGER NOT NULL,
        born     INTEGER NOT NULL,
        died     INTEGER NOT NULL,              -- {OPEN} while visible
        rows     INTEGER NOT NULL,              -- search_rows with these four values
        PRIMARY KEY (doc_id, vault_id, born, died)
    ) WITHOUT ROWID;
    CREATE TRIGGER IF NOT EXISTS search_spans_in AFTER INSERT ON search_rows BEGIN
        INSERT INTO search_spans (doc_id, vault_id, born, died, rows)
        VALUES (NEW.doc_id, NEW.vault_id, NEW.born, coalesce(NEW.died, {OPEN}), 1)
        ON CONFLICT (doc_id, vault_id, born, died) DO UPDATE SET rows = rows + 1;
    END;
    CREATE TRIGGER IF NOT EXISTS search_spans_out AFTER DELETE ON search_rows BEGIN
        UPDATE search_spans SET rows = rows - 1 WHERE doc_id = OLD.doc_id AND vault_id = OLD.vault_id
            AND born = OLD.born AND died = coalesce(OLD.died, {OPEN});
        DELETE FROM search_spans WHERE doc_id = OLD.doc_id AND vault_id = OLD.vault_id AND born = OLD.born
            AND died = coalesce(OLD.died, {OPEN}) AND rows <= 0;
    END;
    CREATE TRIGGER IF NOT EXISTS search_spans_moved AFTER UPDATE OF doc_id, vault_id, born, died ON search_rows BEGIN
        UPDATE search_spans SET rows = rows - 1 WHERE doc_id = OLD.doc_id AND vault_id = OLD.vault_id
            AND born = OLD.born AND died = coalesce(OLD.died, {OPEN});
        DELETE FROM search_spans WHERE doc_id = OLD.doc_id AND vault_id = OLD.vault_id AND born = OLD.born
            AND died = coalesce(OLD.died, {OPEN}) AND rows <= 0;
        INSERT INTO search_spans (doc_id, vault_id, born, died, rows)
        VALUES (NEW.doc_id, NEW.vault_id, NEW.born, coalesce(NEW.died, {OPEN}), 1)
        ON CONFLICT (doc_id, vault_id, born, died) DO UPDATE SET rows = rows + 1;
    END;"""
"""``search_spans``: how many chunk rows use each doc in each vault with the same lifetime, kept equal to
``search_rows`` by its triggers (whatever writes the rows: indexing, a purge's repair, a rebuild). A cutoff
counts a doc's visible rows from one or two spans instead of one index entry per row (copies of a note,
the unchanged chunks of a history)."""

SPANS_RECOUNT = f"""
    DELETE FROM search_spans;
    INSERT INTO search_spans (doc_id, vault_id, born, died, rows)
    SELECT doc_id, vault_id, born, coalesce(died, {OPEN}), count(*) FROM search_rows GROUP BY 1, 2, 3, 4;"""


def has_spans(con: apsw.Connection) -> bool:
    """True when ``search_spans`` exists (from the store's migration ``m008_search_spans``)."""
    return con.execute("SELECT 1 FROM sqlite_master WHERE name = 'search_spans'").fetchone() is not None


def create(con: apsw.Connection) -> None:
    """Create the search tables, or bring those of an older vaultsync up to date (idempotent).

    Called inside a transaction: by the migrations ``m002_search`` and ``m008_search_spans`` and after
    ``drop_schema``.
    """
    existed = has_schema(con)
    spans = has_spans(con)
    con.execute(
        f"""
        CREATE TABLE IF NOT EXISTS search_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS search_docs (
            id      INTEGER PRIMARY KEY,           -- = search_fts rowid; grows with time
            hash    BLOB NOT NULL UNIQUE,          -- content_key() of indexed_text
            length  INTEGER NOT NULL               -- tokens, as FTS5 counted them
        );
        CREATE TABLE IF NOT EXISTS search_doc_totals (id INTEGER PRIMARY KEY CHECK (id = 1), docs INTEGER,
                                                      tokens INTEGER);
        INSERT OR IGNORE INTO search_doc_totals VALUES (1, 0, 0);
        CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5(indexed_text, content='', tokenize='{TOKENIZE}');
        CREATE TABLE IF NOT EXISTS search_rows (
            id       INTEGER PRIMARY KEY,          -- = chunks.id
            vault_id INTEGER NOT NULL,
            note_id  INTEGER NOT NULL,
            doc_id   INTEGER NOT NULL,
            born     INTEGER NOT NULL,             -- batch in which it became visible
            died     INTEGER                       -- batch in which it stopped being visible
        );
        CREATE INDEX IF NOT EXISTS search_rows_by_doc ON search_rows(doc_id, born, died, vault_id, note_id);
        CREATE INDEX IF NOT EXISTS search_rows_by_note ON search_rows(note_id);
        DROP INDEX IF EXISTS search_rows_by_born;
        CREATE INDEX IF NOT EXISTS search_rows_at ON search_rows(vault_id, born, died, doc_id, note_id);
        CREATE INDEX IF NOT EXISTS search_rows_live ON search_rows(vault_id, doc_id, note_id) WHERE died IS NULL;
        CREATE TABLE IF NOT EXISTS search_stats (
            vault_id INTEGER NOT NULL,
            batch_id INTEGER NOT NULL,
            rows     INTEGER NOT NULL,             -- change in visible chunk rows
            tokens   INTEGER NOT NULL,             -- change in their total tokens
            max_doc  INTEGER NOT NULL,             -- highest doc id after the batch
            PRIMARY KEY (vault_id, batch_id)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS search_vectors (doc_id INTEGER PRIMARY KEY, embedding BLOB NOT NULL);
        CREATE TABLE IF NOT EXISTS search_live_vectors (
            vault_id  INTEGER NOT NULL,
            doc_id    INTEGER NOT NULL,
            refs      INTEGER NOT NULL,               -- visible chunk rows using the doc
            embedding BLOB NOT NULL,
            PRIMARY KEY (vault_id, doc_id)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS search_state (vault_id INTEGER PRIMARY KEY, last_batch INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS search_bounded (note_id INTEGER PRIMARY KEY, vault_id INTEGER NOT NULL);
        """
    )
    con.execute(SPANS)
    if not spans:
        con.execute(SPANS_RECOUNT)  # rows indexed before the spans existed
    if existed and int(meta(con, "schema_version") or 1) < CURRENT:
        con.execute(LIVE_VECTORS_REBUILD)  # made before search_live_vectors existed (search schema 1 or 2)
    if not existed:
        set_meta(con, "tokenizer", TOKENIZE)
        set_meta(con, "text_version", str(TEXT_VERSION))
    set_meta(con, "schema_version", str(CURRENT))


CURRENT = 3
"""The search tables' own version, as vaultsync 0.1.0 counted it (kept so that an older database
read-only is known to be readable as it is)."""


def check_text_version(con: apsw.Connection) -> None:
    """Refuse an index tokenized another way than this vaultsync tokenizes."""
    stored = (meta(con, "tokenizer"), meta(con, "text_version"))
    if stored != (TOKENIZE, str(TEXT_VERSION)):
        raise StoreError(
            f"the search index was built with tokenizer {stored[0]!r}, text version {stored[1]}; "
            "a full reindex rebuilds it",
            remedy="reindex",
            remedy_args={"full": True},
        )


def current(con: apsw.Connection) -> bool:
    """True when the search tables exist at the current layout (an older database may be read as it is)."""
    return has_schema(con) and int(meta(con, "schema_version") or 1) >= CURRENT


def drop_schema(con: apsw.Connection) -> None:
    """Remove every search table (before a full rebuild)."""
    names = [
        r[0]
        for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'search\\_%' ESCAPE '\\' "
            "AND sql LIKE 'CREATE VIRTUAL%'"
        )
    ]
    names += [
        r[0]
        for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'search\\_%' ESCAPE '\\' "
            "AND sql NOT LIKE 'CREATE VIRTUAL%' AND name NOT LIKE 'search\\_fts\\_%' ESCAPE '\\' "
            "AND name NOT LIKE 'search\\_live\\_%\\_%' ESCAPE '\\'"
        )
    ]
    with con:
        for name in names:
            con.execute(f'DROP TABLE IF EXISTS "{name}"')

"""The SQLite engine's migrations: ordered functions ``m001_…`` applied once each, recorded by name
(``store/migrations.py``; ``PRAGMA user_version`` keeps their count for older vaultsyncs)."""

from __future__ import annotations

from collections.abc import Callable

import apsw

from ..times import now_micros
from . import migrations
from .expected_shape import SQLITE
from .migrations import State, name_of, refuse_newer
from .shape import refuse_unless_whole, sqlite_shape

Migration = Callable[[apsw.Connection], None]
MIGRATIONS: list[Migration] = []
migration = MIGRATIONS.append

# Revision data is append-only: these tables refuse UPDATE and DELETE.
APPEND_ONLY_TABLES = ["batches", "dictionaries", "texts", "blobs", "notes", "note_ends", "chunks", "git_commits"]


def append_only_triggers(table: str) -> str:
    return f"""
    CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table}
    BEGIN SELECT RAISE(ABORT, 'append-only: {table} rows are never updated'); END;
    CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table}
    BEGIN SELECT RAISE(ABORT, 'append-only: {table} rows are never deleted'); END;
    """


@migration
def m001_core(con: apsw.Connection) -> None:
    con.execute(
        """
        CREATE TABLE vaults (
            id          INTEGER PRIMARY KEY,
            name        TEXT NOT NULL UNIQUE,
            root        TEXT NOT NULL,
            created_at  INTEGER NOT NULL
        );
        -- One atomic batch of observations; known_at never decreases within a vault.
        CREATE TABLE batches (
            id          INTEGER PRIMARY KEY,
            vault_id    INTEGER NOT NULL REFERENCES vaults(id),
            known_at    INTEGER NOT NULL,          -- UTC microseconds: when vaultsync learned it
            source      TEXT NOT NULL,             -- import | watch | git | write
            detail      TEXT,                      -- e.g. the git commit
            created_at  INTEGER NOT NULL           -- wall clock when written (information only)
        );
        CREATE INDEX batches_by_time ON batches(vault_id, known_at, id);
        CREATE TRIGGER batches_monotonic BEFORE INSERT ON batches
        WHEN NEW.known_at < (SELECT max(known_at) FROM batches WHERE vault_id = NEW.vault_id)
        BEGIN SELECT RAISE(ABORT, 'known_at earlier than the vault''s last batch'); END;

        -- Compression dictionaries trained on the vault's own text (see store/codec.py).
        CREATE TABLE dictionaries (
            id          INTEGER PRIMARY KEY,
            hash        BLOB NOT NULL UNIQUE,      -- blake2b-64: the key stored bodies name
            body        BLOB NOT NULL
        );

        -- Distinct chunk texts, stored once whatever notes or revisions use them.
        CREATE TABLE texts (
            id          INTEGER PRIMARY KEY,
            hash        BLOB NOT NULL UNIQUE,      -- blake2b-128 of the UTF-8 text
            body        BLOB NOT NULL              -- compressed UTF-8 (store/codec.py)
        );

        -- Other distinct values stored once, compressed JSON: the links found in a chunk.
        CREATE TABLE blobs (
            id          INTEGER PRIMARY KEY,
            hash        BLOB NOT NULL UNIQUE,      -- blake2b-128 of the UTF-8 JSON
            body        BLOB NOT NULL              -- compressed UTF-8 JSON (store/codec.py)
        );

        -- Note revisions. A deletion is a tombstone row (content_hash NULL).
        CREATE TABLE notes (
            id           INTEGER PRIMARY KEY,
            vault_id     INTEGER NOT NULL REFERENCES vaults(id),
            batch_id     INTEGER NOT NULL REFERENCES batches(id),
            path         TEXT NOT NULL,            -- vault-relative POSIX path, NFC
            kind         TEXT NOT NULL CHECK (kind IN ('created','modified','renamed','deleted')),
            prev_id      INTEGER REFERENCES notes(id),   -- revision this one follows (same path, or rename source)
            renamed_from TEXT,                     -- kind='renamed': the old path
            renamed_to   TEXT,                     -- a tombstone left by a rename: the new path
            content_hash TEXT,                     -- sha256 hex of the file bytes
            size         INTEGER,
            title        TEXT,
            frontmatter  TEXT,                     -- JSON object, or NULL
            tags         TEXT,                     -- JSON array
            aliases      TEXT,                     -- JSON array
            warnings     TEXT,                     -- JSON array
            valid_from   INTEGER,                  -- validity overlay from frontmatter (UTC micros)
            valid_to     INTEGER,
            mtime_ns     INTEGER                   -- information only, never evidence of knowledge
        );
        CREATE INDEX notes_by_path ON notes(vault_id, path, batch_id);
        CREATE INDEX notes_by_batch ON notes(vault_id, batch_id);

        -- When a live revision stopped being current (modified, deleted or renamed away).
        CREATE TABLE note_ends (
            note_id     INTEGER PRIMARY KEY REFERENCES notes(id),
            batch_id    INTEGER NOT NULL REFERENCES batches(id)
        );

        -- Chunk revisions: the ordered chunks of each note revision.
        CREATE TABLE chunks (
            id           INTEGER PRIMARY KEY,
            note_id      INTEGER NOT NULL REFERENCES notes(id),
            ord          INTEGER NOT NULL,
            chunk_id     TEXT NOT NULL,            -- stable ID within the note
            text_id      INTEGER NOT NULL REFERENCES texts(id),
            heading_path TEXT NOT NULL,            -- JSON array of headings
            line_start   INTEGER NOT NULL,
            line_end     INTEGER NOT NULL,
            kind         TEXT NOT NULL,
            links_id     INTEGER REFERENCES blobs(id)   -- links in this chunk, lines relative to it
        );
        CREATE INDEX chunks_by_note ON chunks(note_id, ord);

        CREATE TABLE git_commits (
            vault_id     INTEGER NOT NULL REFERENCES vaults(id),
            sha          TEXT NOT NULL,
            committed_at INTEGER NOT NULL,
            batch_id     INTEGER REFERENCES batches(id),   -- NULL when the commit changed nothing here
            PRIMARY KEY (vault_id, sha)
        );

        -- A cache of what each file looked like when last read (size, mtime), to skip unchanged
        -- files cheaply. Not history: rewritten freely, always inside the batch's transaction.
        CREATE TABLE file_state (
            vault_id     INTEGER NOT NULL,
            path         TEXT NOT NULL,
            size         INTEGER NOT NULL,
            mtime_ns     INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            PRIMARY KEY (vault_id, path)
        ) WITHOUT ROWID;
        """
    )
    for table in APPEND_ONLY_TABLES:
        con.execute(append_only_triggers(table))


@migration
def m002_search(con: apsw.Connection) -> None:
    """The search index's tables (vaultsync 0.1.0 created them outside this list, on first write)."""
    from .search import schema as search_schema

    search_schema.create(con)


@migration
def m003_purges(con: apsw.Connection) -> None:
    """The record of every purge: the one sanctioned exception to append-only (see store/purge.py).

    It says when, which kind of purge and how much it touched; never the purged text, a path or a
    hash of either. ``scrubbed_at`` is set once free pages and the WAL were wiped after it.
    """
    con.execute(
        """
        CREATE TABLE purges (
            id                 INTEGER PRIMARY KEY,
            vault_id           INTEGER NOT NULL REFERENCES vaults(id),
            at                 INTEGER NOT NULL,     -- wall clock, UTC micros
            command            TEXT NOT NULL,        -- 'text' | 'note' | 'before'
            detail             TEXT,                 -- e.g. '2 strings', or the retention horizon for 'before'
            horizon            INTEGER,              -- 'before': history earlier than this was dropped
            revisions_changed  INTEGER NOT NULL,
            revisions_removed  INTEGER NOT NULL,
            notes              INTEGER NOT NULL,     -- distinct notes (paths) affected
            batches_removed    INTEGER NOT NULL,
            scrubbed_at        INTEGER              -- when VACUUM and the WAL truncation completed
        );
        CREATE TRIGGER purges_no_delete BEFORE DELETE ON purges
        BEGIN SELECT RAISE(ABORT, 'append-only: purges rows are never deleted'); END;
        CREATE TRIGGER purges_no_update BEFORE UPDATE ON purges
        WHEN OLD.scrubbed_at IS NOT NULL OR NEW.id IS NOT OLD.id OR NEW.vault_id IS NOT OLD.vault_id
          OR NEW.at IS NOT OLD.at OR NEW.command IS NOT OLD.command OR NEW.detail IS NOT OLD.detail
          OR NEW.horizon IS NOT OLD.horizon OR NEW.revisions_changed IS NOT OLD.revisions_changed
          OR NEW.revisions_removed IS NOT OLD.revisions_removed OR NEW.notes IS NOT OLD.notes
          OR NEW.batches_removed IS NOT OLD.batches_removed
        BEGIN SELECT RAISE(ABORT, 'append-only: a purge record is only ever marked scrubbed'); END;
        """
    )


@migration
def m004_contentless_out(con: apsw.Connection) -> None:
    """Blank and heading-only chunks leave the search index (``text.indexable``); their revisions stay."""
    from .search.rebuild import drop_unindexable

    drop_unindexable(con)


@migration
def m005_audit(con: apsw.Connection) -> None:
    """The hardened mode's audit log heads (see store/audit.py): where each log's chain ends, kept
    outside the log so that a truncated or rewritten log shows."""
    con.execute(
        """
        CREATE TABLE audit_heads (
            log_id      TEXT PRIMARY KEY,         -- the id every record of the log carries
            path        TEXT NOT NULL,            -- the log's absolute path at its last append
            records     INTEGER NOT NULL,         -- how many records the log holds
            head        TEXT NOT NULL,            -- SHA-256 hex of the last record's canonical JSON
            updated_at  INTEGER NOT NULL          -- wall clock of the last append, UTC micros
        );
        CREATE INDEX audit_heads_by_path ON audit_heads(path, updated_at);
        CREATE TRIGGER audit_heads_no_delete BEFORE DELETE ON audit_heads
        BEGIN SELECT RAISE(ABORT, 'append-only: an audit head is never deleted'); END;
        CREATE TRIGGER audit_heads_forward BEFORE UPDATE ON audit_heads
        WHEN NEW.records < OLD.records OR NEW.log_id IS NOT OLD.log_id
        BEGIN SELECT RAISE(ABORT, 'append-only: an audit head only moves forward'); END;
        """
    )


@migration
def m006_vault_devices(con: apsw.Connection) -> None:
    """The device each vault folder lived on when it was registered: a vault folder found on another
    one (an unmounted share's empty mount point) is not read as a vault whose notes were deleted."""
    con.execute(
        """
        CREATE TABLE vault_devices (
            vault_id    INTEGER PRIMARY KEY REFERENCES vaults(id),
            device      INTEGER NOT NULL,         -- st_dev of the vault folder
            updated_at  INTEGER NOT NULL          -- wall clock when registered or confirmed, UTC micros
        );
        """
    )


CALLERS_SCHEMA = 7
"""The schema from which ``batches`` has its ``caller`` column (an older one is read-only without it)."""


@migration
def m007_batch_callers(con: apsw.Connection) -> None:
    """Who each batch written by an MCP tool was done for (hardened mode: the caller's id; else "mcp"),
    so that ``changes --caller ID`` lists what one assistant wrote. NULL for every other batch."""
    con.execute("ALTER TABLE batches ADD COLUMN caller TEXT")


@migration
def m008_search_spans(con: apsw.Connection) -> None:
    """How many search rows use each doc with each lifetime (``search.schema.SPANS``), so that a past
    search counts a doc's visible rows without walking one index entry per row."""
    from .search import schema as search_schema

    search_schema.create(con)


@migration
def m009_moves(con: apsw.Connection) -> None:
    """What keeps a move a rename when its halves arrive apart, and a replaced vault folder from reading as
    deleted notes: the notes by a prefix of their content hash (a watcher's batch that creates a note
    looks for a live note with its content whose file is gone, in a few index probes), and the inode of
    each vault folder beside its device (NULL until the next sync registers it)."""
    from .read import HASH_PREFIX

    # safe to run twice, as the PostgreSQL twin is (a test rebuilds an older database by undoing one migration)
    con.execute(f"CREATE INDEX IF NOT EXISTS notes_by_hash ON notes(vault_id, substr(content_hash, 1, {HASH_PREFIX}))")
    if "inode" not in {row[1] for row in con.execute("PRAGMA table_info(vault_devices)")}:
        con.execute("ALTER TABLE vault_devices ADD COLUMN inode INTEGER")


@migration
def m010_write_requests(con: apsw.Connection) -> None:
    """Write requests (``store/requests.py``): how a process that does not hold a vault's writer lock asks the
    one that does (its watcher) to write for it, and learns the outcome. Not history: a row lives from the
    request to the asker reading its outcome."""
    con.execute(
        """
        CREATE TABLE IF NOT EXISTS write_requests (
            id          INTEGER PRIMARY KEY,
            vault_id    INTEGER NOT NULL REFERENCES vaults(id),
            kind        TEXT NOT NULL,            -- restore | undo | scan | write | edit | restore_note
            args        TEXT NOT NULL,            -- JSON
            asker       TEXT NOT NULL,            -- JSON: pid, host, command
            caller      TEXT,                     -- the MCP caller it is done for (batches.caller)
            asked_at    INTEGER NOT NULL,         -- wall clock, UTC micros
            take_by     INTEGER NOT NULL,         -- no writer takes it after this (the asker has given up)
            state       TEXT NOT NULL CHECK (state IN ('asked','taken','done','failed','dropped')),
            taken_by    TEXT,                     -- JSON: the writer that took it
            taken_at    INTEGER,
            steps       TEXT,                     -- JSON: files about to be written (path, hash before, after)
            batch_id    INTEGER,                  -- the batch that carried it out
            answer      TEXT,                     -- JSON: what the asker prints, or the error
            finished_at INTEGER
        );
        CREATE INDEX IF NOT EXISTS write_requests_by_state ON write_requests(vault_id, state, id);
        """
    )


@migration
def m011_request_ids(con: apsw.Connection) -> None:
    """Write request ids are never given twice (``AUTOINCREMENT``, as PostgreSQL's identity): an asker deletes
    its row once it read the outcome, and a plain rowid would give the next request the same id again, so the
    watcher's log named different requests alike. The table rebuilt with its rows; safe to run twice."""
    row = con.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'write_requests'").fetchone()
    if row is None or "AUTOINCREMENT" in row[0].upper():
        return
    con.execute("ALTER TABLE write_requests RENAME TO write_requests_m011")
    con.execute(row[0].replace("id          INTEGER PRIMARY KEY,", "id          INTEGER PRIMARY KEY AUTOINCREMENT,", 1))
    con.execute("INSERT INTO write_requests SELECT * FROM write_requests_m011")
    con.execute("DROP TABLE write_requests_m011")  # and its index
    con.execute("CREATE INDEX IF NOT EXISTS write_requests_by_state ON write_requests(vault_id, state, id)")


@migration
def m012_attachments(con: apsw.Connection) -> None:
    """Attachments' bytes (``store/files.py``): each distinct content once, by its SHA-256 (``notes.content_hash`` of
    the revisions holding it), in parts of at most ``attachments.PIECE`` bytes; ``kept`` 0: over the size limit,
    recorded by hash and size only. Append-only, as revisions are; safe to run twice."""
    con.execute(
        """
        CREATE TABLE IF NOT EXISTS attachment_bodies (
            id          INTEGER PRIMARY KEY,
            hash        TEXT NOT NULL UNIQUE,      -- sha256 hex of the file bytes (notes.content_hash)
            size        INTEGER NOT NULL,
            kept        INTEGER NOT NULL           -- 1: the bytes are in attachment_parts; 0: hash and size only
        );
        CREATE TABLE IF NOT EXISTS attachment_parts (
            body_id     INTEGER NOT NULL REFERENCES attachment_bodies(id),
            ord         INTEGER NOT NULL,
            data        BLOB NOT NULL,
            PRIMARY KEY (body_id, ord)
        );
        """
    )
    for table in ATTACHMENT_TABLES:
        con.execute(append_only_triggers(table))


ATTACHMENT_TABLES = ["attachment_bodies", "attachment_parts"]
"""Append-only too (``m012_attachments``)."""

PROBES = {
    "moves": ["index notes_by_hash", "column vault_devices.inode"],
    "write_requests": ["table write_requests", "index write_requests_by_state"],
    "request_ids": ["autoincrement write_requests"],
    "attachments": ["table attachment_bodies", "table attachment_parts"],
}
"""How a database from before names shows each migration after the common prefix (``store/migrations.py``)."""

NAMES = [name_of(step) for step in MIGRATIONS]

RECORD = "CREATE TABLE IF NOT EXISTS vaultsync_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)"
"""The migrations a database has, by name (``PRAGMA user_version`` keeps their count, for older vaultsyncs)."""


def has_table(con: apsw.Connection, name: str) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def state(con: apsw.Connection) -> State:
    """The database's migrations beside this vaultsync's (by name; by shape for a database from before names)."""
    recorded = (
        [row[0] for row in con.execute("SELECT name FROM vaultsync_migrations")]
        if has_table(con, "vaultsync_migrations")
        else None
    )
    return migrations.state(NAMES, PROBES, sqlite_shape(con), recorded, schema_version(con))


def readable(con: apsw.Connection, found: State) -> bool:
    """Whether a database can be read as it is, without migrating (read-only).

    Before ``m004`` an index may still hold blank or heading-only chunks: read-only, they stay searchable.
    Before ``m005`` there are no audit heads: read-only, ``store.audit.head`` finds none.
    Before ``m006`` no vault device is registered: read-only, none is needed.
    Before ``m007`` no batch names its caller: read-only, ``store.batches`` reads NULL.
    Before ``m008`` there are no search spans: read-only, a past search counts ``search_rows`` instead.
    Without ``moves`` no vault folder's inode is registered, no note is indexed by its hash: reads need neither.
    Without ``write_requests`` there are none: read-only, none is asked or answered.
    Without ``request_ids`` a write request's id may be given again: read-only, none is given.
    Without ``attachments`` no attachment was recorded: read-only, none is read.
    """
    if not found.missing:
        return True
    from .search import schema as search_schema

    # 0.1.0 with its search tables, or any later one: reads need nothing that is missing
    return bool(found.applied) and search_schema.current(con)


def migrate(con: apsw.Connection) -> list[str]:
    """Apply the migrations the database lacks, by name, one transaction each, then check its whole shape
    (SchemaError, in one line, when something is still missing); return the names applied."""
    found = state(con)
    refuse_newer(str(con.filename or "the database"), found, count=schema_version(con), known=len(MIGRATIONS))
    if found.legacy:  # (a database that records its names and lacks nothing is not written: a reader may hold it)
        with con:
            con.execute(RECORD)
            con.executemany(
                "INSERT OR IGNORE INTO vaultsync_migrations VALUES (?, ?)",
                [(name, now_micros()) for name in found.applied],
            )
    count = len(found.applied)
    for step in MIGRATIONS:
        if name_of(step) not in found.missing:
            continue
        count += 1
        with con:
            step(con)
            con.execute("INSERT OR REPLACE INTO vaultsync_migrations VALUES (?, ?)", (name_of(step), now_micros()))
            con.execute(f"PRAGMA user_version={count}")
    verify(con)
    return found.missing


def verify(con: apsw.Connection) -> None:
    """SchemaError unless the database has every table, column, index and trigger this vaultsync expects."""
    refuse_unless_whole(str(con.filename or "the database"), sqlite_shape(con), SQLITE)


def schema_version(con: apsw.Connection) -> int:
    """How many migrations the database counts (``PRAGMA user_version``; by name: ``state``)."""
    return int(con.execute("PRAGMA user_version").fetchone()[0])

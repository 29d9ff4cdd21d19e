"""Forgetting on purpose: the one sanctioned exception to append-only, and how it keeps every answer exact.

A purge rewrites the vault's history as if the purged material had never been recorded:

- ``strings``: every occurrence of each string in every revision of the vault's notes becomes
  ``MARKER``. Each affected revision is parsed again from its redacted text (chunk boundaries and
  IDs, links, title, aliases, tags, frontmatter, validity, content hash and size); a ``modified``
  revision the redaction makes identical to the one it followed is merged into it, as the store
  never records an unchanged note.
- ``note``: every revision of the note is removed: all revisions ever stored at that path and
  every revision linked to them through ``prev_id`` (its earlier and later names).
- ``before`` (retention): revisions no longer visible at that time are removed; what was visible
  then and everything after stays exact, and the store refuses questions about earlier times.

Then texts and link lists nothing uses are deleted, batches left empty are deleted, the compression
dictionary is trained again (and every text repacked) when it may hold removed text, and the search
index is repaired (``search.repair``): the rows of exactly the revisions the purge touched are taken
out before they change and put back after, the per-batch statistics corrected by the same deltas, docs
nothing uses any more deleted from FTS5 and their vectors dropped, so its answers are those of a fresh
index over the redacted history. (An index whose embedder this vaultsync does not know is rebuilt.)

All of that is one transaction, with the append-only triggers dropped and recreated inside it,
indexes for the foreign-key checks of its deletes made and dropped inside it (``_FK_INDEXES``), and
``secure_delete`` on, so a reader sees the store before or after, never between, and a crash leaves
it before. After commit, ``scrub`` runs VACUUM (no free page keeps old bytes) and checkpoints and truncates
the WAL. A reader in a read transaction begun before the purge holds the checkpoint back (it still reads the
old pages of the database file): the purge waits for it as long as the busy timeout (10 s,
``VAULTSYNC_BUSY_TIMEOUT_MS``). Past that, the purged bytes stay in the database file's old pages (the WAL
holds only the purged store) until, with no such reader left, either a vaultsync store opened read-only is
closed (``checkpoint_pending``: the purge's pages are copied over the old ones and the WAL truncated) or the
store is next opened for writing (``sync``, ``import``, ``watch``, another purge), which finishes the scrub
and records it. A reader that is not vaultsync (the ``sqlite3`` shell, a backup tool) ending does nothing
by itself. The ``purges`` table
records when, which kind of purge and how much it touched, never the text, a path or a hash of them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence

import apsw

from ..disk.attachments import is_attachment
from ..disk.digest import content_hash
from ..embed.tokenizer import TEXT_VERSION, TOKENIZE
from ..errors import ConfigError, NoteNotFound
from ..parsers import parse_note
from ..retention import Plan, Policy
from ..retention import plan as plan_retention
from ..times import format_time, now_micros
from . import codec
from .read import cutoff
from .schema import APPEND_ONLY_TABLES, ATTACHMENT_TABLES, append_only_triggers, has_table
from .search.index import SearchIndexer, index_lag
from .search.rebuild import rebuild_search
from .search.repair import Repair
from .thin import purge_thin
from .values import PurgeResult
from .write import BatchWriter, dumps

MARKER = "[purged]"
"""What every purged occurrence of a text becomes."""
MIN_TEXT_CHARS = 3
"""Shorter strings are refused: purging them would rewrite ordinary words everywhere."""
_SAMPLE_TEXTS = 2048
"""How many stored texts, spread over the table, a retrained dictionary is drawn from."""
_FK_INDEXES = {
    "purge_chunks_by_text": "chunks(text_id)",
    "purge_chunks_by_links": "chunks(links_id)",
    "purge_notes_by_prev": "notes(prev_id)",
    "purge_notes_by_batch": "notes(batch_id)",
    "purge_note_ends_by_batch": "note_ends(batch_id)",
    "purge_git_commits_by_batch": "git_commits(batch_id)",
}
"""Indexes on the child side of each foreign key whose parent rows a purge deletes, made for the purge's
transaction only (dropped before it commits, so the schema is unchanged): without them SQLite checks every
deleted revision, text, link list or batch by a full scan of its child table (a retention purge at the
middle of the Hub's history deletes 11.5k revisions and 12.6k texts, each text checked against 441k
chunks: 459 CPU-s without them, 6.5 with them; benchmarks/results/purge.md)."""


def check_strings(strings: Sequence[str]) -> list[str]:
    """The strings to purge, longest first; ConfigError for one that is too short or is the marker's."""
    out: list[str] = []
    for s in strings:
        if len(s.strip()) < MIN_TEXT_CHARS:
            raise ConfigError(
                f"a text to purge must have at least {MIN_TEXT_CHARS} characters besides spaces", argument="texts"
            )
        if s in MARKER or MARKER in s:
            raise ConfigError(f"a text to purge may not contain or be part of the marker {MARKER!r}", argument="texts")
        out.append(s)
    return sorted(dict.fromkeys(out), key=len, reverse=True)


def redact(text: str, strings: Sequence[str]) -> str:
    """``text`` with every occurrence of ``strings`` (longest first) replaced by MARKER, until none is left."""
    for _ in range(8):
        for s in strings:
            text = text.replace(s, MARKER)
        if not any(s in text for s in strings):
            return text
    raise ConfigError(
        "the texts to purge keep reappearing around the marker; purge them one at a time", argument="texts"
    )


# ---------------------------------------------------------------- finding what to purge


def revision_texts(con: apsw.Connection, vault_id: int) -> Iterable[tuple[int, str, str, int | None, str]]:
    """(note id, path, kind, prev id, exact content) of every revision (tombstones left out), by id."""
    cache: dict[int, str] = {}
    current: list[object] | None = None
    parts: list[str] = []
    for note_id, path, kind, prev_id, text_id in con.execute(
        """SELECT n.id, n.path, n.kind, n.prev_id, c.text_id FROM notes n JOIN chunks c ON c.note_id = n.id
           WHERE n.vault_id = ? ORDER BY n.id, c.ord""",
        (vault_id,),
    ):
        if is_attachment(path):  # an attachment's bytes are not text: a note purge forgets one whole
            continue
        if current is None or current[0] != note_id:
            if current is not None:
                yield (*current, "".join(parts))  # type: ignore[misc]  # current holds the four columns of a row
            current, parts = [note_id, path, kind, prev_id], []
        text = cache.get(text_id)
        if text is None:
            text = cache[text_id] = codec.unpack(
                con.execute("SELECT body FROM texts WHERE id = ?", (text_id,)).fetchone()[0]
            )
        parts.append(text)
    if current is not None:
        yield (*current, "".join(parts))  # type: ignore[misc]  # current holds the four columns of a row


def paths_containing(con: apsw.Connection, vault_id: int, strings: Sequence[str]) -> list[str]:
    """Note paths (of any revision) that contain one of ``strings``: a purge cannot rename notes."""
    return [
        p
        for (p,) in con.execute("SELECT DISTINCT path FROM notes WHERE vault_id = ?", (vault_id,))
        if any(s in p for s in strings)
    ]


def note_component(con: apsw.Connection, vault_id: int, path: str) -> set[int]:
    """Every revision ever stored at ``path`` and every revision linked to those by ``prev_id``."""
    found = {r[0] for r in con.execute("SELECT id FROM notes WHERE vault_id = ? AND path = ?", (vault_id, path))}
    if not found:
        raise NoteNotFound(f"the store has no revision of {path!r}")
    frontier = set(found)
    while frontier:
        ids = json.dumps(sorted(frontier))
        linked = {
            r[0]
            for r in con.execute(
                """SELECT prev_id FROM notes WHERE id IN (SELECT value FROM json_each(?)) AND prev_id IS NOT NULL
               UNION SELECT id FROM notes WHERE prev_id IN (SELECT value FROM json_each(?))""",
                (ids, ids),
            )
        }
        frontier = linked - found
        found |= frontier
    return found


# ---------------------------------------------------------------- rewriting


def _rewrite(con: apsw.Connection, writer: BatchWriter, note_id: int, path: str, text: str) -> None:
    """Replace revision ``note_id``'s content by ``text``, with everything derived from it parsed again."""
    parsed = parse_note(text, path)
    data = text.encode("utf-8", "surrogatepass")
    con.execute(
        """UPDATE notes SET content_hash = ?, size = ?, title = ?, frontmatter = ?, tags = ?, aliases = ?,
               warnings = ?, valid_from = ?, valid_to = ? WHERE id = ?""",
        (
            content_hash(data),
            len(data),
            parsed.title,
            None if parsed.frontmatter is None else dumps(parsed.frontmatter),
            dumps(list(parsed.tags)),
            dumps(list(parsed.aliases)),
            dumps(list(parsed.warnings)),
            parsed.valid_from,
            parsed.valid_to,
            note_id,
        ),
    )
    con.execute("DELETE FROM chunks WHERE note_id = ?", (note_id,))
    writer.write_chunks(note_id, path, parsed)


def _merge_unchanged(con: apsw.Connection, candidates: Iterable[int]) -> int:
    """Merge each ``modified`` revision now identical to the one it followed into that one; return how many."""
    merged = 0
    for note_id in sorted(candidates):
        row = con.execute(
            """SELECT r.prev_id FROM notes r JOIN notes p ON p.id = r.prev_id
               WHERE r.id = ? AND r.kind = 'modified' AND p.kind != 'deleted' AND p.path = r.path
                 AND p.content_hash = r.content_hash""",
            (note_id,),
        ).fetchone()
        if row is None:
            continue
        prev = row[0]
        con.execute("DELETE FROM note_ends WHERE note_id = ?", (prev,))
        con.execute("UPDATE note_ends SET note_id = ? WHERE note_id = ?", (prev, note_id))
        con.execute("UPDATE notes SET prev_id = ? WHERE prev_id = ?", (prev, note_id))
        con.execute("DELETE FROM chunks WHERE note_id = ?", (note_id,))
        con.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        merged += 1
    return merged


def _remove(con: apsw.Connection, ids: set[int]) -> None:
    """Delete revisions ``ids``; a surviving revision that followed one of them now follows nothing."""
    chosen = json.dumps(sorted(ids))
    con.execute(
        """UPDATE notes SET prev_id = NULL WHERE prev_id IN (SELECT value FROM json_each(:ids))
                   AND id NOT IN (SELECT value FROM json_each(:ids))""",
        {"ids": chosen},
    )
    for sql in (
        "DELETE FROM note_ends WHERE note_id IN (SELECT value FROM json_each(?))",
        "DELETE FROM chunks WHERE note_id IN (SELECT value FROM json_each(?))",
        "DELETE FROM notes WHERE id IN (SELECT value FROM json_each(?))",
    ):
        con.execute(sql, (chosen,))


def _paths(con: apsw.Connection, ids: Iterable[int]) -> set[str]:
    return {
        r[0]
        for r in con.execute(
            "SELECT DISTINCT path FROM notes WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(sorted(ids)),)
        )
    }


def _touched(con: apsw.Connection, ids: set[int]) -> set[int]:
    """``ids`` with the revisions that follow them and the ones those follow (a merge changes both ends)."""
    children = {
        r[0]
        for r in con.execute(
            "SELECT id FROM notes WHERE prev_id IN (SELECT value FROM json_each(?))", (json.dumps(sorted(ids)),)
        )
    }
    prevs = {
        r[0]
        for r in con.execute(
            "SELECT prev_id FROM notes WHERE id IN (SELECT value FROM json_each(?)) AND prev_id IS NOT NULL",
            (json.dumps(sorted(ids | children)),),
        )
    }
    return ids | children | prevs


def purge_strings(
    con: apsw.Connection,
    writer: BatchWriter,
    vault_id: int,
    strings: Sequence[str],
    result: PurgeResult,
    repair: Repair | None = None,
) -> None:
    affected: dict[int, tuple[str, str]] = {}
    for note_id, path, _kind, _prev, text in revision_texts(con, vault_id):
        if any(s in text for s in strings):
            affected[note_id] = (path, redact(text, strings))
    if not affected:
        return
    touched = _touched(con, set(affected))
    if repair is not None:
        repair.take_out(touched)
    for note_id, (path, text) in affected.items():
        _rewrite(con, writer, note_id, path, text)
    children = {
        r[0]
        for r in con.execute(
            "SELECT id FROM notes WHERE prev_id IN (SELECT value FROM json_each(?))", (json.dumps(sorted(affected)),)
        )
    }
    paths = {path for path, _ in affected.values()}
    result.revisions_removed = _merge_unchanged(con, set(affected) | children)
    if repair is not None:
        repair.put_back(touched)
    result.revisions_changed = len(affected) - result.revisions_removed
    result.notes = len(paths)
    con.execute(
        "DELETE FROM file_state WHERE vault_id = ? AND path IN (SELECT value FROM json_each(?))",
        (vault_id, json.dumps(sorted(paths))),
    )


def purge_note(
    con: apsw.Connection, vault_id: int, path: str, result: PurgeResult, repair: Repair | None = None
) -> None:
    ids = note_component(con, vault_id, path)
    paths = _paths(con, ids)
    if repair is not None:
        repair.take_out(ids)
    _remove(con, ids)
    con.execute(
        "DELETE FROM file_state WHERE vault_id = ? AND path IN (SELECT value FROM json_each(?))",
        (vault_id, json.dumps(sorted(paths))),
    )
    result.revisions_removed, result.notes = len(ids), len(paths)


def purge_before(
    con: apsw.Connection, vault_id: int, before: int, result: PurgeResult, repair: Repair | None = None
) -> None:
    batch = cutoff(con, vault_id, before)
    ids = {
        r[0]
        for r in con.execute(
            """SELECT n.id FROM notes n LEFT JOIN note_ends e ON e.note_id = n.id
           WHERE n.vault_id = :v AND n.batch_id <= :b AND (e.batch_id <= :b OR n.kind = 'deleted')""",
            {"v": vault_id, "b": batch},
        )
    }
    if ids:
        result.notes = len(_paths(con, ids))
        if repair is not None:
            repair.take_out(ids)
        _remove(con, ids)
    result.revisions_removed = len(ids)


def thin_by_policy(
    con: apsw.Connection, vault_id: int, policy: Policy, now: int | None, result: PurgeResult, repair: Repair | None
) -> int | None:
    """Thin the vault's history as ``policy`` keeps it at ``now`` (``store/thin.py``); return its horizon."""
    plan = retention_plan(con, vault_id, policy, now)
    purge_thin(con, vault_id, plan.kept, plan.horizon is not None, result, (_remove, _merge_unchanged), repair)
    return plan.horizon


def retention_plan(con: apsw.Connection, vault_id: int, policy: Policy, now: int | None) -> Plan:
    """What ``policy`` keeps of the vault's batches at ``now`` (default: the current time)."""
    rows = con.execute("SELECT id, known_at FROM batches WHERE vault_id = ? ORDER BY id", (vault_id,)).fetchall()
    return plan_retention(policy, rows, now_micros() if now is None else now)


def kind_of(strings: Sequence[str], note: str | None, before: int | None, policy: Policy | None) -> str:
    """A purge's ``command`` in its record."""
    return "text" if strings else "note" if note is not None else "before" if before is not None else "retention"


def detail_of(strings: Sequence[str], before: int | None, policy: Policy | None) -> str:
    """A purge's ``detail`` in its record: how many strings, the horizon, or the policy; never a text or a path."""
    if strings:
        return f"{len(strings)} string{'s' * (len(strings) != 1)}"
    if policy is not None:
        return policy.text + (f", before {format_time(before)}" if before is not None else "")
    return f"before {format_time(before)}" if before is not None else "1 note"


# ---------------------------------------------------------------- what follows any purge


def _collect_garbage(con: apsw.Connection, vault_id: int) -> int:
    """Delete texts, link lists and batches nothing uses any more; return how many batches went."""
    con.execute("DELETE FROM texts WHERE id NOT IN (SELECT text_id FROM chunks)")
    con.execute("DELETE FROM blobs WHERE id NOT IN (SELECT links_id FROM chunks WHERE links_id IS NOT NULL)")
    # attachments' bytes no revision of any vault holds any more (``store/files.py``)
    unused = (
        "SELECT id FROM attachment_bodies "
        "WHERE hash NOT IN (SELECT content_hash FROM notes WHERE content_hash IS NOT NULL)"
    )
    con.execute(f"DELETE FROM attachment_parts WHERE body_id IN ({unused})")
    con.execute(f"DELETE FROM attachment_bodies WHERE id IN ({unused})")
    empty = json.dumps(
        [
            r[0]
            for r in con.execute(
                """SELECT id FROM batches WHERE vault_id = ? AND id NOT IN (SELECT batch_id FROM notes)
           AND id NOT IN (SELECT batch_id FROM note_ends)""",
                (vault_id,),
            )
        ]
    )
    con.execute("UPDATE git_commits SET batch_id = NULL WHERE batch_id IN (SELECT value FROM json_each(?))", (empty,))
    con.execute("DELETE FROM batches WHERE id IN (SELECT value FROM json_each(?))", (empty,))
    return len(json.loads(empty))


def _retrain_dictionary(con: apsw.Connection, writer: BatchWriter, strings: Sequence[str] | None) -> bool:
    """Train the compression dictionary again and repack every text, if the old one may hold purged text
    (``strings`` None: it may, whatever it holds). Returns whether it did."""
    bodies = [bytes(r[0]) for r in con.execute("SELECT body FROM dictionaries")]
    if not bodies:
        return False
    if strings is not None and not any(s.encode("utf-8", "surrogatepass") in b for b in bodies for s in strings):
        return False
    total = con.execute("SELECT count(*) FROM texts").fetchone()[0]
    step = max(1, total // _SAMPLE_TEXTS)
    sample = [codec.unpack(r[0]) for r in con.execute("SELECT body FROM texts WHERE id % ? = 0", (step,))]
    trained = codec.train(sample)
    con.execute("DELETE FROM dictionaries")
    key = None
    if trained is not None:
        con.execute("INSERT INTO dictionaries (hash, body) VALUES (?, ?)", (codec.key_of(trained), trained))
        key = codec.register(trained)
    writer.text_dict = key
    ids = [r[0] for r in con.execute("SELECT id FROM texts")]
    for start in range(0, len(ids), 1000):
        part = json.dumps(ids[start : start + 1000])
        rows = con.execute(
            "SELECT id, body FROM texts WHERE id IN (SELECT value FROM json_each(?))", (part,)
        ).fetchall()
        con.executemany(
            "UPDATE texts SET body = ? WHERE id = ?",
            [(codec.pack(codec.unpack(body), key), text_id) for text_id, body in rows],
        )
    return True


def _repair(con: apsw.Connection, vault_id: int) -> Repair | None:
    """The search index's repair for this purge (None: no index, or one to rebuild instead)."""
    from ..embed.embedders import EMBEDDERS, get_embedder
    from .search import schema as search_schema

    if not search_schema.has_schema(con):
        return None
    name = search_schema.meta(con, "embedder")
    stored = (search_schema.meta(con, "tokenizer"), search_schema.meta(con, "text_version"))
    if name not in EMBEDDERS or stored != (TOKENIZE, str(TEXT_VERSION)) or not search_schema.current(con):
        return None
    indexer = SearchIndexer(con, get_embedder(name))
    if indexer.mismatch or index_lag(con, vault_id) != 0:
        return None
    return Repair(con, vault_id, indexer)


def run(
    con: apsw.Connection,
    vault_id: int,
    *,
    strings: Sequence[str] = (),
    note: str | None = None,
    before: int | None = None,
    policy: Policy | None = None,
    now: int | None = None,
) -> PurgeResult:
    """Carry out one purge inside the caller's transaction (exactly one of the four kinds; ``policy`` thins the
    history as the retention policy keeps it at ``now``, ``store/thin.py``)."""
    started = time.perf_counter()
    command = kind_of(strings, note, before, policy)
    result = PurgeResult(command)
    for table in APPEND_ONLY_TABLES + ATTACHMENT_TABLES:
        con.execute(f"DROP TRIGGER IF EXISTS {table}_no_update; DROP TRIGGER IF EXISTS {table}_no_delete;")
    for name, on in _FK_INDEXES.items():
        con.execute(f"CREATE INDEX {name} ON {on}")
    if strings and paths_containing(con, vault_id, strings):
        raise ConfigError(
            "that text is part of a note's path, which a text purge does not rename; "
            "remove that note with a note purge",
            argument="note",
        )
    writer = BatchWriter(con, vault_id, 0, "purge")
    repair = _repair(con, vault_id)
    if strings:
        purge_strings(con, writer, vault_id, strings, result, repair)
    elif note is not None:
        purge_note(con, vault_id, note, result, repair)
    elif before is not None:
        purge_before(con, vault_id, before, result, repair)
    elif policy is not None:
        before = thin_by_policy(con, vault_id, policy, now, result, repair)
    result.batches_removed = _collect_garbage(con, vault_id)
    touched = result.revisions_changed or result.revisions_removed
    if touched:
        result.dictionary_retrained = _retrain_dictionary(con, writer, strings if strings else None)
        if repair is not None:
            repair.finish()
        else:
            rebuild_search(con)
    for name in _FK_INDEXES:
        con.execute(f"DROP INDEX {name}")
    for table in APPEND_ONLY_TABLES + ATTACHMENT_TABLES:
        con.execute(append_only_triggers(table))
    con.execute(
        """INSERT INTO purges (vault_id, at, command, detail, horizon, revisions_changed, revisions_removed, notes,
               batches_removed) VALUES (?,?,?,?,?,?,?,?,?)""",
        (
            vault_id,
            now_micros(),
            command,
            detail_of(strings, before, policy),
            before,
            result.revisions_changed,
            result.revisions_removed,
            result.notes,
            result.batches_removed,
        ),
    )
    result.seconds = time.perf_counter() - started
    return result


def horizon(con: apsw.Connection, vault_id: int) -> int | None:
    """The vault's retention horizon: history before it was purged (None: never)."""
    if not has_table(con, "purges"):
        return None
    row = con.execute("SELECT max(horizon) FROM purges WHERE vault_id = ?", (vault_id,)).fetchone()
    return row[0]


def count(con: apsw.Connection, vault_id: int) -> int:
    if not has_table(con, "purges"):
        return 0
    return int(con.execute("SELECT count(*) FROM purges WHERE vault_id = ?", (vault_id,)).fetchone()[0])


def scrub_pending(con: apsw.Connection) -> bool:
    """True when a purge committed but its VACUUM and WAL truncation did not complete."""
    return (
        has_table(con, "purges")
        and con.execute("SELECT 1 FROM purges WHERE scrubbed_at IS NULL LIMIT 1").fetchone() is not None
    )


def mark_scrubbed(con: apsw.Connection) -> None:
    con.execute("UPDATE purges SET scrubbed_at = ? WHERE scrubbed_at IS NULL", (now_micros(),))


def checkpoint_pending(path: str) -> bool:
    """After a purge whose scrub a reader held back: copy the purged store from the WAL over the database file's
    old pages and truncate the WAL, through a short read-write connection (a read-only store's close does this).
    False when it could not: no write access, or a reader still reading the old pages."""
    try:
        con = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.Error:
        return False
    try:
        busy = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return busy is not None and not busy[0]
    except apsw.Error:
        return False
    finally:
        con.close()

"""Databases written by older commits, whose migrations were numbered differently, upgrade to exactly what they
lack: migrations are recorded and applied by name, and every open checks the whole schema (``store/migrations.py``,
``store/shape.py``).

The fixtures (``tests/fixtures/old_schemas``, made by ``make_old_db.py`` with each commit's own code):

- 7e76d09: ``m009`` was ``write_requests`` on both engines (no ``moves``; on PostgreSQL no ``writer_epoch``);
- 4010f30: SQLite ``m009`` was ``write_requests``, PostgreSQL ``m009_writer_epoch``, ``m010_write_requests``;
- 28d6c77 (PostgreSQL only): ``m009`` was ``moves`` (no ``writer_epoch``, no ``write_requests``);
- 6f934c5 (PostgreSQL only): every migration but ``attachments`` and ``compact_index`` (postings one row per term
  and doc, vectors as ``vector``);
- 6cb7b79 (PostgreSQL only): every migration but ``compact_index``;
- 45d3e09 (PostgreSQL only): every migration up to ``compact_index``: vectors copied for the live docs and into every
  span (not ``lean_vectors``), the postings' GIN indexes on the term ids (not on their buckets, ``term_buckets``), the
  term dictionary one row per term (not in blocks, ``term_blocks``).

Each upgrades in the suite: ``migrate``, then a batch written, then every note at every past state read back
against the truth the fixture's script wrote (the files, not the database).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from support.engines import sqlite_file

from vaultsync import NoteNotFound, Vault

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "old_schemas"
SINCE_45D3E09 = "lean_vectors, term_buckets, term_blocks, one_vector, compact_indexes"
"""The migrations after the newest fixture's (each one's test upgrades it, taking them all)."""
AFTER_45D3E09 = f"{SINCE_45D3E09.count(',') + 1} migrations: {SINCE_45D3E09}"
TRUTH: dict[str, dict[str, str]] = json.loads((FIXTURES / "truth.json").read_text(encoding="utf-8"))


def unpack_sqlite(tmp_path: Path, commit: str) -> Path:
    db = tmp_path / f"{commit}.db"
    with gzip.open(FIXTURES / f"sqlite-{commit}.db.gz") as packed, db.open("wb") as out:
        shutil.copyfileobj(packed, out)
    return db


def replay_pg(tmp_path: Path, commit: str) -> str:
    """A new PostgreSQL database holding the fixture's dump (replayed by psql), as the old commit left it."""
    pgserver = pytest.importorskip("support.pgserver")
    try:
        server = pgserver.shared()
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    dsn = server.fresh_database(f"old{commit}")
    dump = tmp_path / f"{commit}.sql"
    dump.write_bytes(gzip.decompress((FIXTURES / f"pg-{commit}.sql.gz").read_bytes()))
    psql = [str(server.bin / "psql"), "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", str(dump)]
    done = subprocess.run(psql, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return dsn


def write_and_read_everything(db: str | Path, tmp_path: Path) -> None:
    """A batch written to the upgraded database, then every note of every past state read back, and the new one."""
    root = tmp_path / "notes"
    last = max(TRUTH)
    with Vault.open(db, name="notes", readonly=True) as vault:
        for path in TRUTH[last]:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(vault.read(path).content, encoding="utf-8")
    (root / "After.md").write_text("# After\n\nwritten after the upgrade\n", encoding="utf-8")
    with Vault.open(db, root=root) as vault:
        vault.sync(known_at="2025-06-02")
        assert vault.check() == []
        everything = set().union(*TRUTH.values())
        for when, notes in TRUTH.items():
            assert [r.path for r in vault.ls(as_of=when)] == sorted(notes), when
            for path in sorted(everything):
                if path in notes:
                    content = vault.read(path, as_of=when).content
                    assert hashlib.sha256(content.encode("utf-8")).hexdigest() == notes[path], (when, path)
                else:
                    with pytest.raises(NoteNotFound):
                        vault.read(path, as_of=when)
        assert vault.read("After.md").content.endswith("written after the upgrade\n")
        assert [r.path for r in vault.history("Recipes/Chili for Twelve.md")][0] == "Recipes/Chili.md"
        assert vault.search("ferry timetable", mode="keyword").hits[0]["path"] == "Home.md"


@pytest.mark.parametrize(
    ("commit", "lacking"),
    [("7e76d09", "moves, request_ids, attachments"), ("4010f30", "moves, request_ids, attachments")],
)
def test_an_old_sqlite_file_gets_exactly_the_migrations_it_lacks(
    tmp_path: Path, commit: str, lacking: str, cli
) -> None:
    db = unpack_sqlite(tmp_path, commit)
    dry = cli("migrate", "--dry-run", db=db)
    n = len(lacking.split(", "))
    assert dry.returncode == 0 and dry.stdout.strip() == f"would apply {n} migrations: {lacking}", dry.stdout
    done = cli("migrate", db=db)
    assert done.returncode == 0 and f"applied {n} migrations: {lacking}" in done.stdout, done.stderr
    assert cli("migrate", db=db).stdout.startswith("up to date")
    write_and_read_everything(db, tmp_path)


@pytest.mark.pg
@pytest.mark.parametrize(
    ("commit", "lacking"),
    [
        ("7e76d09", f"writer_epoch, moves, attachments, compact_index, {SINCE_45D3E09}"),
        ("4010f30", f"moves, attachments, compact_index, {SINCE_45D3E09}"),
        ("28d6c77", f"writer_epoch, write_requests, attachments, compact_index, {SINCE_45D3E09}"),
        ("6f934c5", f"attachments, compact_index, {SINCE_45D3E09}"),
        ("6cb7b79", f"compact_index, {SINCE_45D3E09}"),
        ("45d3e09", SINCE_45D3E09),
    ],
)
def test_an_old_postgresql_database_gets_exactly_the_migrations_it_lacks(
    tmp_path: Path, commit: str, lacking: str, cli
) -> None:
    dsn = replay_pg(tmp_path, commit)
    refused = cli("import", str(tmp_path), db=dsn)  # a writer of today does not upgrade it on its own
    assert refused.returncode != 0 and f"it lacks {lacking}" in refused.stderr, refused.stderr
    dry = cli("migrate", "--dry-run", db=dsn)
    n = len(lacking.split(", "))
    assert dry.returncode == 0 and dry.stdout.strip() == f"would apply {n} migration{'s' * (n > 1)}: {lacking}"
    done = cli("migrate", db=dsn)
    assert done.returncode == 0 and f"applied {n} migration" in done.stdout, done.stderr
    assert cli("migrate", db=dsn).stdout.startswith("up to date")
    write_and_read_everything(dsn, tmp_path)


def test_check_fails_on_a_sqlite_schema_missing_a_column(tmp_path: Path, cli) -> None:
    db = unpack_sqlite(tmp_path, "4010f30")
    assert cli("migrate", db=db).returncode == 0
    with sqlite_file(db) as con:
        con.execute("ALTER TABLE notes DROP COLUMN mtime_ns")
    said = cli("check", db=db)
    assert said.returncode != 0 and "the schema lacks column notes.mtime_ns" in said.stderr, said.stderr
    (tmp_path / "notes").mkdir()
    for args in (["migrate"], ["import", str(tmp_path / "notes")]):  # a writer refuses it in one line
        said = cli(*args, db=db)
        assert said.returncode != 0, (args, said.stdout)
        assert "lacks column notes.mtime_ns" in said.stderr and len(said.stderr.strip().splitlines()) == 1, said.stderr


@pytest.mark.pg
def test_check_fails_on_a_postgresql_schema_missing_a_column(tmp_path: Path, cli) -> None:
    pgserver = pytest.importorskip("support.pgserver")
    dsn = pgserver.fresh_or_skip("shape")
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# A\n", encoding="utf-8")
    assert cli("import", str(root), db=dsn).returncode == 0
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("ALTER TABLE vault_heads DROP COLUMN writer_epoch")
    said = cli("check", db=dsn)
    assert said.returncode != 0 and "lacks the migration writer_epoch (column vault_heads.writer_epoch)" in said.stderr
    said = cli("import", str(root), db=dsn)  # a writer refuses it in one line; a reader reads it (as an older one)
    assert said.returncode != 0 and "it lacks writer_epoch" in said.stderr and len(said.stderr.splitlines()) == 1
    assert cli("read", "a.md", db=dsn).returncode == 0
    done = cli("migrate", db=dsn)  # a migration after the common prefix is found by its shape: applied again
    assert done.returncode == 0 and "applied 1 migration: writer_epoch" in done.stdout, done.stderr
    assert cli("check", db=dsn).returncode == 0


def _schema_shape() -> ModuleType:
    """scripts/schema_shape.py, loaded as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("schema_shape", Path(__file__).parents[2] / "scripts/schema_shape.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_expected_shape_is_a_fresh_databases() -> None:
    """``store/expected_shape.py`` is what a fresh database of each engine holds (regenerate it with
    ``scripts/schema_shape.py`` after adding a migration); every migration after the common prefix has a probe.
    SQLite here, PostgreSQL in the next test."""
    from vaultsync.store import expected_shape, migrations
    from vaultsync.store import schema as sqlite_schema
    from vaultsync.store.pg import schema as pg_schema

    migrations.check_probes(sqlite_schema.NAMES, sqlite_schema.PROBES)
    migrations.check_probes(pg_schema.NAMES, pg_schema.PROBES)
    assert _schema_shape().fresh_sqlite() == expected_shape.SQLITE, "run scripts/schema_shape.py"


@pytest.mark.pg
def test_the_expected_shape_is_a_fresh_postgresql_databases(monkeypatch: pytest.MonkeyPatch) -> None:
    from vaultsync.store import expected_shape

    script = _schema_shape()
    pgserver = pytest.importorskip("support.pgserver")
    with_pgvector = script.fresh_postgres(pgserver.fresh_or_skip("shape"))
    assert with_pgvector >= expected_shape.POSTGRES
    monkeypatch.setenv("VAULTSYNC_PG_VECTORS", "python")
    assert script.fresh_postgres(pgserver.fresh_or_skip("shape")) == expected_shape.POSTGRES, (
        "run scripts/schema_shape.py"
    )


QUERIES = ["ferry", "ferry timetable", '"ferry timetable"', "harb*", '"a map" OR cumin', "passport", "nine", "t*", "c*"]


def _answers(dsn: str) -> dict[str, list[tuple[str, str, float]]]:
    """Every mode's search of ``QUERIES`` now and at every cutoff of the truth: (path, chunk, score) each."""
    out = {}
    with Vault.open(dsn, name="notes", readonly=True) as vault:
        for when in [None, *TRUTH]:
            for mode in ("keyword", "hybrid", "vector"):
                for query in QUERIES:
                    hits = vault.search(query, mode=mode, as_of=when, limit=10).hits
                    out[f"{mode} {when} {query}"] = [(h["path"], h["chunk_id"], h["score"]) for h in hits]
    return out


@pytest.mark.pg
@pytest.mark.parametrize("commit", ["6f934c5", "6cb7b79"])
def test_the_compact_index_keeps_every_answer_of_a_database_written_before_it(tmp_path: Path, cli, commit: str) -> None:
    """The database of the commit before ``compact_index``: today's reader answers from its old index, and after
    ``migrate`` from the new one, exactly the same (keyword, default and vector search, phrases and prefixes, now and
    at every cutoff); the old postings are gone and every note at every state reads back as written."""
    import psycopg

    from vaultsync.store.pg import postings

    dsn = replay_pg(tmp_path, commit)
    before = _answers(dsn)
    assert sum(map(len, before.values())) > 40  # something to compare
    dry = cli("migrate", "--dry-run", db=dsn)
    assert dry.returncode == 0 and "compact_index" in dry.stdout, dry.stdout
    with psycopg.connect(dsn) as con:  # (a dry run changes nothing)
        assert con.execute("SELECT to_regclass('search_postings') IS NOT NULL").fetchone()[0]
    assert cli("migrate", db=dsn).returncode == 0
    with psycopg.connect(dsn) as con:
        live, rest = ({r[0] for r in con.execute(f"SELECT doc FROM {t}")} for t in postings.BOTH[::-1])
        current = {r[0] for r in con.execute("SELECT doc_id FROM search_rows WHERE died IS NULL")}
        assert live == current and not live & rest  # each doc's row once, the live docs' in their table
        left = con.execute(
            "SELECT array_agg(relname ORDER BY relname) FROM pg_class WHERE relname LIKE 'search%postings%'"
        ).fetchone()[0]
        assert left is None, left
        assert con.execute("SELECT count(*) FROM search_doc_terms").fetchone()[0] > 0
        vec = "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'search_vectors'::regclass "
        assert con.execute(vec + "AND attname = 'vec' AND NOT attisdropped").fetchone()[0].startswith("halfvec")
    after = _answers(dsn)
    for key in before:
        assert [h[:2] for h in after[key]] == [h[:2] for h in before[key]], key
        assert all(abs(a[2] - b[2]) <= 1e-9 for a, b in zip(after[key], before[key])), key
    write_and_read_everything(dsn, tmp_path)


@pytest.mark.pg
def test_lean_vectors_keeps_every_answer_of_a_database_written_before_it(tmp_path: Path, cli) -> None:
    """The database of the commit before ``lean_vectors``: today's reader answers from it, and after ``migrate``
    exactly the same, bit for bit (keyword, default and vector search, now and at every cutoff); each vector is then
    kept once (in ``search_vectors``), the spans' table written anew without its copies, and every note at every state
    reads back as written."""
    import psycopg
    from support.pg_live import VECTOR_COLUMNS

    dsn = replay_pg(tmp_path, "45d3e09")
    with psycopg.connect(dsn) as con:
        copies = con.execute(VECTOR_COLUMNS).fetchone()[0]
        spans_file = con.execute("SELECT pg_relation_filenode('search_doc_spans')").fetchone()[0]
    assert {"search_live_vectors.embedding", "search_doc_spans.vec"} <= set(copies)  # the fixture has the copies
    before = _answers(dsn)
    assert sum(map(len, before.values())) > 40 and any(k.startswith("vector") and v for k, v in before.items())
    dry = cli("migrate", "--dry-run", db=dsn)
    assert dry.returncode == 0 and dry.stdout.strip() == f"would apply {AFTER_45D3E09}", dry.stdout
    said = cli("check", db=dsn)  # (a reader's check names what it lacks, by what it still has)
    assert "lean_vectors (table search_live_vectors still there)" in said.stderr + said.stdout, said
    assert cli("migrate", db=dsn).returncode == 0
    with psycopg.connect(dsn) as con:
        assert sorted(con.execute(VECTOR_COLUMNS).fetchone()[0]) == ["search_vectors.embedding", "search_vectors.vec"]
        # written anew (a dropped column's bytes stay in every row until then)
        assert con.execute("SELECT pg_relation_filenode('search_doc_spans')").fetchone()[0] != spans_file
    assert cli("migrate", db=dsn).stdout.startswith("up to date")


def _plans(dsn: str) -> dict[str, str]:
    """The plans of the statements that find docs by term (``pg/postings.py``), now and at a past cutoff, with
    sequential scans made dear (the fixture is small: the planner would scan it whole otherwise)."""
    import psycopg

    from vaultsync.store.pg import postings

    with psycopg.connect(dsn) as con:
        con.execute("SET enable_seqscan = off")
        ids = [i for term in ("ferry", "timetable") for i in postings.term_ids(con, term, False)]
        assert len(ids) == 2
        buckets = postings.bucketed(con)
        out = {}
        for name, live in (("now", True), ("past", False)):  # (past: both tables; the docs' bound left out, or the
            sql = postings.frequencies(ids, "t", None, live=live, buckets=buckets)  # planner reads the few by doc)
            rows = con.execute(f"EXPLAIN {sql}", {"t": ids}).fetchall()
            out[name] = "\n".join(r[0] for r in rows)
        where = postings.held("terms", "%s::integer[]", buckets)
        rows = con.execute(f"EXPLAIN SELECT doc FROM search_doc_terms WHERE {where}", [ids] * where.count("%s"))
        out["holding"] = "\n".join(r[0] for r in rows)
    return out


@pytest.mark.pg
def test_the_term_buckets_keep_every_answer_of_a_database_written_before_them(tmp_path: Path, cli) -> None:
    """The database of the commit before ``term_buckets``: today's reader answers from it as it is (by the term ids,
    its GIN indexes on them), and after ``migrate`` from the buckets' indexes, exactly the same (keyword, default and
    vector search, phrases and prefixes, now and at every cutoff), a reader left open across the migration too; the
    term ids' indexes are gone and every statement finding docs by term can use the buckets' (now and in the past)."""
    import psycopg

    dsn = replay_pg(tmp_path, "45d3e09")
    before = _answers(dsn)
    assert sum(map(len, before.values())) > 40  # something to compare
    with Vault.open(dsn, name="notes", readonly=True) as open_reader:
        first = open_reader.search("harb*", mode="keyword").hits
        assert first
        dry = cli("migrate", "--dry-run", db=dsn)
        assert dry.returncode == 0 and dry.stdout.strip() == f"would apply {AFTER_45D3E09}", dry.stdout
        done = cli("migrate", db=dsn)
        assert done.returncode == 0 and f"applied {AFTER_45D3E09}" in done.stdout, done.stderr
        assert open_reader.search("harb*", mode="keyword").hits == first
    with psycopg.connect(dsn) as con:
        found = con.execute("SELECT relname FROM pg_class WHERE relname ~ '^search_(doc|live)_terms_by_'")
        indexes = {r[0] for r in found}
        assert indexes == {"search_doc_terms_by_bucket", "search_live_terms_by_bucket"}, indexes
    for name, plan in _plans(dsn).items():
        assert "terms_by_bucket" in plan and "Seq Scan" not in plan, (name, plan)
    assert _answers(dsn) == before
    write_and_read_everything(dsn, tmp_path)


@pytest.mark.pg
def test_the_term_blocks_keep_every_term_id_and_answer_of_a_database_written_before_them(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database of the commit before ``term_blocks``: today's reader answers from its one-row-per-term dictionary,
    and after ``migrate`` from the blocks exactly the same (phrases and prefixes, now and at every cutoff), a reader
    left open across the migration too; every term keeps its id, ``search_terms`` (and its append-only guard) is gone,
    and the next new term gets an id above every old one. Blocks of 4 terms here (the fixture has a few dozen), so that
    prefixes cross blocks and the batch written after splits some."""
    import psycopg

    from vaultsync.store.pg import dictionary, postings

    monkeypatch.setattr(dictionary, "BLOCK", 4)
    dsn = replay_pg(tmp_path, "45d3e09")
    with psycopg.connect(dsn) as con:
        old = dict(con.execute("SELECT term, id FROM search_terms").fetchall())
    assert len(old) > 20
    before = _answers(dsn)
    with Vault.open(dsn, name="notes", readonly=True) as open_reader:
        first = open_reader.search("t*", mode="keyword").hits
        assert first
        assert cli("migrate", db=dsn).returncode == 0
        assert open_reader.search("t*", mode="keyword").hits == first
    with psycopg.connect(dsn) as con:
        assert con.execute("SELECT to_regclass('search_terms')").fetchone()[0] is None
        pairs = con.execute(f"SELECT term, id FROM {dictionary.PAIRS} p").fetchall()
        assert len(pairs) == len(old) and dict(pairs) == old
        blocks = con.execute(f"SELECT first, terms FROM {dictionary.TABLE} ORDER BY first").fetchall()
        assert len(blocks) == -(-len(old) // 4) and blocks[0][0] == ""
        assert all(terms[0] == first for first, terms in blocks[1:])
        assert postings.term_ids(con, "ferry", False) == [old["ferry"]]
        prefix = sorted(t for t in old if t.startswith("t"))
        assert postings.term_ids(con, "t", True) == [old[t] for t in prefix]
        assert dictionary.learn(con, ["zzz-a-new-term"])["zzz-a-new-term"] > max(old.values())
    assert _answers(dsn) == before
    write_and_read_everything(dsn, tmp_path)


@pytest.mark.pg
def test_one_vector_keeps_every_answer_of_a_database_written_before_it(tmp_path: Path, cli) -> None:
    """The database of the commit before ``one_vector``, whose vectors are kept twice (the int8 bytes and the
    ``halfvec`` pgvector generated from them): today's reader answers from it as it is, and after ``migrate`` exactly
    the same, bit for bit (keyword, default and vector search, now and at every cutoff), a reader left open across the
    migration too; then every vector is the ``halfvec`` alone, the table written anew without the bytes, and vectors
    written after (a new batch) are kept so too and found."""
    import psycopg

    dsn = replay_pg(tmp_path, "45d3e09")
    with psycopg.connect(dsn) as con:
        rows, held = con.execute("SELECT count(*), count(embedding) FROM search_vectors").fetchone()
        halves = dict(con.execute("SELECT doc_id, vec::text FROM search_vectors").fetchall())
        table_file = con.execute("SELECT pg_relation_filenode('search_vectors')").fetchone()[0]
    assert rows > 5 and held == rows  # the fixture keeps both forms
    before = _answers(dsn)
    assert any(k.startswith("vector") and v for k, v in before.items())
    with Vault.open(dsn, name="notes", readonly=True) as open_reader:
        first = open_reader.search("ferry timetable", mode="vector").hits
        assert first
        done = cli("migrate", db=dsn)
        assert done.returncode == 0 and f"applied {AFTER_45D3E09}" in done.stdout, done.stderr
        assert open_reader.search("ferry timetable", mode="vector").hits == first
    with psycopg.connect(dsn) as con:
        assert con.execute("SELECT count(*), count(embedding) FROM search_vectors").fetchone() == (rows, 0)
        assert dict(con.execute("SELECT doc_id, vec::text FROM search_vectors").fetchall()) == halves
        assert con.execute("SELECT pg_relation_filenode('search_vectors')").fetchone()[0] != table_file
        vec = "FROM pg_attribute WHERE attrelid = 'search_vectors'::regclass AND attname = 'vec'"
        assert con.execute(f"SELECT attgenerated {vec}").fetchone()[0] == ""  # a column of its own
    assert _answers(dsn) == before
    assert cli("migrate", db=dsn).stdout.startswith("up to date")
    write_and_read_everything(dsn, tmp_path)
    with psycopg.connect(dsn) as con:
        after = con.execute("SELECT count(*) > %s, count(embedding) FROM search_vectors", (rows,)).fetchone()
        assert after == (True, 0)
    with Vault.open(dsn, name="notes", readonly=True) as vault:
        assert vault.search("written after the upgrade", mode="vector").hits[0]["path"] == "After.md"

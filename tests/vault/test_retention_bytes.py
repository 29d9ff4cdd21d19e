"""What a retention preview says thinning would free, against what a real thinning frees, on both engines.

The history is constructed (notes of a few KB of varied words, rewritten a paragraph at a time over five weeks);
the truth is the database's size before and after the real purge, both compacted: on SQLite the purge's own
VACUUM and WAL truncation (the size before is taken after a VACUUM too), on PostgreSQL VACUUM FULL of the
schema's tables before and after (``pg_total_relation_size``, what ``stats`` shows).
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

from support.engines import sqlite_file

from vaultsync import Vault
from vaultsync.dsn import is_dsn
from vaultsync.store.freed import BOUND
from vaultsync.times import to_micros

HOUR = 3_600_000_000
DAY = 24 * HOUR
NOW = to_micros(dt.datetime(2024, 3, 20, 12, 0, tzinfo=dt.UTC))
POLICY = "keep_all=1d hourly=2d daily=7d weekly=forever"


def _record(vault: Vault, root: Path, batches: int = 70, notes: int = 12) -> None:
    """``batches`` batches from five weeks ago to an hour ago, each rewriting a paragraph of two notes of about
    3 KB of words drawn from a large vocabulary (so texts, chunks and the keyword index all grow)."""
    rng = random.Random(3)
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 10))) for _ in range(3000)
    ]

    def paragraph() -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(60))

    texts = {f"Notes/n{i}.md": [f"# Note {i}"] + [paragraph() for _ in range(8)] for i in range(notes)}
    for path, parts in texts.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    start = NOW - 35 * DAY
    for i in range(batches):
        for path in rng.sample(sorted(texts), 2):
            texts[path][rng.randrange(1, 9)] = paragraph()
            (root / path).write_text("\n\n".join(texts[path]) + "\n", encoding="utf-8")
        vault.sync(known_at=start + i * (35 * DAY - HOUR) // batches)


def _compacted_size(vault: Vault, db: str) -> int:
    """The database's size with no free space left: VACUUM (SQLite) or VACUUM FULL of every table (PostgreSQL)."""
    if not is_dsn(db):
        with sqlite_file(db) as con:
            con.execute("VACUUM")
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    else:
        import psycopg

        with psycopg.connect(db, autocommit=True) as con:
            tables = [
                r[0]
                for r in con.execute(
                    "SELECT c.relname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace "
                    "WHERE s.nspname = current_schema() AND c.relkind = 'r'"
                )
            ]
            con.execute("VACUUM FULL " + ", ".join(f'"{t}"' for t in tables))
    return int(vault.stats().database_bytes)


def test_the_preview_says_within_its_bound_what_thinning_frees(db: str, tmp_path: Path) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    with Vault.open(db, root=root, name="v") as vault:
        _record(vault, root)
        before = _compacted_size(vault, db)
        stats = vault.stats().to_json()
        preview = vault.retention_preview(POLICY, now=NOW)
        assert vault.stats().to_json() == stats  # the dry run changed nothing
        assert preview.database_bytes == stats["database_bytes"] == before
        assert preview.revisions_removed > 0
        vault.purge(policy=POLICY, now=NOW)
        actual = before - _compacted_size(vault, db)
    assert actual > 0
    assert abs(preview.bytes_freed - actual) <= BOUND * actual, (preview.bytes_freed, actual)

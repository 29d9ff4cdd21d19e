"""Readers on a streaming standby: a standby started by the test from ``pg_basebackup`` of the primary
answers exactly as the primary once it has replayed (a standby delivers no NOTIFY: readers there poll
the batch log, ``data_version``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from vaultsync import Vault

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")


def _write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).write_text(text, encoding="utf-8")


def test_a_reader_on_a_standby_answers_as_on_the_primary(tmp_path: Path) -> None:
    try:
        primary = pgserver.shared()  # the session's server is the primary; the standby is this test's own
    except pgserver.Unavailable as exc:
        pytest.skip(str(exc))
    standby = None
    try:
        dsn = primary.fresh_database("standby")
        root = tmp_path / "vault"
        root.mkdir()
        _write(root, {"a.md": "# A\n\nharbour tide tables\n", "b.md": "# B\n\nthe tide at the harbour\n"})
        writer = Vault.open(dsn, root=root, name="v")
        writer.sync(known_at=1_000_000)
        standby = pgserver.start_standby(primary, f"replica-{time.time_ns()}")
        reader_dsn = dsn.replace(
            str(primary.socket_dir).replace("/", "%2F"), str(standby.socket_dir).replace("/", "%2F")
        )
        assert reader_dsn != dsn
        reader = Vault.open(reader_dsn, name="v", readonly=True)
        try:
            before = reader.data_version()
            _write(root, {"a.md": "# A\n\nharbour tide tables, revised\n", "c.md": "# C\n\nstorm at the harbour\n"})
            writer.sync(known_at=2_000_000)
            deadline = time.monotonic() + 60
            while reader.last_batch_id != writer.last_batch_id:
                assert time.monotonic() < deadline, "the standby did not replay the batch"
                time.sleep(0.05)
            assert reader.data_version() != before  # what a follower polls there
            for at in (1_000_000, 2_000_000, None):
                assert [r.summary() for r in reader.ls(as_of=at)] == [r.summary() for r in writer.ls(as_of=at)]
                for path in ("a.md", "b.md"):
                    assert reader.read(path, as_of=at).content == writer.read(path, as_of=at).content
                for mode in ("keyword", "hybrid"):
                    a = writer.search("harbour tide", mode=mode, as_of=at).hits
                    assert reader.search("harbour tide", mode=mode, as_of=at).hits == a and a
            assert [r.summary() for r in reader.history("a.md")] == [r.summary() for r in writer.history("a.md")]
        finally:
            reader.close()
            writer.close()
    finally:
        if standby is not None:
            standby.stop()

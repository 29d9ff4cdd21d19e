"""Import through the library API: batches, renames, deletions, bad input, as-of reads."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import pytest
from support.engines import sqlite_file

from vaultsync import ConfigError, LockedError, NoteNotFound, ParseError, PathError, Vault

T1, T2, T3 = "2024-01-01", "2024-02-01T12:00:00Z", "2024-03-01T00:00:00+02:00"


def open_vault(db: Path, root: Path) -> Vault:
    return Vault.open(db, root=root)


def test_import_then_read_as_of(db_path: Path, vault_dir: Path) -> None:
    with open_vault(db_path, vault_dir) as vault:
        first = vault.sync(known_at=T1)
        assert (first.added, first.modified, first.deleted) == (2, 0, 0)
        atlas = vault_dir / "Projects" / "Atlas.md"
        old = atlas.read_bytes()
        atlas.write_text(old.decode() + "\nNew line.\n", encoding="utf-8")
        second = vault.sync(known_at=T2)
        assert (second.added, second.modified, second.unchanged) == (0, 1, 1)
        assert vault.read("Projects/Atlas.md", as_of="2024-01-15").content.encode() == old
        assert vault.read("Projects/Atlas.md").content.endswith("New line.\n")
        assert vault.read("Projects/Atlas", as_of=T2).revision.known_at == second.known_at
        with pytest.raises(NoteNotFound):
            vault.read("Projects/Atlas.md", as_of="2023-12-31")
        assert [r.path for r in vault.ls(as_of=T1)] == ["Inbox.md", "Projects/Atlas.md"]
        assert [r.path for r in vault.ls(prefix="Projects/")] == ["Projects/Atlas.md"]


def test_unchanged_import_adds_nothing(db_path: Path, vault_dir: Path) -> None:
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T1)
        before = vault.stats().to_json()
        again = vault.sync()
        assert again.batch_id is None and again.changed == 0 and again.unchanged == 2
        # a touched file with identical bytes is confirmed by hash and still adds nothing
        os.utime(vault_dir / "Inbox.md", ns=(1, 1))
        assert vault.sync().changed == 0
        after = vault.stats().to_json()
        assert (after["revisions"], after["batches"]) == (before["revisions"], before["batches"])


@pytest.mark.capabilities_off("no-dir-fd")
def test_rename_delete_and_history(db_path: Path, vault_dir: Path) -> None:
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T1)
        os.replace(vault_dir / "Inbox.md", vault_dir / "Projects" / "Inbox 2024.md")
        second = vault.sync(known_at=T2)
        assert (second.renamed, second.added, second.deleted) == (1, 0, 0)
        (vault_dir / "Projects" / "Atlas.md").unlink()
        third = vault.sync(known_at=T3)
        assert third.deleted == 1
        history = vault.history("Projects/Inbox 2024.md")
        assert [(r.kind, r.path) for r in history] == [("created", "Inbox.md"), ("renamed", "Projects/Inbox 2024.md")]
        assert history[1].renamed_from == "Inbox.md"
        with pytest.raises(NoteNotFound, match="renamed to Projects/Inbox 2024.md"):
            vault.read("Inbox.md")
        assert vault.read("Inbox.md", as_of=T1).content.startswith("# Inbox")
        changes = [(r.kind, r.path) for r in vault.changes(since=T1)]
        assert changes == [("renamed", "Projects/Inbox 2024.md"), ("deleted", "Projects/Atlas.md")]
        assert vault.diff("Projects/Atlas.md", T1, T3).count("\n-") >= 5


def test_identical_content_is_stored_once(db_path: Path, vault_dir: Path) -> None:
    text = (vault_dir / "Inbox.md").read_text(encoding="utf-8")
    (vault_dir / "Copy of Inbox.md").write_text(text, encoding="utf-8")
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T1)
        with sqlite_file(db_path) as con:
            chunks = con.execute("SELECT count(*), count(DISTINCT text_id) FROM chunks").fetchone()
        assert chunks[0] > chunks[1]


@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow")
def test_dot_folders_symlinks_and_non_markdown_are_skipped(db_path: Path, vault_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("# secret\n", encoding="utf-8")
    (vault_dir / "escape.md").symlink_to(outside)
    (vault_dir / ".hidden.md").write_text("hidden\n", encoding="utf-8")
    with open_vault(db_path, vault_dir) as vault:
        summary = vault.sync(known_at=T1)
        paths = [r.path for r in vault.ls()]
        assert paths == ["Inbox.md", "Projects/Atlas.md"]
        assert [(e.path, "a symlink, not followed" in e.reason) for e in summary.errors] == [("escape.md", True)]


@pytest.mark.parametrize(
    "payload, reason",
    [
        (b"# ok\n\xff\xfe broken\n", "invalid UTF-8 at byte 5"),
        (b"# ok\n\x00\x01binary", "NUL bytes"),
    ],
)
def test_bad_file_keeps_last_good_revision(db_path: Path, vault_dir: Path, payload: bytes, reason: str) -> None:
    inbox = vault_dir / "Inbox.md"
    good = inbox.read_bytes()
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T1)
        inbox.write_bytes(payload)
        (vault_dir / "Later.md").write_text("# Later\n", encoding="utf-8")
        summary = vault.sync(known_at=T2)
        assert [(e.path, reason in e.reason) for e in summary.errors] == [("Inbox.md", True)]
        assert summary.added == 1  # the rest of the batch landed
        assert vault.read("Inbox.md").content.encode() == good
        # --strict refuses the whole batch instead
        (vault_dir / "Even later.md").write_text("# Even later\n", encoding="utf-8")
        with pytest.raises(ParseError, match="Inbox.md"):
            vault.sync(known_at=T3, strict=True)
        assert "Even later.md" not in [r.path for r in vault.ls()]


def test_oversized_file_is_refused_by_name(db_path: Path, vault_dir: Path) -> None:
    (vault_dir / "Huge.md").write_bytes(b"x" * (5 * 2**20 + 1))
    with open_vault(db_path, vault_dir) as vault:
        summary = vault.sync(known_at=T1)
        assert [e.path for e in summary.errors] == ["Huge.md"] and "MB limit" in summary.errors[0].reason
        assert summary.added == 2


def test_known_at_going_backwards_is_refused(db_path: Path, vault_dir: Path) -> None:
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T2)
        (vault_dir / "Inbox.md").write_text("changed\n", encoding="utf-8")
        with pytest.raises(ConfigError, match="earlier than the vault's last batch"):
            vault.sync(known_at=T1)
        assert vault.read("Inbox.md").content.startswith("# Inbox")
        assert vault.sync(known_at=T2).modified == 1  # equal times are allowed


@pytest.mark.parametrize("bad", ["2024-02-30", "yesterday", "2024-01-01T10:00", "2024-13-01", "1e9"])
def test_impossible_times_are_refused(db_path: Path, vault_dir: Path, bad: str) -> None:
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T1)
        with pytest.raises(ConfigError, match="YYYY-MM-DD"):
            vault.read("Inbox.md", as_of=bad)


@pytest.mark.parametrize("bad", ["../outside.md", "/etc/passwd", "a/../../b.md", "C:/x.md"])
def test_paths_outside_the_vault_are_refused(db_path: Path, vault_dir: Path, bad: str) -> None:
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T1)
        with pytest.raises(PathError):
            vault.read(bad)


def test_append_only_tables_refuse_rewrites(db_path: Path, vault_dir: Path) -> None:
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T1)
        (vault_dir / "Inbox.md").write_text("changed\n", encoding="utf-8")
        vault.sync(known_at=T2)
        with sqlite_file(db_path) as con:  # the database itself refuses, whoever writes
            for sql in [
                "UPDATE notes SET path = 'x'",
                "DELETE FROM chunks",
                "UPDATE texts SET body = x''",
                "DELETE FROM batches",
                "UPDATE note_ends SET batch_id = 0",
            ]:
                with pytest.raises(apsw.ConstraintError, match="append-only"):
                    con.execute(sql)
        assert vault.check() == []


def test_check_finds_tampering(db_path: Path, vault_dir: Path) -> None:
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T1)
        with sqlite_file(db_path) as con:  # tampering from outside vaultsync
            con.execute("DROP TRIGGER texts_no_update")
            con.execute("UPDATE texts SET body = zeroblob(3) WHERE id = 1")
        problems = vault.check()
        assert any("texts_no_update is missing" in p for p in problems)
        assert any("does not match" in p for p in problems)


@pytest.mark.capabilities_off("no-fcntl")
def test_second_writer_is_refused(db_path: Path, vault_dir: Path) -> None:
    with open_vault(db_path, vault_dir) as first, open_vault(db_path, vault_dir) as second:
        first.lock.acquire(command="vaultsync watch test")
        with pytest.raises(LockedError, match="vaultsync watch test"):
            second.sync()
        first.lock.release()
        assert second.sync(known_at=T1).added == 2


def test_same_name_different_folder_is_refused(db_path: Path, vault_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / vault_dir.name
    other.mkdir(parents=True)
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T1)
    with pytest.raises(ConfigError, match="already lives at"):
        Vault.open(db_path, root=other)
    with Vault.open(db_path, root=other, name="second") as second:
        assert second.sync().added == 0
    with pytest.raises(ConfigError, match="holds 2 vaults"):
        Vault.open(db_path)


def test_database_inside_the_vault_is_refused(vault_dir: Path) -> None:
    with pytest.raises(ConfigError, match="must not live inside the vault"):
        Vault.open(vault_dir / "vaultsync.db", root=vault_dir)


def test_crlf_and_cr_files_read_back_byte_for_byte(db_path: Path, vault_dir: Path) -> None:
    raw = "# Title\r\n\r\nline one\rline two\r\n## Sub\n\u2028odd\x85\x0c\n\ufeff".encode("utf-8")
    (vault_dir / "Endings.md").write_bytes(raw)
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T1)
        assert vault.read("Endings.md").content.encode("utf-8") == raw


def test_links_are_stored_per_chunk_and_read_back_exactly(db_path: Path, vault_dir: Path) -> None:
    from vaultsync.parsers import parse_note
    from vaultsync.store.write import link_dict

    note = vault_dir / "Linked.md"
    body = (
        "# Top\n\n[[A]] and [[B#H|b]]\n\n## Second\n\n![[img.png]] [web](https://example.org)\n\n"
        "## Third\n\n[[C^blk]]\n"
    )
    note.write_text(body, encoding="utf-8")
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T1)
        expected = [link_dict(link) for link in parse_note(body, "Linked.md").links]
        assert vault.read("Linked.md").revision.links == expected and len(expected) == 5
        # lines shift in later sections; their stored link lists are reused, lines still exact
        shifted = body.replace("[[A]] and", "one\ntwo\n[[A]] and")
        note.write_text(shifted, encoding="utf-8")
        vault.sync(known_at=T2)
        assert vault.read("Linked.md").revision.links == [link_dict(x) for x in parse_note(shifted, "Linked.md").links]
        assert vault.read("Linked.md", as_of=T1).revision.links == expected
        with sqlite_file(db_path) as con:
            blobs = con.execute(
                "SELECT count(DISTINCT c.links_id) FROM chunks c JOIN notes n ON n.id = c.note_id "
                "WHERE n.path = 'Linked.md'"
            ).fetchone()[0]
        assert blobs == 4  # three chunks' link lists, plus the first chunk's again after its edit


def test_texts_compress_with_a_dictionary_trained_on_the_vault(db_path: Path, vault_dir: Path) -> None:
    from vaultsync.store import codec

    for i in range(120):  # enough text (>= 64 KB) to train a dictionary in the first batch
        (vault_dir / f"Daily {i:03}.md").write_text(
            f"# Day {i}\n\n" + f"Met the Atlas crew about sync, offline maps and field notes, item {i}.\n" * 12,
            encoding="utf-8",
        )
    with open_vault(db_path, vault_dir) as vault:
        vault.sync(known_at=T1)
        with sqlite_file(db_path) as con:
            assert con.execute("SELECT count(*) FROM dictionaries").fetchone()[0] == 1
            bodies = [r[0] for r in con.execute("SELECT body FROM texts")]
        assert all(b[:1] == b"\x01" for b in bodies)
        assert vault.read("Daily 007.md").content == (vault_dir / "Daily 007.md").read_text(encoding="utf-8")
        # a later batch reuses the stored dictionary; a new process finds it in the database
        (vault_dir / "Daily 007.md").write_text("# Day 7\n\nrewritten\n", encoding="utf-8")
        vault.sync(known_at=T2)
        with sqlite_file(db_path) as con:
            assert con.execute("SELECT count(*) FROM dictionaries").fetchone()[0] == 1
    codec._DICTS.clear()
    with Vault.open(db_path, readonly=True) as reader:
        assert reader.read("Daily 007.md").content == "# Day 7\n\nrewritten\n"
        assert reader.read("Daily 007.md", as_of=T1).content.startswith("# Day 7\n\nMet the Atlas crew")
        assert reader.check() == []

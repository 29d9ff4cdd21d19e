"""``restore`` and ``undo`` on a small vault: deleted, renamed and moved notes, folders, --to, --dry-run,
symlinks refused, an editor's save during a restore kept in the history."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from vaultsync import Vault
from vaultsync.disk import vaultfs
from vaultsync.times import format_time, now_micros
from vaultsync.vault import restore


@pytest.fixture
def timeline(tmp_path: Path, cli) -> tuple[Path, Path, str]:
    """A vault imported once (T0 after it), then changed and imported again: returns root, db, T0."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    (root / "P").mkdir(parents=True)
    (root / "P" / "a.md").write_text("# a\n\nfirst\n", encoding="utf-8")
    (root / "P" / "b.md").write_text("# b\n\nfirst\n", encoding="utf-8")
    (root / "Top.md").write_text("# top\n", encoding="utf-8")
    (root / "P" / "a.md").chmod(0o600)
    assert cli("import", str(root), db=db).returncode == 0
    time.sleep(0.01)
    t0 = format_time(now_micros())
    time.sleep(0.01)
    (root / "P" / "a.md").write_text("# a\n\nsecond\n", encoding="utf-8")
    (root / "P" / "b.md").unlink()
    (root / "P" / "c.md").write_text("# c\n\nnewer\n", encoding="utf-8")
    (root / "Top.md").rename(root / "Moved.md")
    assert cli("import", str(root), db=db).returncode == 0
    return root, db, t0


def test_restore_a_modified_a_deleted_and_a_renamed_note(timeline, cli) -> None:
    root, db, t0 = timeline
    dry = cli("restore", "P/a.md", "--as-of", t0, "--dry-run", db=db)
    assert dry.returncode == 0 and "-second\n+first\n" in dry.stdout
    assert (root / "P" / "a.md").read_text() == "# a\n\nsecond\n", "a dry run writes nothing"
    for path in ("P/a.md", "P/b.md"):
        done = cli("restore", path, "--as-of", t0, "--json", db=db)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["batch_id"] is not None, (path, done.stdout, done.stderr)
    (root / "Moved.md").write_text("# top, edited after the rename\n", encoding="utf-8")
    assert cli("import", str(root), db=db).returncode == 0
    copy = json.loads(cli("restore", "Top.md", "--as-of", t0, "--dry-run", "--json", db=db).stdout)["notes"][0]
    assert copy["path"] == "Top.md" and "lives at Moved.md now" in copy["note"], "a copy, and the plan says so"
    moved = json.loads(cli("restore", "Top.md", "--as-of", t0, "--follow", "--json", db=db).stdout)
    assert moved["notes"][0]["path"] == "Moved.md" and moved["batch_id"] is not None, "found under its old name"
    assert (root / "P" / "a.md").read_text() == "# a\n\nfirst\n" and (
        root / "P" / "a.md"
    ).stat().st_mode & 0o777 == 0o600
    assert (root / "P" / "b.md").read_text() == "# b\n\nfirst\n", "a deleted note comes back at its old path"
    assert (root / "Moved.md").read_text() == "# top\n" and not (root / "Top.md").exists()
    with Vault.open(db, name="vault", readonly=True) as vault:
        kinds = [r.kind for r in vault.history("P/b.md")]
        assert kinds == ["created", "deleted", "created"]
        info = vault.batch_info(vault.history("P/b.md")[-1].batch_id)
        assert info["source"] == "restore" and "revision" in info["detail"]
        assert vault.check() == []
    again = cli("restore", "P/a.md", "--as-of", t0, "--json", db=db)
    assert json.loads(again.stdout)["batch_id"] is None, "nothing to do the second time"


def test_a_taken_path_gets_what_read_shows_or_to(timeline, cli) -> None:
    root, db, t0 = timeline
    (root / "P" / "b.md").write_text("# another b\n", encoding="utf-8")
    assert cli("import", str(root), db=db).returncode == 0
    done = cli("restore", "P/b.md", "--as-of", t0, "--to", "P/b (restored).md", db=db)
    assert done.returncode == 0 and (root / "P" / "b (restored).md").read_text() == "# b\n\nfirst\n"
    assert (root / "P" / "b.md").read_text() == "# another b\n", "--to leaves the path alone"
    replaced = cli("restore", "P/b.md", "--as-of", t0, db=db)
    assert replaced.returncode == 0 and "replaces the note at P/b.md now" in replaced.stdout
    assert (root / "P" / "b.md").read_text() == cli("read", "P/b.md", "--as-of", t0, db=db).stdout == "# b\n\nfirst\n"
    with Vault.open(db, name="vault", readonly=True) as vault:
        assert "# another b\n" in [vault.revision_text(r) for r in vault.history("P/b.md") if not r.deleted]


def test_restore_a_folder_and_delete_newer(timeline, cli) -> None:
    root, db, t0 = timeline
    kept = cli("restore", "--prefix", "P/", "--as-of", t0, db=db)
    assert kept.returncode == 0 and (root / "P" / "c.md").exists(), "notes created since are left alone"
    assert sorted(p.name for p in (root / "P").iterdir()) == ["a.md", "b.md", "c.md"]
    done = cli("restore", "--prefix", "P/", "--as-of", t0, "--delete-newer", "--json", db=db)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (root / "P").iterdir()) == ["a.md", "b.md"]
    with Vault.open(db, name="vault", readonly=True) as vault:
        assert [r.path for r in vault.ls(prefix="P/")] == ["P/a.md", "P/b.md"]
        assert vault.history("P/c.md")[-1].kind == "deleted", "the deleted note stays in the history"


def test_a_symlink_is_never_written_through(timeline, tmp_path: Path, cli) -> None:
    root, db, t0 = timeline
    outside = tmp_path / "outside.md"
    outside.write_text("outside\n", encoding="utf-8")
    (root / "P" / "a.md").unlink()
    os.symlink(outside, root / "P" / "a.md")
    refused = cli("restore", "P/a.md", "--as-of", t0, db=db)
    assert refused.returncode == 1 and "symlink" in refused.stderr
    assert outside.read_text() == "outside\n"


def test_an_editor_saving_during_a_restore_is_kept_in_the_history(timeline) -> None:
    root, db, t0 = timeline
    note = root / "P" / "a.md"
    real_temp = vaultfs._temp
    saves: list[int] = []

    def temp_then_editor_saves(dir_fd: int, data: bytes, mode: int | None) -> str:
        name = real_temp(dir_fd, data, mode)
        if not saves:
            note.write_text("# a\n\ntyped in the editor\n", encoding="utf-8")
            saves.append(1)
        return name

    with Vault.open(db, root=root) as vault:
        step = restore.plan_note(vault, "P/a.md", as_of=t0)
        vaultfs._temp = temp_then_editor_saves  # type: ignore[assignment]
        try:
            done = restore.apply(vault, [step], source="restore", detail="test")
        finally:
            vaultfs._temp = real_temp  # type: ignore[assignment]
        texts = [vault.revision_text(r) for r in vault.history("P/a.md")]
    assert saves and note.read_text() == "# a\n\nfirst\n" and done.summary is not None
    assert texts[-2:] == ["# a\n\ntyped in the editor\n", "# a\n\nfirst\n"], "the editor's save was recorded first"

"""``restore`` and ``undo`` mean what ``read`` shows: a re-created note's path, notes moved since (a copy that says
where the note lives, or ``--follow``), ``--delete-newer`` never deleting a note that moved in, ``undo`` of a rename
renaming back, refusals exiting non-zero, ``--dry-run`` saying all of it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from vaultsync import Vault
from vaultsync.times import format_time, now_micros


def moment() -> str:
    time.sleep(0.01)
    at = format_time(now_micros())
    time.sleep(0.01)
    return at


@pytest.fixture
def moved(tmp_path: Path, cli) -> tuple[Path, Path, str]:
    """Recipes/{Soup,Cake}.md and A.md imported (BEFORE after that); then ``mv Recipes Food`` imported."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    (root / "Recipes").mkdir(parents=True)
    (root / "Recipes" / "Soup.md").write_text("# Soup\n\nleeks\n", encoding="utf-8")
    (root / "Recipes" / "Cake.md").write_text("# Cake\n\nflour\n", encoding="utf-8")
    (root / "A.md").write_text("# A\n\nmay\n", encoding="utf-8")
    cli("import", str(root), db=db, check=True)
    before = moment()
    (root / "Recipes").rename(root / "Food")
    cli("import", str(root), db=db, check=True)
    return root, db, before


def kinds(db: Path, path: str) -> list[str]:
    with Vault.open(db, name="vault", readonly=True) as vault:
        return [r.kind for r in vault.history(path)]


def test_restore_of_a_recreated_note_puts_back_what_read_shows(moved, cli) -> None:
    root, db, before = moved
    (root / "A.md").unlink()
    cli("import", str(root), db=db, check=True)
    (root / "A.md").write_text("# A\n\naugust\n", encoding="utf-8")
    cli("import", str(root), db=db, check=True)
    shown = cli("read", "A.md", "--as-of", before, db=db, check=True).stdout
    dry = cli("restore", "A.md", "--as-of", before, "--dry-run", db=db)
    assert dry.returncode == 0 and "replaces the note at A.md now" in dry.stdout and "-august\n+may\n" in dry.stdout
    done = cli("restore", "A.md", "--as-of", before, db=db)
    assert done.returncode == 0, done.stderr
    assert (root / "A.md").read_text(encoding="utf-8") == shown == "# A\n\nmay\n"
    assert kinds(db, "A.md") == ["created", "deleted", "created", "modified"], "the August text stays in history"
    with Vault.open(db, name="vault", readonly=True) as vault:
        august = vault.history("A.md")[2]
        assert vault.revision_text(august) == "# A\n\naugust\n"


def test_a_note_moved_since_is_a_copy_that_says_where_it_lives_or_follows(moved, cli) -> None:
    root, db, before = moved
    (root / "Food" / "Soup.md").write_text("# Soup\n\nleeks, potatoes\n", encoding="utf-8")
    cli("import", str(root), db=db, check=True)
    dry = cli("restore", "Recipes/Soup.md", "--as-of", before, "--dry-run", db=db)
    assert dry.returncode == 0 and "create     Recipes/Soup.md" in dry.stdout
    assert "this note lives at Food/Soup.md now (--follow restores it there)" in dry.stdout
    followed = cli("restore", "Recipes/Soup.md", "--as-of", before, "--follow", "--json", db=db)
    assert followed.returncode == 0, followed.stderr
    assert [n["path"] for n in json.loads(followed.stdout)["notes"]] == ["Food/Soup.md"]
    assert (root / "Food" / "Soup.md").read_text(encoding="utf-8") == "# Soup\n\nleeks\n"
    assert not (root / "Recipes").exists(), "--follow writes no copy"
    copied = cli("restore", "Recipes/Soup.md", "--as-of", before, db=db)
    assert copied.returncode == 0, copied.stderr
    shown = cli("read", "Recipes/Soup.md", "--as-of", before, db=db, check=True).stdout
    assert (root / "Recipes" / "Soup.md").read_text(encoding="utf-8") == shown


def test_a_folder_restore_copies_or_follows_the_moved_notes(moved, cli) -> None:
    root, db, before = moved
    dry = cli("restore", "--prefix", "Recipes/", "--as-of", before, "--dry-run", db=db)
    assert dry.returncode == 0 and dry.stdout.count("(--follow restores it there)") == 2
    followed = cli("restore", "--prefix", "Recipes/", "--as-of", before, "--follow", db=db)
    assert followed.returncode == 0 and not (root / "Recipes").exists(), "the notes live in Food/: nothing to do"
    cli("restore", "--prefix", "Recipes/", "--as-of", before, db=db, check=True)
    assert sorted(p.name for p in (root / "Recipes").iterdir()) == ["Cake.md", "Soup.md"]


def test_delete_newer_never_deletes_a_note_that_moved_in(moved, cli) -> None:
    root, db, before = moved
    (root / "Food" / "Pie.md").write_text("# Pie\n", encoding="utf-8")
    cli("import", str(root), db=db, check=True)
    dry = cli("restore", "--prefix", "Food/", "--as-of", before, "--delete-newer", "--dry-run", db=db)
    assert dry.returncode == 0
    assert (
        "keep       Food/Soup.md  (Recipes/Soup.md as of" in dry.stdout
        and "moved here from Recipes/Soup.md" in dry.stdout
    )
    assert "delete     Food/Pie.md" in dry.stdout
    cli("restore", "--prefix", "Food/", "--as-of", before, "--delete-newer", db=db, check=True)
    assert sorted(p.name for p in (root / "Food").iterdir()) == ["Cake.md", "Soup.md"]
    kept = cli("restore", "--prefix", "Food/", "--as-of", before, db=db)
    assert kept.returncode == 0 and "keep" in kept.stdout, "notes kept are no refusal"


def test_undo_of_a_rename_batch_renames_back(moved, cli) -> None:
    root, db, _ = moved
    with Vault.open(db, name="vault", readonly=True) as vault:
        batch = vault.history("Food/Soup.md")[-1].batch_id
    dry = cli("undo", str(batch), "--dry-run", db=db)
    assert dry.returncode == 0 and "renamed back from Food/Soup.md" in dry.stdout
    done = cli("undo", str(batch), "--json", db=db)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (root / "Recipes").iterdir()) == ["Cake.md", "Soup.md"]
    assert not (root / "Food").exists(), "the folder the undo emptied is removed"
    with Vault.open(db, name="vault", readonly=True) as vault:
        last = vault.history("Recipes/Soup.md")[-1]
        assert (last.kind, last.renamed_from) == ("renamed", "Food/Soup.md")
        assert vault.batch_info(last.batch_id)["source"] == "undo"


def test_undo_of_a_rename_edited_since_is_refused_whole_and_exits_non_zero(moved, cli) -> None:
    root, db, _ = moved
    with Vault.open(db, name="vault", readonly=True) as vault:
        batch = vault.history("Food/Soup.md")[-1].batch_id
    (root / "Food" / "Soup.md").write_text("# Soup\n\nedited since\n", encoding="utf-8")
    cli("import", str(root), db=db, check=True)
    refused = cli("undo", str(batch), db=db)
    assert refused.returncode == 1
    assert "refused    Recipes/Soup.md" in refused.stdout and "refused    Food/Soup.md" in refused.stdout
    assert not (root / "Recipes" / "Soup.md").exists(), "no copy of the half-undone rename"
    assert (root / "Food" / "Soup.md").read_text(encoding="utf-8") == "# Soup\n\nedited since\n"


def test_undo_keeps_a_folder_that_still_holds_something(moved, cli) -> None:
    """Only a folder the undo left empty goes: one holding a file that is not a note (or a sub-folder) stays."""
    root, db, _ = moved
    with Vault.open(db, name="vault", readonly=True) as vault:
        batch = vault.history("Food/Soup.md")[-1].batch_id
    (root / "Food" / "photo.png").write_bytes(b"png")
    (root / "Food" / "Empty").mkdir()
    cli("undo", str(batch), db=db, check=True)
    assert sorted(p.name for p in (root / "Food").iterdir()) == ["Empty", "photo.png"]


def test_undo_of_a_nested_move_removes_each_folder_it_emptied(moved, cli) -> None:
    root, db, _ = moved
    (root / "Deep" / "er").mkdir(parents=True)
    (root / "A.md").rename(root / "Deep" / "er" / "A.md")
    cli("import", str(root), db=db, check=True)
    with Vault.open(db, name="vault", readonly=True) as vault:
        last = vault.history("Deep/er/A.md")[-1]
        assert last.kind == "renamed"
    cli("undo", str(last.batch_id), db=db, check=True)
    assert (root / "A.md").read_text(encoding="utf-8") == "# A\n\nmay\n"
    assert not (root / "Deep").exists()


def test_an_empty_folder_is_removed_only_inside_the_vault_and_never_through_a_symlink(tmp_path: Path) -> None:
    from vaultsync.disk import vaultfs

    root, outside = tmp_path / "vault", tmp_path / "outside"
    (root / "kept").mkdir(parents=True)
    (root / "kept" / "x.md").write_text("x", encoding="utf-8")
    (root / "empty" / "inner").mkdir(parents=True)
    (outside / "empty").mkdir(parents=True)
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "emptylink").symlink_to(outside / "empty", target_is_directory=True)
    for rel in ("", ".", "..", "../outside/empty", "link/empty", "emptylink", "kept", "missing", "empty"):
        assert vaultfs.remove_empty_folder(root, rel) is False, rel
    assert (outside / "empty").is_dir() and (root / "emptylink").is_symlink() and (root / "kept" / "x.md").exists()
    assert (root / "empty").is_dir(), "a folder holding a folder is not empty"
    assert vaultfs.remove_empty_folder(root, "empty/inner") is True
    assert vaultfs.remove_empty_folder(root, "empty") is True
    assert not (root / "empty").exists() and root.is_dir()

"""``deleted``, ``checkout``, ``blame`` and ``restore --prefix --to`` on a copy of the demo vault (notes/): what each
answers and how each refuses, in one line."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from vaultsync import Vault
from vaultsync.times import format_time, now_micros

NOTES = Path(__file__).resolve().parents[2] / "notes"


def _moment() -> str:
    time.sleep(0.002)
    t = format_time(now_micros())
    time.sleep(0.002)
    return t


@pytest.fixture
def demo(tmp_path: Path, cli) -> tuple[Path, Path, str]:
    """notes/ imported, then (after T0) a note deleted, one renamed, one deleted and created again, one edited:
    returns root, db, T0."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    shutil.copytree(NOTES, root)
    assert cli("import", str(root), db=db).returncode == 0
    t0 = _moment()
    (root / "Inbox.md").unlink()
    (root / "Travel" / "Lisbon Offsite 2025.md").rename(root / "Travel" / "Lisboa.md")
    (root / "Home.md").unlink()
    assert cli("import", str(root), db=db).returncode == 0
    (root / "Home.md").write_text("# Home\n\nstarted again\n", encoding="utf-8")
    with open(root / "Travel" / "Lisboa.md", "a", encoding="utf-8") as f:
        f.write("\nA line added after the rename.\n")
    assert cli("import", str(root), db=db).returncode == 0
    return root, db, t0


def test_deleted_lists_what_is_gone_with_its_restore_command(demo, cli) -> None:
    root, db, t0 = demo
    listed = json.loads(cli("deleted", "--json", db=db).stdout)
    assert [d["path"] for d in listed] == ["Inbox.md"], "a rename and a re-created note are no deletions"
    gone = listed[0]
    assert gone["size"] == len((NOTES / "Inbox.md").read_bytes()) and gone["last_revision"].startswith("r")
    command = gone["restore"].split()
    assert command[:3] == ["vaultsync", "restore", "Inbox.md"] and command[3] == "--as-of"
    assert cli("read", "Inbox.md", "--as-of", command[4], db=db).stdout_bytes == (NOTES / "Inbox.md").read_bytes()
    assert cli("read", "Inbox.md", "--as-of", gone["deleted_at"], db=db).returncode == 1, "gone at that moment"
    done = cli(*command[1:], db=db)
    assert done.returncode == 0, done.stderr
    assert (root / "Inbox.md").read_bytes() == (NOTES / "Inbox.md").read_bytes()
    assert json.loads(cli("deleted", "--json", db=db).stdout) == [], "restored: no longer deleted"

    human = cli("deleted", "--until", gone["deleted_at"], db=db)
    assert human.returncode == 0 and "Inbox.md" in human.stdout and "Home.md" in human.stdout, (
        "as of the window's end, Home.md was still gone"
    )
    empty = cli("deleted", "--since", gone["deleted_at"], db=db)
    assert (empty.returncode, empty.stdout) == (0, "") and empty.stderr.count("\n") == 1 and "no note" in empty.stderr
    assert cli("deleted", "--since", gone["deleted_at"], "--json", db=db).stdout.strip() == "[]"
    assert cli("deleted", "--since", t0, "--until", "2001-01-01", db=db).returncode == 1
    later = cli("deleted", "--since", "2100-01-01", db=db)
    assert (later.returncode, later.stdout) == (0, "") and "no note" in later.stderr, "a window after the history"


def test_checkout_writes_the_past_into_an_empty_folder(demo, cli, tmp_path: Path) -> None:
    root, db, t0 = demo
    out = tmp_path / "then"
    done = cli("checkout", "--as-of", t0, "--to", str(out), "--json", db=db)
    assert done.returncode == 0, done.stderr
    want = {p.relative_to(NOTES).as_posix(): p.read_bytes() for p in NOTES.rglob("*.md") if ".obsidian" not in p.parts}
    got = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert got == want and json.loads(done.stdout)["notes"] == len(want)
    umask = os.umask(0)
    os.umask(umask)
    assert {p.stat().st_mode & 0o777 for p in out.rglob("*.md")} == {0o666 & ~umask}
    assert (root / "Travel" / "Lisboa.md").exists(), "the vault is not touched"

    def refused(to: Path | str, why: str) -> None:
        ran = cli("checkout", "--to", str(to), db=db)
        assert ran.returncode == 1 and why in ran.stderr and ran.stderr.count("\n") == 1, ran.stderr

    refused(out, "is not empty")
    refused(root, "inside the vault")
    refused(root / "Travel" / "new", "inside the vault")
    assert not (root / "Travel" / "new").exists()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    refused(tmp_path / "link", "symlink")
    (tmp_path / "file").write_text("x")
    refused(tmp_path / "file", "not a folder")
    early = cli("checkout", "--as-of", "2001-01-01", "--to", str(tmp_path / "early"), db=db)
    assert early.returncode == 1 and "no history as of" in early.stderr and not (tmp_path / "early").exists()


def test_blame_follows_renames(demo, cli) -> None:
    root, db, t0 = demo
    lines = json.loads(cli("blame", "Travel/Lisboa.md", "--json", db=db).stdout)
    text = (root / "Travel" / "Lisboa.md").read_text(encoding="utf-8")
    assert [x["text"] for x in lines] == text.split("\n")[:-1]
    with Vault.open(db, name="vault", readonly=True) as vault:
        created, renamed, edited = [r for r in vault.history("Travel/Lisboa.md") if not r.deleted]
    assert (created.kind, renamed.kind, edited.kind) == ("created", "renamed", "modified")
    assert lines[-1]["id"] == f"r{edited.batch_id}" and lines[-1]["text"] == "A line added after the rename."
    assert lines[-2]["id"] == f"r{edited.batch_id}", "the blank line before it came with it"
    assert {x["id"] for x in lines[:-2]} == {f"r{created.batch_id}"}, "unchanged lines keep their first revision"
    assert {x["path"] for x in lines[:-2]} == {"Travel/Lisbon Offsite 2025.md"}, "under the name they had then"
    before = json.loads(cli("blame", "Travel/Lisbon Offsite 2025.md", "--as-of", t0, "--json", db=db).stdout)
    assert [x["text"] for x in before] == (NOTES / "Travel" / "Lisbon Offsite 2025.md").read_text().split("\n")[:-1]
    human = cli("blame", "Home.md", db=db)
    assert human.returncode == 0 and human.stdout.splitlines()[-1].endswith("started again")

    def refused(*args: str, why: str) -> None:
        ran = cli("blame", *args, db=db)
        assert ran.returncode == 1 and why in ran.stderr and ran.stderr.count("\n") == 1, ran.stderr

    refused("Nope.md", why="Nope.md")
    refused("Inbox.md", why="Inbox.md")
    refused("Home.md", "--as-of", "2001-01-01", why="did not exist")
    refused("Home.md", "--as-of", "tomorrowish", why="--as-of")


def test_restore_a_folder_to_another_folder(demo, cli) -> None:
    root, db, t0 = demo
    live = {p: p.read_bytes() for p in (root / "Travel").rglob("*.md")}
    dry = cli("restore", "--prefix", "Travel/", "--as-of", t0, "--to", "Archive/Travel/", "--dry-run", "--json", db=db)
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)["notes"]
    old = sorted(p.relative_to(NOTES / "Travel").as_posix() for p in (NOTES / "Travel").rglob("*.md"))
    assert sorted(s["path"] for s in planned) == [f"Archive/Travel/{p}" for p in old], "never the live folder"
    assert {s["action"] for s in planned} == {"create"}
    done = cli("restore", "--prefix", "Travel/", "--as-of", t0, "--to", "Archive/Travel/", db=db)
    assert done.returncode == 0, done.stderr
    for p in old:
        assert (root / "Archive" / "Travel" / p).read_bytes() == (NOTES / "Travel" / p).read_bytes()
    assert {p: p.read_bytes() for p in (root / "Travel").rglob("*.md")} == live, "the live folder is left alone"
    both = cli("restore", "--prefix", "Travel/", "--as-of", t0, "--to", "Old/", "--delete-newer", db=db)
    assert both.returncode == 1 and "delete_newer" in both.stderr and not (root / "Old").exists()

"""Messages that say what happened and commands that agree with each other, in-process with click's runner:
one short content hash shown by history, changes and ls --json, and taken back by ``restore --revision``
(whose plan names the revision by the id history prints); a deleted note's read says when and how to read
it before; no Python repr in a message; --db and --vault after the command; diff --json; history
--since/--until; changes without a window (the last 7 days, with the batch ids undo takes); help that does
not cut summaries."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import pytest

from vaultsync.times import format_time, now_micros

OLD = "2024-01-01T00:00:00Z"
SHORT = r"[0-9a-f]{8}"


@pytest.fixture
def vault(tmp_path: Path, cli) -> tuple[Path, Path, str]:
    """Batches: an old import (2024), then, now, an edit of a.md and the deletion of gone.md. Returns root, db
    and a time between the two recent batches."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    (root / "a.md").write_text("# a\n\nfirst\n", encoding="utf-8")
    (root / "gone.md").write_text("# gone\n\nsoon deleted\n", encoding="utf-8")
    assert cli("import", str(root), "--known-at", OLD, db=db).returncode == 0
    (root / "a.md").write_text("# a\n\nsecond\n", encoding="utf-8")
    assert cli("import", str(root), db=db).returncode == 0
    time.sleep(0.01)
    between = format_time(now_micros())
    time.sleep(0.01)
    (root / "gone.md").unlink()
    assert cli("import", str(root), db=db).returncode == 0
    return root, db, between


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_one_revision_id_shown_everywhere_and_taken_back(vault, cli) -> None:
    root, db, _ = vault
    first, second = sha("# a\n\nfirst\n"), sha("# a\n\nsecond\n")
    shown = cli("history", "a.md", db=db, check=True).stdout
    assert re.findall(SHORT + r"(?=\s)", shown) == [first[:8], second[:8]], shown
    assert [r["revision"] for r in json.loads(cli("history", "a.md", "--json", db=db, check=True).stdout)] == [
        first[:8],
        second[:8],
    ]
    listed = json.loads(cli("ls", "--json", db=db, check=True).stdout)
    assert [(n["path"], n["revision"]) for n in listed] == [("a.md", second[:8])]
    changes = cli("changes", "--since", OLD, db=db, check=True).stdout
    assert f"{second[:8]}" in changes and "a.md" in changes
    assert "note_id" not in changes

    first_id = json.loads(cli("history", "a.md", "--json", db=db, check=True).stdout)[0]["id"]
    dry = cli("restore", "a.md", "--revision", first[:8], "--dry-run", db=db, check=True)
    assert f"revision {first_id} of a.md" in dry.stdout, dry.stdout  # the id history prints for it
    assert not re.search(r"revision \d+\b", dry.stdout + dry.stderr), dry.stdout
    done = cli("restore", "a.md", "--revision", first[:8], db=db)
    assert done.returncode == 0 and (root / "a.md").read_text(encoding="utf-8") == "# a\n\nfirst\n"


def test_a_deleted_note_says_when_and_how_to_read_it_before(vault, cli) -> None:
    root, db, between = vault
    said = cli("read", "gone.md", db=db)
    assert said.returncode == 1
    message = said.stderr.strip()
    assert "was deleted at" in message and "did not exist" not in message, message
    suggested = re.search(r"as of (\S+Z)", message)
    assert suggested, message
    back = cli("read", "gone.md", "--as-of", suggested.group(1), db=db, check=True)
    assert back.stdout == "# gone\n\nsoon deleted\n"
    never = cli("read", "never.md", db=db)
    assert never.returncode == 1 and "did not exist" in never.stderr and "deleted" not in never.stderr


def test_no_python_repr_in_a_message(vault, cli) -> None:
    _, db, _ = vault
    for bad in ("2025-01-01T00:00:00+25:00", "2025-02-30", "2025-01-01T25:00:00Z"):
        said = cli("read", "a.md", "--as-of", bad, db=db)
        assert said.returncode != 0
        assert "timedelta" not in said.stderr and "datetime." not in said.stderr and "Error: " in said.stderr, (
            said.stderr
        )


def test_db_and_vault_options_after_the_command(vault, cli) -> None:
    root, db, _ = vault
    before = cli("ls", db=db, check=True).stdout
    after = cli("ls", "--db", str(db), check=True)
    assert after.stdout == before
    named = cli("ls", "--json", "--vault", root.name, "--db", str(db), check=True)
    assert [n["path"] for n in json.loads(named.stdout)] == ["a.md"]
    also = cli("history", "a.md", f"--db={db}", check=True)
    assert also.stdout.count("\n") == 2


def test_diff_json_and_history_window(vault, cli) -> None:
    _, db, between = vault
    data = json.loads(cli("diff", "a.md", "--from", OLD, "--json", db=db, check=True).stdout)
    assert data["path"] == "a.md" and data["from"] == OLD and data["to"] is None
    assert "-first" in data["diff"] and "+second" in data["diff"]
    window = cli("history", "a.md", "--since", "2024-06-01", db=db, check=True).stdout
    assert window.count("\n") == 1 and "modified" in window
    early = cli("history", "gone.md", "--until", "2024-06-01", "--json", db=db, check=True).stdout
    assert [r["kind"] for r in json.loads(early)] == ["created"]
    late = cli("history", "gone.md", "--since", between, "--json", db=db, check=True).stdout
    assert [r["kind"] for r in json.loads(late)] == ["deleted"]


def test_changes_without_a_window_shows_the_last_week_with_batch_ids(vault, cli) -> None:
    root, db, _ = vault
    said = cli("changes", db=db, check=True)
    lines = said.stdout.splitlines()
    assert [line.split()[-1] for line in lines] == ["a.md", "gone.md"], said.stdout  # not the 2024 import
    assert "7 days" in said.stderr
    batches = [int(re.search(r" r(\d+) ", line).group(1)) for line in lines]
    data = json.loads(cli("changes", "--json", db=db, check=True).stdout)
    assert [c["batch"] for c in data] == batches
    undone = cli("undo", str(batches[-1]), db=db)
    assert undone.returncode == 0 and (root / "gone.md").read_text(encoding="utf-8") == "# gone\n\nsoon deleted\n"


def test_help_lists_whole_summaries_and_every_write_tool(cli) -> None:
    top = cli("--help", check=True).stdout
    commands = top.split("Commands:")[1]
    assert "..." not in commands, commands
    assert re.search(r"changes\s+Notes created, modified, renamed or deleted", commands)
    serve = " ".join(cli("serve", "--help", check=True).stdout.split())
    allow = serve.split("Options:")[1].split("--allow-writes")[1].split("--token-file")[0]
    for tool in ("create_note", "append_to_note", "edit_note", "restore_note"):
        assert tool in allow, allow

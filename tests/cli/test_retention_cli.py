"""Retention by hand through the command line: ``purge --policy`` (its ``--dry-run`` changes nothing),
``stats --retention`` (and ``$VAULTSYNC_RETENTION``), and a bad policy said in one line."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import invoke

POLICY = "keep_all=1d daily=forever"
DRAFTS = ["2024-03-01T09:00:00Z", "2024-03-01T09:10:00Z", "2024-03-01T09:20:00Z", "2024-03-02T09:00:00Z"]


def _drafts(vault_dir: Path, db: Path) -> None:
    for i, when in enumerate(DRAFTS):
        (vault_dir / "Inbox.md").write_text(f"# Inbox\n\ndraft {i}\n", encoding="utf-8")
        invoke("import", str(vault_dir), "--known-at", when, db=db, check=True)


def _answers(db: Path) -> list[str]:
    return [invoke("read", "Inbox.md", "--as-of", when, db=db).stdout for when in DRAFTS] + [
        invoke("history", "Inbox.md", "--json", db=db).stdout
    ]


def test_purge_policy_previews_then_thins(vault_dir: Path, db_path: Path) -> None:
    _drafts(vault_dir, db_path)
    before = _answers(db_path)
    assert "draft 0" in before[0] and "draft 1" in before[1]

    preview = invoke("purge", "--policy", POLICY, "--dry-run", "--json", db=db_path, check=True)
    seen = json.loads(preview.stdout)
    assert seen["dry_run"] and seen["policy"] == POLICY
    assert (seen["batches"], seen["batches_removed"], seen["revisions_removed"]) == (4, 2, 2)
    assert seen["texts_freed"] >= 2 and 0 <= seen["bytes_freed"] < seen["database_bytes"]
    assert _answers(db_path) == before  # a dry run changes nothing
    said = invoke("purge", "--policy", POLICY, "--dry-run", db=db_path, check=True).stdout
    assert "would remove 2 of 4 batches and 2 of" in said and "nothing changed" in said
    assert "of the database's" in said

    stats = json.loads(invoke("stats", "--json", db=db_path, env={"VAULTSYNC_RETENTION": POLICY}).stdout)
    assert stats["retention"]["batches_removed"] == 2 and stats["database_bytes"] > 0
    assert json.loads(invoke("stats", "--json", db=db_path).stdout)["retention"] is None  # off unless configured
    line = invoke("stats", "--retention", POLICY, db=db_path, check=True).stdout
    assert f"retention: {POLICY}: would remove 2 of 4 batches" in line

    done = json.loads(invoke("purge", "--policy", POLICY, "--json", "--yes", db=db_path, check=True).stdout)
    assert (done["command"], done["revisions_removed"], done["batches_removed"]) == ("retention", 2, 2)
    freed = done["database_bytes_before"] - done["database_bytes_after"]  # a few pages' database: none freed
    assert seen["database_bytes"] == done["database_bytes_before"] and seen["bytes_freed"] == freed
    after = _answers(db_path)
    assert after[2:4] == before[2:4]  # the kept moments: the end of each day
    assert after[0] == after[1] == ""  # the day's earlier drafts are gone; the history begins at its end
    history = json.loads(after[4])
    assert len(history) == 2


def test_a_bad_policy_is_one_line(vault_dir: Path, db_path: Path) -> None:
    _drafts(vault_dir, db_path)
    for args in (["purge", "--policy", "hourly=7 daily=forever"], ["stats", "--retention", "weekly=1d daily=2d"]):
        done = invoke(*args, db=db_path)
        assert done.returncode != 0 and done.stderr.startswith("Error: ") and len(done.stderr.splitlines()) == 1
    done = invoke("purge", "--before", "2024-03-02", "--policy", POLICY, db=db_path)
    assert done.returncode == 2 and "exactly one of" in done.stderr
    assert invoke("purge", "--dry-run", "--before", "2024-03-02", db=db_path).returncode == 2

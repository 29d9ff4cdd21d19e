"""What a real ``vaultsync watch`` says when most notes vanish at once and come back: the refusal once, naming
the option that confirms a real deletion, and its end once."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.watch_helpers import WatchProcess, no_thread_leaks, wait_until  # noqa: F401  (autouse fixture)

READY = "watching "


@pytest.mark.slow
def test_a_mass_deletion_is_said_once_with_its_option_and_its_end_once(tmp_path: Path, cli) -> None:
    root, db, aside = tmp_path / "vault", tmp_path / "db" / "vaultsync.db", tmp_path / "aside"
    root.mkdir()
    aside.mkdir()
    for i in range(25):
        (root / f"Note {i:02d}.md").write_text(f"# Note {i}\n", encoding="utf-8")
    assert cli("import", str(root), db=db).returncode == 0
    proc = WatchProcess(db, root, "--step-ms", "50", "--debounce-ms", "200")
    try:
        proc.wait_for(READY)
        for note in sorted(root.iterdir()):
            note.rename(aside / note.name)
        proc.wait_for("refusing to record 25 deletions")
        (aside / "Note 00.md").write_text("# Note 0\n\nedited while away\n", encoding="utf-8")  # more events
        for note in sorted(aside.iterdir()):
            note.rename(root / note.name)
        proc.wait_for("is back")
        (root / "New.md").write_text("# New\n", encoding="utf-8")
        wait_until(lambda: cli("ls", db=db).stdout.count("\n") == 26, what="recording to resume")
        proc.proc.terminate()
        assert proc.finish() == 0
    finally:
        if proc.proc.poll() is None:
            proc.proc.kill()
    warned = [line for line in proc.lines if "refusing to record" in line]
    assert len(warned) == 1, proc.stderr
    assert "--allow-mass-delete" in warned[0] and warned[0].count("confirm") <= 1, warned[0]
    assert sum("is back" in line for line in proc.lines) == 1, proc.stderr


BROKEN = "---\ntags: [unclosed\n---\n# Broken\n"


@pytest.mark.slow
def test_a_broken_frontmatter_is_warned_about_once_a_text_not_for_a_rename(tmp_path: Path, cli) -> None:
    """In a watch session: renaming a note whose YAML is broken says nothing (its text was warned about when the
    import stored it); changing it, still broken, warns once; the same text back after a deletion does not."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    (root / "Broken.md").write_text(BROKEN, encoding="utf-8")
    (root / "Fine.md").write_text("# Fine\n", encoding="utf-8")
    imported = cli("import", str(root), db=db)
    assert imported.returncode == 0 and "Broken.md: invalid YAML frontmatter" in imported.stderr, imported.stderr
    proc = WatchProcess(db, root, "--step-ms", "50", "--debounce-ms", "200")
    try:
        proc.wait_for(READY)
        (root / "Broken.md").rename(root / "Moved.md")
        proc.wait_for("1 renamed")
        (root / "Moved.md").rename(root / "Third.md")
        wait_until(lambda: sum("1 renamed" in line for line in proc.lines) == 2, what="the second rename")
        changed = BROKEN + "\nMore text.\n"
        (root / "Third.md").write_text(changed, encoding="utf-8")
        proc.wait_for("1 modified")
        (root / "Third.md").unlink()
        proc.wait_for("1 deleted")
        (root / "Again.md").write_text(changed, encoding="utf-8")
        proc.wait_for("1 added")
        proc.proc.terminate()
        assert proc.finish() == 0
    finally:
        if proc.proc.poll() is None:
            proc.proc.kill()
    warned = [line for line in proc.lines if "with a warning" in line]
    assert len(warned) == 1 and "stored Third.md with a warning: invalid YAML frontmatter" in warned[0], proc.stderr

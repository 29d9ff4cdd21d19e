"""Undoing a folder move on the command line: the plan says each note is renamed back, without a whole-file
diff for each end of each rename (the text moves as it is), and the undo puts the folder back."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_cli


@pytest.mark.slow
def test_undo_of_a_folder_move_plans_renames_without_whole_file_diffs(tmp_path: Path) -> None:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    (root / "Projects").mkdir(parents=True)
    for name in ("Atlas", "Beacon", "Compass"):
        (root / "Projects" / f"{name}.md").write_text(f"# {name}\n\n" + "a line of text\n" * 30, encoding="utf-8")
    run_cli("import", str(root), db=db, check=True)
    (root / "Archive").mkdir()
    (root / "Projects").rename(root / "Archive" / "Projects")
    moved = run_cli("import", str(root), db=db, check=True).stdout
    batch = moved.split("batch ")[1].split()[0]
    plan = run_cli("undo", batch, "--dry-run", db=db, check=True).stdout.splitlines()
    assert len(plan) == 6, plan  # one line a step: each note deleted here and created back there
    assert all("renamed back" in line for line in plan), plan
    assert not any(line.startswith(("---", "+++", "@@", "-a line", "+a line")) for line in plan), plan
    run_cli("undo", batch, db=db, check=True)
    assert sorted(p.name for p in (root / "Projects").iterdir()) == ["Atlas.md", "Beacon.md", "Compass.md"]
    assert not (root / "Archive" / "Projects").exists()

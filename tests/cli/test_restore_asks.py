"""``restore NOTE`` asks for what to put back in the command line's words: with neither ``--as-of`` nor
``--revision`` (or both), one ``Error:`` line naming both options, exit 2, and the note untouched."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize("given", [(), ("--as-of", "2025-01-01", "--revision", "r1")])
def test_restore_without_a_moment_names_both_options(tmp_path: Path, cli, given: tuple[str, ...]) -> None:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    (root / "Plan.md").write_text("# Plan\n\nfirst\n", encoding="utf-8")
    assert cli("import", str(root), "--known-at", "2025-01-01", db=db).returncode == 0
    (root / "Plan.md").write_text("# Plan\n\nsecond\n", encoding="utf-8")
    done = cli("restore", "Plan.md", *given, db=db)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert errors == ["Error: give exactly one of --as-of TIME and --revision R"], done.stderr
    assert "Traceback" not in done.stderr
    assert (root / "Plan.md").read_text(encoding="utf-8") == "# Plan\n\nsecond\n"

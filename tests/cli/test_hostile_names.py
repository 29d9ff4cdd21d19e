"""Note names that carry terminal escapes or newlines: printed as escapes, never raw.

A name can hold anything but ``/`` and NUL. ``ls``, ``search``, ``history`` and ``changes`` (human
output), error lines and the watcher's log must show a name's control characters as escapes: no escape
sequence reaches the terminal, and a newline in a name cannot make a line of its own (a forged line).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.watch_helpers import WatchProcess, no_thread_leaks  # noqa: F401  (autouse fixture)

from vaultsync.printable import printable

TITLE = "evil\x1b]0;owned\x07\x1b[31mred.md"
"""Retitles the terminal, then turns what follows red."""
FORGED = "two\n2026-01-01 00:00:00,000 WARNING vaultsync: forged.md"
"""A newline, then what looks like a log line of its own."""
BIDI = "gnp.\u202etxt.md"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")
"""What must never be printed (a newline is fine: it ends a line)."""


@pytest.fixture
def hostile(tmp_path: Path, cli) -> tuple[Path, Path]:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    for n, name in enumerate((TITLE, FORGED, BIDI)):
        (root / name).write_text(f"# Note {n}\n\nhello world {n}\n", encoding="utf-8")
    assert cli("import", str(root), db=db).returncode == 0
    return root, db


def test_printable_escapes_what_a_terminal_acts_on() -> None:
    assert printable(TITLE) == "evil\\x1b]0;owned\\x07\\x1b[31mred.md"
    assert printable(FORGED).count("\n") == 0 and "\\n2026" in printable(FORGED)
    assert printable(BIDI) == "gnp.\\u202etxt.md"
    assert printable("Projects/Ünïcode tab-free.md") == "Projects/Ünïcode tab-free.md"


@pytest.mark.parametrize("command", [["ls"], ["search", "hello"], ["changes", "--since", "2000-01-01"]])
def test_human_output_shows_names_escaped_one_line_each(hostile: tuple[Path, Path], cli, command: list[str]) -> None:
    _, db = hostile
    done = cli(*command, db=db)
    assert done.returncode == 0, done.stderr
    assert not RAW.search(done.stdout), done.stdout
    assert "\\x1b]0;owned\\x07" in done.stdout and "two\\n2026-01-01" in done.stdout and "\\u202e" in done.stdout
    assert not any(line.startswith("2026-01-01") for line in done.stdout.splitlines())


def test_history_and_errors_show_names_escaped(hostile: tuple[Path, Path], cli) -> None:
    _, db = hostile
    done = cli("history", FORGED, db=db)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and "two\\n2026-01-01" in done.stdout
    missing = cli("read", TITLE.replace("red", "blue"), db=db)
    assert missing.returncode == 1 and not RAW.search(missing.stderr), missing.stderr


def test_json_output_stays_json(hostile: tuple[Path, Path], cli) -> None:
    _, db = hostile
    done = cli("ls", "--json", db=db)
    assert sorted(n["path"] for n in json.loads(done.stdout)) == sorted((TITLE, FORGED, BIDI))


def test_the_watchers_log_shows_a_name_escaped_on_one_line(db_path: Path, vault_dir: Path, cli) -> None:
    assert cli("import", str(vault_dir), db=db_path).returncode == 0
    watcher = WatchProcess(db_path, vault_dir, "--step-ms", "50", "--json", "-v")
    try:
        watcher.wait_for("watching ")
        (vault_dir / FORGED).write_text("---\nbroken: [yaml\n---\n# x\n", encoding="utf-8")  # logged: a warning
        line = watcher.wait_for("with a warning")
        assert "two\\n2026-01-01 00:00:00,000 WARNING vaultsync: forged.md" in line
        watcher.proc.terminate()
        watcher.finish()
    finally:
        if watcher.proc.poll() is None:
            watcher.proc.kill()
    assert not any(line.startswith("2026-01-01") for line in watcher.lines), watcher.stderr
    assert not RAW.search(watcher.stderr)

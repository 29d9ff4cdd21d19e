"""The README's examples work as typed after ``make demo``: every ``vaultsync`` command in its code blocks that
asks about the history (not the ones for your own ``~/notes``, nor ``serve``, ``watch``, ``ui``, ``purge``) runs,
in the README's order, against the demo's history (``examples/demo.py`` builds it: three dated git commits of
``notes/``), and so does its Python example."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
from pathlib import Path

import pytest
from support.cli import invoke

REPO = Path(__file__).resolve().parents[1]
SKIPPED = {"serve", "watch", "ui", "purge", "import"}
"""Commands about your own vault or a file of yours: not the demo's history."""
ANSWERS = {"ls", "read", "history", "diff", "changes", "search", "restore", "undo"}
"""Commands whose answer must not be empty (``changes --source`` may be: the demo's assistants wrote nothing)."""


def blocks(text: str, kinds: tuple[str, ...]) -> list[str]:
    return re.findall(r"^```(?:" + "|".join(kinds) + r")\n(.*?)^```", text, flags=re.M | re.S)


def readme_commands(page: str = "README.md") -> list[list[str]]:
    found = []
    for block in blocks((REPO / page).read_text(encoding="utf-8"), ("sh", "console")):
        for line in block.splitlines():
            line = line.removeprefix("$ ").strip()
            if not line.startswith("vaultsync "):
                continue
            args = shlex.split(line, comments=True)[1:]
            if args[0] not in SKIPPED and "~/notes" not in line:
                found.append(args)
    return found


@pytest.fixture
def demo_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo's database: its git history of ``notes/``, imported as ``make demo`` does."""
    spec = importlib.util.spec_from_file_location("vaultsync_demo", REPO / "examples" / "demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    vault, db = tmp_path / "notes", tmp_path / "vaultsync.db"
    demo.build_history(vault)
    invoke("import", str(vault), "--from-git", db=db, check=True)
    monkeypatch.setenv("VAULTSYNC_DB", str(db))  # the `export` line the demo prints
    return db


def test_readme_commands_work_as_typed_after_the_demo(demo_db: Path) -> None:
    commands = readme_commands()
    assert {args[0] for args in commands} >= {"ls", "read", "history", "diff", "changes", "search", "undo"}
    assert any(a.startswith("r") and a[1:].isdigit() for args in commands for a in args)  # a revision id is shown
    for args in commands:
        done = invoke(*args)
        assert done.returncode == 0, f"vaultsync {shlex.join(args)}: {done.stderr}"
        if args[0] in ANSWERS and "--source" not in args:
            assert done.stdout.strip(), f"vaultsync {shlex.join(args)} printed nothing: {done.stderr}"
        assert "no matches" not in done.stderr, f"vaultsync {shlex.join(args)} found nothing"


@pytest.mark.parametrize("page", ["docs/getting-started.md", "docs/index.md"])
def test_the_docs_first_pages_commands_work_as_typed_after_the_demo(demo_db: Path, page: str) -> None:
    """Getting started and the docs home: what a new reader types against the demo's history answers something."""
    commands = readme_commands(page)
    assert {"read", "search"} <= {args[0] for args in commands}
    text = (REPO / page).read_text(encoding="utf-8")
    shown_empty = [shlex.split(c)[1:] for c in re.findall(r"^\$ (vaultsync .*)\nno matches$", text, flags=re.M)]
    for args in commands:
        done = invoke(*args)
        assert done.returncode == 0, f"{page}: vaultsync {shlex.join(args)}: {done.stderr}"
        if args in shown_empty:  # the page shows it finding nothing
            assert not done.stdout.strip() and "no matches" in done.stderr, done.stdout
        elif args[0] in ANSWERS:
            assert done.stdout.strip(), f"{page}: vaultsync {shlex.join(args)} printed nothing: {done.stderr}"


def test_readme_python_example_works_after_the_demo(demo_db: Path) -> None:
    (code,) = blocks((REPO / "README.md").read_text(encoding="utf-8"), ("python",))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own example, as a reader runs it
    assert "# Atlas Overview" in out.getvalue() and "beacons" in out.getvalue(), out.getvalue()[:500]

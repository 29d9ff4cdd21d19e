"""Rules the package's source keeps that ruff and mypy do not check by themselves.

- Every ``type: ignore`` names its error code (mypy's ``ignore-without-code``) and says why on its own line:
  ``# type: ignore[code]  # why``. mypy's ``warn_unused_ignores`` removes the ones no longer needed.
- Only ``vaultsync/dsn.py`` tells a PostgreSQL connection URI from a SQLite path: nothing else in the package, the
  scripts, the benchmarks or the tests tests a string for a ``postgres`` scheme by hand (``tests/store/
  test_dsn_doors.py`` checks that the doors agree with it).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from support.repo import REPO

import vaultsync

PACKAGE_DIR = Path(vaultsync.__file__).resolve().parent

IGNORE = re.compile(r"type:\s*ignore")
EXPLAINED = re.compile(r"^# type: ignore\[[a-z-]+(?:, ?[a-z-]+)*\]  # \S.{3,}$")
"""An ignore comment with its codes and a reason of a few words after it, on the same line."""


def comments(path: Path) -> Iterator[tuple[int, str]]:
    """Each comment of a Python file: its line number and its text (from ``#`` to the end of the line)."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def unexplained_ignores(package_dir: Path) -> list[str]:
    return [
        f"{path.relative_to(package_dir.parent)}:{line}: {text}"
        for path in sorted(package_dir.rglob("*.py"))
        for line, text in comments(path)
        if IGNORE.search(text) and not EXPLAINED.match(text)
    ]


def test_every_type_ignore_says_why() -> None:
    found = unexplained_ignores(PACKAGE_DIR)
    assert not found, "a `type: ignore` without `[code]  # why` on its line:\n" + "\n".join(found)


def test_an_ignore_without_its_reason_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text(
        "x: int = 'a'  # type: ignore[assignment]  # a planted reason\n"
        "y: int = 'b'  # type: ignore[assignment]\n"
        "z: int = 'c'  # type: ignore\n"
        "# (the ignore below) a reason on another line does not count\n"
        "w: int = 'd'  # type: ignore[assignment]\n"
        's = "# type: ignore[assignment] inside a string is no comment"\n',
        encoding="utf-8",
    )
    assert [f.split(": ", 1)[0] for f in unexplained_ignores(package)] == ["pkg/a.py:2", "pkg/a.py:3", "pkg/a.py:5"]


HAND_DSN = re.compile(
    r"""startswith\(\s*\(?\s*["']postgres(?:ql)?:?(?://)?["']|["']postgres(?:ql)?://["']\s+(?:not\s+)?in\b"""
)
"""A scheme tested by hand: ``x.startswith("postgresql")``, ``"postgresql://" in x`` (not a test's assertion on a
whole URI's start, ``dsn.startswith("postgresql://vaultsync@")``)."""
OWN_DSN_RULES = {
    "vaultsync/dsn.py",  # the one place
    "tests/fixtures/old_schemas/make_old_db.py",  # runs on old commits' code, some from before dsn.py
    "tests/test_source_rules.py",  # this rule's own planted example
}


def hand_dsn_checks(root: Path, folders: tuple[str, ...]) -> list[str]:
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            if name in OWN_DSN_RULES or "node_modules" in path.parts:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if HAND_DSN.search(line):
                    found.append(f"{name}:{number}: {line.strip()}")
    return found


def test_only_dsn_py_tells_postgresql_from_a_file() -> None:
    found = hand_dsn_checks(REPO, ("vaultsync", "scripts", "benchmarks", "tests", "examples"))
    assert not found, "a PostgreSQL URI told by hand (call vaultsync.dsn.is_dsn or dsn.database):\n" + "\n".join(found)


def test_a_hand_written_check_is_found(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(
        'if db.startswith("postgresql"):\n    pass\n'
        "if db.startswith(('postgres://', 'postgresql://')):\n    pass\n"
        'if "postgresql://" in db:\n    pass\n'
        "if is_dsn(db):  # a postgresql:// URI\n    pass\n",
        encoding="utf-8",
    )
    found = [f.split(": ", 1)[0] for f in hand_dsn_checks(tmp_path, ("pkg",))]
    assert found == ["pkg/a.py:1", "pkg/a.py:3", "pkg/a.py:5"]

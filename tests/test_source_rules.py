"""Rules the package's source keeps that ruff and mypy do not check by themselves.

- Every ``type: ignore`` names its error code (mypy's ``ignore-without-code``) and says why on its own line:
  ``# type: ignore[code]  # why``. mypy's ``warn_unused_ignores`` removes the ones no longer needed.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

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

"""docs/architecture.md: its package map is what the modules' docstrings say now, and every file it names exists.

- The map between the page's markers equals what ``scripts/docgen_architecture.py`` writes from the source: every
  package and module of vaultsync with its docstring's first sentence. A module added, removed or renamed, or a
  first sentence changed, fails here until ``make docs-gen`` rewrites the page.
- The hand-written parts (the layers, where each rule lives) name modules and tests: each one exists.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from support.repo import REPO

sys.path.insert(0, str(REPO / "scripts"))

import docgen_architecture  # noqa: E402

PAGE = REPO / docgen_architecture.PAGE
TOP = ("tests", "vaultsync", "scripts", "benchmarks")


def test_package_map_is_generated_from_the_docstrings() -> None:
    assert PAGE.read_text(encoding="utf-8") == docgen_architecture.render(), (
        f"{docgen_architecture.PAGE}'s package map differs from the modules' docstrings: run `make docs-gen`"
    )


def test_package_map_lists_every_module() -> None:
    written = PAGE.read_text(encoding="utf-8")
    block = written.split(docgen_architecture.BEGIN)[1].split(docgen_architecture.END)[0]
    listed = re.findall(r"^\s+(\w+\.py)\b", block, re.M)
    assert len(listed) == len(list((REPO / "vaultsync").rglob("*.py"))) - len(
        list((REPO / "vaultsync").rglob("__init__.py"))
    )
    assert "  dsn.py                  Connection strings: which --db names PostgreSQL" in block


def test_a_new_module_makes_the_page_stale(tmp_path: Path) -> None:
    package = tmp_path / "vaultsync"
    shutil.copytree(REPO / "vaultsync", package, ignore=shutil.ignore_patterns("__pycache__", "static"))
    (package / "store" / "planted.py").write_text('"""A planted module. More text here."""\n', encoding="utf-8")
    page = docgen_architecture.render(package_dir=package)
    assert "    planted.py            A planted module\n" in page
    assert page != PAGE.read_text(encoding="utf-8")


def test_every_file_the_page_names_exists() -> None:
    written = PAGE.read_text(encoding="utf-8").split(docgen_architecture.BEGIN)[0]
    named = set(re.findall(r"(?<![\w/.:-])((?:[a-z_]+/)*[a-z_]+\.py|(?:[a-z_]+/)+)(?![\w.])", written))
    assert len(named) > 50
    missing = sorted(
        name for name in named if not (REPO / name if name.split("/")[0] in TOP else REPO / "vaultsync" / name).exists()
    )
    assert not missing, f"{docgen_architecture.PAGE} names what does not exist: {missing}"

"""What ``import vaultsync`` offers a library user: ``__all__`` is exactly its public names, every exception class
of ``vaultsync/errors.py`` is among them, and the Python API page documents each one (httpx's
``tests/test_exported_members.py`` is the model).

A new error class in errors.py fails here until it is exported from ``vaultsync/__init__.py`` and listed in the
``::: vaultsync.errors`` block of docs/reference/python-api.md.
"""

from __future__ import annotations

import ast
import inspect
import re
import types

from support.repo import REPO

import vaultsync
from vaultsync import errors

API_PAGE = REPO / "docs" / "reference" / "python-api.md"


def error_classes() -> list[str]:
    """Every public class errors.py defines, in source order (read from its text: a class cannot hide)."""
    tree = ast.parse(inspect.getsource(errors))
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef) and not node.name.startswith("_")]


def test_all_is_the_public_names() -> None:
    assert vaultsync.__all__ == sorted(set(vaultsync.__all__), key=str.casefold), "__all__ sorted, no repeats"
    public = {
        name
        for name, value in vars(vaultsync).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)  # submodules, once imported
        and getattr(value, "__module__", "").startswith("vaultsync")  # not typing's helpers
    }
    assert public | {"Vault", "Note"} == set(vaultsync.__all__)  # Vault and Note load on first use
    for name in vaultsync.__all__:
        assert getattr(vaultsync, name).__name__ == name


def test_every_error_is_exported() -> None:
    defined = error_classes()
    assert len(defined) > 20 and "VaultsyncError" in defined
    missing = [name for name in defined if name not in vaultsync.__all__]
    assert not missing, f"errors.py defines {missing}: export them from vaultsync/__init__.py"
    for name in defined:
        assert getattr(vaultsync, name) is getattr(errors, name)
        assert issubclass(getattr(errors, name), Exception)


def test_every_error_is_documented() -> None:
    page = API_PAGE.read_text(encoding="utf-8")
    block = re.search(r"^::: vaultsync\.errors\n(?:    .*\n)*?      members:\n((?:        - \w+\n)+)", page, re.M)
    assert block is not None, f"{API_PAGE.name} has no member list under ::: vaultsync.errors"
    listed = re.findall(r"- (\w+)", block.group(1))
    assert listed == error_classes(), (
        f"{API_PAGE.name} lists the errors {listed}; errors.py defines {error_classes()} (list each, in its order)"
    )

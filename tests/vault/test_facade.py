"""``Vault`` is the only door (issue 18): outside the library facade (``vaultsync/vault/api.py`` and
``vaultsync/live/writer_role.py``) no code of the package touches a vault's store or writer lock.

An AST scan of every module: any attribute ``_store`` or ``_lock`` read or written on anything other than
``self`` of a class that is not ``Vault`` counts (``self._lock`` of another class, e.g. a server object's own
threading lock, is that object's own business), as does ``getattr(x, "_store")``. The old public name
``vault.store`` is gone, so it is not looked for; ``vault.lock`` is the ``VaultLock`` object (``vault/lock.py``),
which keeps the engine's lock to itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import vaultsync

PACKAGE_DIR = Path(vaultsync.__file__).resolve().parent
FACADE = {"vault/api.py", "live/writer_role.py"}
PRIVATE = {"_store", "_lock"}


def reach_ins(source: str, filename: str = "<module>") -> list[tuple[int, str]]:
    """(line, expression), in line order, of each touch of a ``_store`` / ``_lock`` attribute that is not an object's
    own."""
    tree = ast.parse(source, filename)
    own: set[int] = set()  # ids of `self.<private>` nodes inside a class's own methods
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for fn in (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            args = fn.args.posonlyargs + fn.args.args
            if not args:
                continue
            me = args[0].arg
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr in PRIVATE
                    and isinstance(node.value, ast.Name)
                    and node.value.id == me
                ):
                    own.add(id(node))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE and id(node) not in own:
            found.append((node.lineno, ast.unparse(node)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in PRIVATE
        ):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def outside_the_facade(package: Path = PACKAGE_DIR) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.as_posix() in FACADE:
            continue
        for line, expr in reach_ins(path.read_text(encoding="utf-8"), str(path)):
            found.append(f"{rel.as_posix()}:{line}: {expr}")
    return found


def test_nothing_outside_the_facade_touches_a_vaults_store_or_lock() -> None:
    found = outside_the_facade()
    assert not found, (
        "code outside vault/api.py / live/writer_role.py touches a vault's store or lock (add a Vault method):\n  "
        + "\n  ".join(found)
    )


def test_the_facade_itself_is_scanned_and_uses_them() -> None:
    """The scan is not blind: vault/api.py does touch its own store and vault/lock.py its own engine lock (as
    ``self``), and a function that takes a vault and reaches in is caught there too."""
    source = (PACKAGE_DIR / "vault" / "api.py").read_text(encoding="utf-8")
    lock = (PACKAGE_DIR / "vault" / "lock.py").read_text(encoding="utf-8")
    assert "self._store" in source and "self._lock" in lock
    assert not reach_ins(source) and not reach_ins(lock)  # all of their touches are their own
    assert reach_ins(source + "\n\ndef reach(vault):\n    return vault._store\n") == [
        (source.count("\n") + 4, "vault._store")
    ]


def test_the_scan_catches_reach_ins() -> None:
    planted = """
class Watcher:
    def __init__(self, vault):
        self._lock = object()          # its own lock: fine
        self.vault = vault

    def start(self):
        self.vault._lock.acquire()     # a vault's lock: caught

def backfill(vault):
    store = vault._store               # caught
    getattr(vault, "_lock")            # caught
    return store
"""
    assert [expr for _, expr in reach_ins(planted)] == ["self.vault._lock", "vault._store", "getattr(vault, '_lock')"]


@pytest.mark.slow
def test_a_planted_reach_in_fails_the_package_scan(tmp_path: Path) -> None:
    """A copy of the package with one reach-in added to a module outside the facade is caught, by file and line."""
    copy = tmp_path / "vaultsync"
    for path in PACKAGE_DIR.rglob("*.py"):
        target = copy / path.relative_to(PACKAGE_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert outside_the_facade(copy) == []
    gitimport = copy / "gitimport.py"
    lines = gitimport.read_text(encoding="utf-8").count("\n")
    with gitimport.open("a", encoding="utf-8") as out:
        out.write("\n\ndef sneak(vault):\n    return vault._store.live_state(vault.id)\n")
    assert outside_the_facade(copy) == [f"gitimport.py:{lines + 4}: vault._store"]

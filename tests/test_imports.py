"""The package imports cleanly: no import cycles, and ``vaultsync --help`` loads no heavy dependency.

Five independent checks (issue 8, item 4; the layering and the tests' imports, issue 35):

- every module of ``vaultsync`` imported first, on its own, in a fresh interpreter state (one child
  process that clears every ``vaultsync*`` entry of ``sys.modules`` before each import), so a cycle
  that breaks only for one entry point shows up;
- a static graph of module-level imports between vaultsync's modules (``ast``, not running anything):
  no strongly connected component may hold more than one module; and the same for the whole graph,
  imports inside functions and under ``if TYPE_CHECKING:`` included (issue 18: a lazy or type-only
  import still ties two modules together), printed by the test;
- the layering between the parts (``disk/`` never imports ``store/``, nothing but ``__main__`` imports
  ``cli/``…: ``FORBIDDEN``, ``ONLY_IMPORTED_BY``), on the same graph;
- the modules ``python -X importtime -m vaultsync --help`` imports, by name (never by time);
- and in the tests: no test file imports another test file or conftest.py (what they share is in tests/support/).
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import vaultsync

PACKAGE_DIR = Path(vaultsync.__file__).resolve().parent
ROOT = PACKAGE_DIR.parent

# Each module imported as the first vaultsync module of a clean state; prints one JSON line per failure.
_IMPORT_EACH = r"""
import importlib, json, pkgutil, sys, traceback

def clear():
    for name in [n for n in sys.modules if n == "vaultsync" or n.startswith("vaultsync.")]:
        del sys.modules[name]

import vaultsync
def walk_error(name):
    print(json.dumps([name, "walk: " + repr(sys.exc_info()[1])]))

names = ["vaultsync"] + [m.name for m in pkgutil.walk_packages(vaultsync.__path__, "vaultsync.", onerror=walk_error)]
for name in names:
    clear()
    try:
        importlib.import_module(name)
    except BaseException as exc:
        print(json.dumps([name, traceback.format_exception_only(exc)[-1].strip()]))
print(json.dumps(["#", len(names)]))
"""


@pytest.mark.slow
def test_every_module_imports_first_in_a_fresh_state() -> None:
    done = subprocess.run([sys.executable, "-c", _IMPORT_EACH], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]
    failures = {name: error for name, error in rows if name != "#"}
    assert not failures, (
        "modules that fail to import on their own (a cycle names 'partially initialized'):\n"
        + "\n".join(f"  {name}: {error}" for name, error in sorted(failures.items()))
    )
    (count,) = [n for name, n in rows if name == "#"]
    assert count == len(list(_module_files())), "walk_packages missed a module (or found one the files do not)"


# ---------------------------------------------------------------- static import graph


def _module_files(package_dir: Path = PACKAGE_DIR) -> Iterator[tuple[str, Path]]:
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module, deferred: bool, typing: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements that run when the module is imported (not in functions, unless ``deferred``);
    those under ``if TYPE_CHECKING:``, which never run, only with ``typing``."""
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not deferred:
            continue
        elif isinstance(node, ast.If) and _is_type_checking(node.test) and not typing:
            todo.extend(node.orelse)
        else:  # class bodies, try/with/if/for blocks run at import time
            todo.extend(ast.iter_child_nodes(node))


_PARSED: dict[tuple[Path, int, int], ast.Module] = {}


def parsed(path: Path) -> ast.Module:
    """The syntax tree of ``path``, parsed once per content (size, mtime) for every test of this module."""
    st = path.stat()
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in _PARSED:
        _PARSED[key] = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return _PARSED[key]


def import_graph(deferred: bool = False, typing: bool = False, package_dir: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    """vaultsync module -> the vaultsync modules its module-level code imports.

    With ``deferred``, imports inside functions count too; with ``typing``, those under ``if TYPE_CHECKING:``.
    Importing ``a.b.c`` runs the ``__init__`` of
    ``a.b`` first, so a target's enclosing packages are targets too (except the importer's own, which
    are already being imported when it runs).
    """
    files = dict(_module_files(package_dir))
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        for node in _imports(parsed(path), deferred, typing):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base_parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # "from X import n" imports module X.n if there is one, else takes n from X
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for target in targets:
                parts = target.split(".")
                enclosing = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
                graph[name].update(t for t in enclosing - own if t in files and t != name)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative): the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete cycle through the component's first module (breadth-first, shortest)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    todo = [start]
    while todo:
        node = todo.pop(0)
        for child in sorted(graph[node] & members):
            if child == start:
                return paths[node] + [start]
            if child not in paths:
                paths[child] = paths[node] + [child]
                todo.append(child)
    return component


def test_the_static_graph_sees_a_cycle() -> None:
    """The checker itself: a made-up graph with a cycle and a tail."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert a_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_module_level_import_cycles() -> None:
    graph = import_graph()
    assert "vaultsync.cli.search" in graph and graph["vaultsync.cli"], "the graph found no imports"
    cycles = [" -> ".join(a_cycle(graph, c)) + f"   (component: {', '.join(c)})" for c in strongly_connected(graph)]
    assert not cycles, "module-level import cycles:\n  " + "\n  ".join(cycles)


def test_no_import_cycles_hidden_in_functions() -> None:
    """An import moved into a function only postpones a cycle; imports kept lazy for speed must not close one."""
    graph = import_graph(deferred=True)
    cycles = [" -> ".join(a_cycle(graph, c)) + f"   (component: {', '.join(c)})" for c in strongly_connected(graph)]
    assert not cycles, "import cycles (counting imports inside functions):\n  " + "\n  ".join(cycles)


def test_no_import_cycles_at_all(capsys: pytest.CaptureFixture[str]) -> None:
    """Every import counts: module level, inside functions and under ``if TYPE_CHECKING:`` (a type-only
    import still means the two modules know each other). Prints the graph (``pytest -s`` shows it)."""
    graph = import_graph(deferred=True, typing=True)
    with capsys.disabled():
        print("\nvaultsync import graph (lazy and TYPE_CHECKING imports included), module -> what it imports:")
        for name in sorted(graph):
            print(f"  {name} -> {', '.join(sorted(graph[name])) or '-'}")
    assert sum(map(len, graph.values())) > len(graph), "the graph found too few imports"
    lazy_only = {(a, b) for a in graph for b in graph[a]} - {(a, b) for a, bs in import_graph().items() for b in bs}
    assert lazy_only, "no lazy or TYPE_CHECKING import was found: the scan does not see them"
    cycles = [" -> ".join(a_cycle(graph, c)) + f"   (component: {', '.join(c)})" for c in strongly_connected(graph)]
    assert not cycles, "import cycles (lazy and TYPE_CHECKING imports included):\n  " + "\n  ".join(cycles)


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between vaultsync's parts: a subpackage (``vaultsync.store``, ``vaultsync.server``…) is one
    node with everything below it, a top-level module is its own."""

    def part(name: str) -> str:
        return ".".join(name.split(".")[:2])

    out: dict[str, set[str]] = {}
    for name, targets in graph.items():
        out.setdefault(part(name), set()).update(part(t) for t in targets if part(t) != part(name))
    return out


KNOWN_PACKAGE_CYCLES: list[list[str]] = []
"""Cycles between parts still to remove, listed so the test names them (empty: ``server <-> hardened`` is gone,
``server/launch.py`` starts both)."""


def test_no_import_cycles_between_packages(capsys: pytest.CaptureFixture[str]) -> None:
    """Subpackages do not import each other back, lazily or for typing either (a module-level graph
    without a cycle can still tie ``server`` and ``hardened`` together through different modules)."""
    graph = package_graph(import_graph(deferred=True, typing=True))
    assert "vaultsync.store" in graph and "vaultsync.server" in graph["vaultsync.cli"], "parts not understood"
    found = strongly_connected(graph)
    with capsys.disabled():
        print("\nvaultsync parts and what they import (every import counted):")
        for name in sorted(graph):
            print(f"  {name} -> {', '.join(sorted(graph[name])) or '-'}")
        for component in found:
            print("  cycle: " + " -> ".join(a_cycle(graph, component)))
    new = [" -> ".join(a_cycle(graph, c)) for c in found if c not in KNOWN_PACKAGE_CYCLES]
    assert not new, "import cycles between vaultsync's parts:\n  " + "\n  ".join(new)
    gone = [c for c in KNOWN_PACKAGE_CYCLES if c not in found]
    assert not gone, f"these cycles are gone: remove them from KNOWN_PACKAGE_CYCLES: {gone}"


def test_the_package_graph_sees_a_cycle_through_different_modules() -> None:
    """The checker itself: ``a.x -> b.y`` and ``b.z -> a.w`` have no module cycle but tie parts a and b."""
    graph = {
        "vaultsync.a.x": {"vaultsync.b.y"},
        "vaultsync.b.y": set(),
        "vaultsync.b.z": {"vaultsync.a.w"},
        "vaultsync.a.w": set(),
        "vaultsync.c": {"vaultsync.a.x"},
    }
    assert strongly_connected(graph) == []
    assert strongly_connected(package_graph(graph)) == [["vaultsync.a", "vaultsync.b"]]


def test_the_scan_sees_a_type_checking_import(tmp_path: Path) -> None:
    """The scanner itself: an import under ``if TYPE_CHECKING:`` and one in a function are found only when asked."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\ndef f():\n    from .b import y\n"
    )
    found = lambda **kw: sorted(n.module for n in _imports(tree, **kw) if isinstance(n, ast.ImportFrom))  # noqa: E731
    assert found(deferred=False) == ["typing"]
    assert found(deferred=True) == ["b", "typing"]
    assert found(deferred=True, typing=True) == ["a", "b", "typing"]


# ---------------------------------------------------------------- layering: which part may import which

LOW_LEVEL = {
    "vaultsync.server",
    "vaultsync.cli",
    "vaultsync.live",
    "vaultsync.ui",
    "vaultsync.hardened",
    "vaultsync.vault",
    "vaultsync.sync",
    "vaultsync.gitimport",
}
FORBIDDEN: dict[str, set[str]] = {
    # the folder on disk knows nothing of the history kept of it
    "vaultsync.disk": LOW_LEVEL | {"vaultsync.store", "vaultsync.embed"},
    # parsing is a pure function of a note's text
    "vaultsync.parsers": LOW_LEVEL | {"vaultsync.store", "vaultsync.disk", "vaultsync.embed"},
    # embedders and the tokenizer turn text into vectors and tokens; the store calls them, never the reverse
    "vaultsync.embed": LOW_LEVEL | {"vaultsync.store", "vaultsync.disk"},
    # the store is a contract two engines implement; the doors and the live side are built on it
    "vaultsync.store": LOW_LEVEL,
}
"""part -> the parts it must never import (lazily or for typing either)."""
ONLY_IMPORTED_BY: dict[str, set[str]] = {"vaultsync.cli": {"vaultsync.__main__"}}
"""part -> the only other parts that may import it (the command line is a leaf: nothing builds on it)."""


def layering_violations(parts: dict[str, set[str]]) -> list[str]:
    """Each import between parts (a ``package_graph``) that goes the wrong way, as ``"a -> b (rule)"``."""
    found = []
    for part, targets in sorted(parts.items()):
        for target in sorted(targets & FORBIDDEN.get(part, set())):
            found.append(f"{part} -> {target} ({part} never imports {target})")
        for target in sorted(targets):
            allowed = ONLY_IMPORTED_BY.get(target)
            if allowed is not None and part not in allowed:
                found.append(f"{part} -> {target} (only {', '.join(sorted(allowed))} may import {target})")
    return found


def test_the_layers_hold() -> None:
    """The tree is the architecture: no part imports one it sits under (every import counted)."""
    parts = package_graph(import_graph(deferred=True, typing=True))
    assert set(FORBIDDEN) | set(ONLY_IMPORTED_BY) <= set(parts), "a layered part is missing from the graph"
    found = layering_violations(parts)
    assert not found, "imports against the layering:\n  " + "\n  ".join(found)


def test_the_layering_check_sees_a_wrong_way_import() -> None:
    """The checker itself, on a made-up graph: each kind of wrong-way import is named, the right ways are not."""
    parts = {
        "vaultsync.disk": {"vaultsync.errors", "vaultsync.store"},
        "vaultsync.parsers": {"vaultsync.disk"},
        "vaultsync.embed": {"vaultsync.store"},
        "vaultsync.store": {"vaultsync.disk", "vaultsync.server"},
        "vaultsync.server": {"vaultsync.store", "vaultsync.cli"},
        "vaultsync.__main__": {"vaultsync.cli"},
        "vaultsync.cli": {"vaultsync.store"},
    }
    assert layering_violations(parts) == [
        "vaultsync.disk -> vaultsync.store (vaultsync.disk never imports vaultsync.store)",
        "vaultsync.embed -> vaultsync.store (vaultsync.embed never imports vaultsync.store)",
        "vaultsync.parsers -> vaultsync.disk (vaultsync.parsers never imports vaultsync.disk)",
        "vaultsync.server -> vaultsync.cli (only vaultsync.__main__ may import vaultsync.cli)",
        "vaultsync.store -> vaultsync.server (vaultsync.store never imports vaultsync.server)",
    ]


@pytest.mark.slow
def test_a_planted_wrong_way_import_fails_the_layering(tmp_path: Path) -> None:
    """A copy of the package with one module planted in ``disk/`` that imports the store lazily (inside a
    function): the scan of the real files finds it and names it."""
    copy = tmp_path / "vaultsync"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "static", "models"))
    assert not layering_violations(package_graph(import_graph(deferred=True, typing=True, package_dir=copy)))
    (copy / "disk" / "planted.py").write_text(
        "def f():\n    from ..store.read import LISTED_FIELDS\n\n    return LISTED_FIELDS\n", encoding="utf-8"
    )
    (copy / "embed" / "planted.py").write_text("from vaultsync.cli import base\n", encoding="utf-8")
    parts = package_graph(import_graph(deferred=True, typing=True, package_dir=copy))
    assert layering_violations(parts) == [
        "vaultsync.disk -> vaultsync.store (vaultsync.disk never imports vaultsync.store)",
        "vaultsync.embed -> vaultsync.cli (vaultsync.embed never imports vaultsync.cli)",
        "vaultsync.embed -> vaultsync.cli (only vaultsync.__main__ may import vaultsync.cli)",
    ]


# ---------------------------------------------------------------- what --help loads

HEAVY = (
    "apsw",
    "sqlite_vec",
    "markdown_it",
    "mdit_py_plugins",
    "watchdog",
    "mcp",
    "yaml",
    "numpy",
    "vaultsync.vault.api",
    "vaultsync.store",
    "vaultsync.parsers",
    "vaultsync.server",
)


def test_help_imports_no_heavy_module() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "vaultsync", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: "), done.stdout
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert "vaultsync.cli" in imported, "importtime output not understood"
    heavy = sorted(h for h in HEAVY if any(name == h or name.startswith(h + ".") for name in imported))
    assert not heavy, f"`vaultsync --help` imports {heavy}"


# ---------------------------------------------------------------- the tests: shared helpers come from tests/support/

TESTS_DIR = Path(__file__).resolve().parent
_DYNAMIC = {"import_module", "importorskip", "__import__"}


def _test_files(tests_dir: Path) -> Iterator[Path]:
    for path in sorted(tests_dir.rglob("*.py")):
        if "node_modules" not in path.parts:
            yield path


def imports_of_test_files(tests_dir: Path = TESTS_DIR) -> list[str]:
    """Each import, in any Python file under ``tests_dir``, of ``conftest`` or of a test module (a ``test_*.py`` file
    there), as ``"file:line imports name"``: what tests share lives in tests/support/, never in a test file (whose
    fixtures would run twice, under two module names) nor in conftest.py (which pytest loads, not the test)."""
    test_modules = {path.stem for path in _test_files(tests_dir) if path.name.startswith("test_")}
    found = []
    for path in _test_files(tests_dir):
        for node in ast.walk(parsed(path)):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.ImportFrom) and node.level:  # from . import x / from .test_x import y
                names = [node.module or alias.name for alias in node.names]
            elif (
                isinstance(node, ast.Call)
                and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) in _DYNAMIC
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names = [node.args[0].value]
            for name in names:
                parts = name.split(".")
                if parts[0] == "tests":
                    parts = parts[1:]
                if parts and (parts[0] == "conftest" or parts[-1] in test_modules or parts[0] in test_modules):
                    found.append(f"{path.relative_to(tests_dir).as_posix()}:{node.lineno} imports {name}")
    return found


@pytest.mark.slow
def test_no_test_file_imports_another_or_conftest() -> None:
    found = imports_of_test_files()
    assert not found, "move what these share into tests/support/ and import it from there:\n  " + "\n  ".join(found)


@pytest.mark.slow
def test_a_planted_import_of_a_test_file_or_conftest_is_named(tmp_path: Path) -> None:
    """The checker itself, on a copy of the tests' Python files: each kind of planted reach-in is named, and nothing
    else (a test module at the top, conftest inside a function, a test module by ``importorskip``, a test module by
    its dotted path)."""
    copy = tmp_path / "tests"
    for path in _test_files(TESTS_DIR):
        target = copy / path.relative_to(TESTS_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    (copy / "vault" / "test_planted.py").write_text(
        "from test_plan import kinds\n\n\ndef test_x():\n    from conftest import SLOW_TESTS\n\n"
        "    import pytest\n\n    pytest.importorskip('test_ui')\n",
        encoding="utf-8",
    )
    with (copy / "support" / "cli.py").open("a", encoding="utf-8") as out:
        out.write("\nimport tests.live.test_watch  # noqa\n")
    assert sorted(imports_of_test_files(copy)) == [
        "support/cli.py:"
        + str((copy / "support" / "cli.py").read_text(encoding="utf-8").count("\n"))
        + " imports tests.live.test_watch",
        "vault/test_planted.py:1 imports test_plan",
        "vault/test_planted.py:5 imports conftest",
        "vault/test_planted.py:9 imports test_ui",
    ]

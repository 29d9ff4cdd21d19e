"""The package imports cleanly: no import cycles, and ``vaultsync --help`` loads no heavy dependency.

Three independent checks (issue 8, item 4):

- every module of ``vaultsync`` imported first, on its own, in a fresh interpreter state (one child
  process that clears every ``vaultsync*`` entry of ``sys.modules`` before each import), so a cycle
  that breaks only for one entry point shows up;
- a static graph of module-level imports between vaultsync's modules (``ast``, not running anything;
  imports inside functions and under ``if TYPE_CHECKING:`` do not count): no strongly connected
  component may hold more than one module;
- the modules ``python -X importtime -m vaultsync --help`` imports, by name (never by time).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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
names = ["vaultsync"] + [m.name for m in pkgutil.walk_packages(
    vaultsync.__path__, "vaultsync.", onerror=lambda name: print(json.dumps([name, "walk: " + repr(sys.exc_info()[1])])))]
for name in names:
    clear()
    try:
        importlib.import_module(name)
    except BaseException as exc:
        print(json.dumps([name, traceback.format_exception_only(exc)[-1].strip()]))
print(json.dumps(["#", len(names)]))
"""


def test_every_module_imports_first_in_a_fresh_state() -> None:
    done = subprocess.run([sys.executable, "-c", _IMPORT_EACH], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]
    failures = {name: error for name, error in rows if name != "#"}
    assert not failures, "modules that fail to import on their own (a cycle names 'partially initialized'):\n" + \
        "\n".join(f"  {name}: {error}" for name, error in sorted(failures.items()))
    (count,) = [n for name, n in rows if name == "#"]
    assert count == len(list(_module_files())), "walk_packages missed a module (or found one the files do not)"


# ---------------------------------------------------------------- static import graph


def _module_files() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module, deferred: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements that run when the module is imported (not in functions, unless ``deferred``);
    never those under ``if TYPE_CHECKING:``, which do not run at all."""
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not deferred:
            continue
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
        else:  # class bodies, try/with/if/for blocks run at import time
            todo.extend(ast.iter_child_nodes(node))


def import_graph(deferred: bool = False) -> dict[str, set[str]]:
    """vaultsync module -> the vaultsync modules its module-level code imports.

    With ``deferred``, imports inside functions count too. Importing ``a.b.c`` runs the ``__init__`` of
    ``a.b`` first, so a target's enclosing packages are targets too (except the importer's own, which
    are already being imported when it runs).
    """
    files = dict(_module_files())
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path)), deferred):
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
    assert "vaultsync.cli_search" in graph and graph["vaultsync.cli"], "the graph found no imports"
    cycles = [" -> ".join(a_cycle(graph, c)) + f"   (component: {', '.join(c)})" for c in strongly_connected(graph)]
    assert not cycles, "module-level import cycles:\n  " + "\n  ".join(cycles)


def test_no_import_cycles_hidden_in_functions() -> None:
    """An import moved into a function only postpones a cycle; imports kept lazy for speed must not close one."""
    graph = import_graph(deferred=True)
    cycles = [" -> ".join(a_cycle(graph, c)) + f"   (component: {', '.join(c)})" for c in strongly_connected(graph)]
    assert not cycles, "import cycles (counting imports inside functions):\n  " + "\n  ".join(cycles)


# ---------------------------------------------------------------- what --help loads

HEAVY = ("apsw", "sqlite_vec", "markdown_it", "mdit_py_plugins", "watchdog", "mcp", "yaml", "numpy",
         "vaultsync.vault", "vaultsync.store", "vaultsync.parsers", "vaultsync.server")


def test_help_imports_no_heavy_module() -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "vaultsync", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: "), done.stdout
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:") and line.count("|") == 2}
    assert "vaultsync.cli" in imported, "importtime output not understood"
    heavy = sorted(h for h in HEAVY if any(name == h or name.startswith(h + ".") for name in imported))
    assert not heavy, f"`vaultsync --help` imports {heavy}"

"""Code-shape figures for a closing note: the longest functions in vaultsync/ and those with > 8 parameters.

Run from the repository root: ``python benchmarks/code_figures.py [--top 10] [--params 8]``.
Length is the lines a function spans (decorators excluded, nested functions counted in their parent
too); parameters count every name a caller can pass (``self`` / ``cls`` excluded).
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "vaultsync"


def functions(package: Path = PACKAGE) -> list[tuple[str, int, int]]:
    """(qualified place, lines, parameters) of every function and method in the package."""
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), rel)
        todo: list[tuple[ast.AST, str]] = [(tree, "")]
        while todo:
            node, prefix = todo.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = child.args
                    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
                    names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
                    params = len([n for n in names if n not in ("self", "cls")])
                    qual = f"{prefix}{child.name}"
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    out.append((f"{rel}:{child.lineno} {qual}", lines, params))
                    todo.append((child, qual + "."))
                elif isinstance(child, ast.ClassDef):
                    todo.append((child, f"{prefix}{child.name}."))
                else:
                    todo.append((child, prefix))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10, help="how many of the longest functions (default 10)")
    parser.add_argument("--params", type=int, default=8, help="list functions with more parameters than this")
    args = parser.parse_args()
    found = functions()
    print(f"{args.top} longest functions in vaultsync/ (lines):")
    for place, lines, _ in sorted(found, key=lambda f: (-f[1], f[0]))[: args.top]:
        print(f"  {lines:4d}  {place}")
    many = sorted((f for f in found if f[2] > args.params), key=lambda f: (-f[2], f[0]))
    print(f"functions with > {args.params} parameters: {len(many)}")
    for place, _, params in many:
        print(f"  {params:4d}  {place}")


if __name__ == "__main__":
    main()

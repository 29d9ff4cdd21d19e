"""Check that the distribution name can be published: PyPI refuses a new project whose name is "too similar" to an
existing one's, and npm refuses one that equals another with its punctuation removed.

    python scripts/check_name.py                       # the name in pyproject.toml, against the env package lists
    python scripts/check_name.py NAME [NAME ...]       # other candidates
    python scripts/check_name.py --lists DIR --obsidian community-plugins.json

PyPI's rule (pypi/warehouse, ``ultranormalize_name``, migration d18d443f89f0): remove ``.``, ``_`` and ``-``, fold
``l``/``L``/``i``/``I`` to ``1`` and ``o``/``O`` to ``0``, lowercase; two names with the same result are one name.
It is stricter than PEP 503's normalisation and than npm's punctuation rule, so one comparison covers all three.
The lists: ``pypi.tsv`` and ``npm.tsv`` (first column: the name; npm scopes are dropped, ``@a/b`` is compared as
``b``); ``--obsidian``: the ``community-plugins.json`` of obsidianmd/obsidian-releases (ids and display names).
Exit 1 when a name collides with anything.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LISTS = Path("/work/.library/env/packages")
FOLD = str.maketrans({".": None, "_": None, "-": None, "l": "1", "L": "1", "i": "1", "I": "1", "o": "0", "O": "0"})


def ultranormalize(name: str) -> str:
    """PyPI's comparison key for "too similar" (warehouse's SQL function ``ultranormalize_name``)."""
    return name.translate(FOLD).lower()


def names_in(path: Path) -> list[str]:
    with path.open(encoding="utf-8", errors="replace") as lines:
        next(lines, None)  # the header
        return [line.split("\t", 1)[0].rsplit("/", 1)[-1] for line in lines if line.strip()]


def obsidian_names(path: Path) -> list[str]:
    plugins = json.loads(path.read_text(encoding="utf-8"))
    return [name.replace(" ", "") for p in plugins for name in (p["id"], p["name"])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="candidates (default: the project name in pyproject.toml)")
    parser.add_argument("--lists", type=Path, default=LISTS, help="folder with pypi.tsv and npm.tsv")
    parser.add_argument("--obsidian", type=Path, help="obsidian-releases' community-plugins.json")
    args = parser.parse_args()
    names = args.names or [tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]]
    sources = {f: args.lists / f for f in ("pypi.tsv", "npm.tsv")}
    existing = {label: names_in(path) for label, path in sources.items() if path.exists()}
    if args.obsidian:
        existing["obsidian plugins"] = obsidian_names(args.obsidian)
    if not existing:
        print(f"no package lists in {args.lists}", file=sys.stderr)
        return 2
    keys = {ultranormalize(n): n for n in names}
    clashes: dict[str, list[str]] = {n: [] for n in names}
    for label, listed in existing.items():
        for other in listed:
            mine = keys.get(ultranormalize(other))
            if mine is not None:
                clashes[mine].append(f"{label}: {other}")
    counts = ", ".join(f"{label} {len(listed)} names" for label, listed in existing.items())
    print(f"compared with {counts} (PyPI's ultranormalize_name)")
    for name in names:
        verdict = "too similar to " + "; ".join(clashes[name]) if clashes[name] else "free"
        print(f"{name:24} -> {ultranormalize(name):24} {verdict}")
    return 1 if any(clashes.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

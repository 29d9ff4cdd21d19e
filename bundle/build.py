"""Stage and pack the MCP Bundle (``make bundle``): manifest, entry point and a pyproject whose one dependency is the
published package at the bundle's version (``vaultsync-mcp[semantic]==X.Y.Z``: the host's uv installs it from PyPI),
validated and packed by the official CLI (``@anthropic-ai/mcpb`` from tests/js).

Usage: python bundle/build.py [OUTPUT.mcpb]   (default dist/vaultsync.mcpb)
The version: ``VAULTSYNC_VERSION`` (the release workflow passes the tag), else the checkout's last tag, else the
installed package's release. A bundle names a version published on PyPI: build it from a released tag.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MCPB = REPO / "tests" / "js" / "node_modules" / ".bin" / "mcpb"


DIST = "vaultsync-mcp"


def bundle_version() -> str:
    """The release's version: ``VAULTSYNC_VERSION`` (the release workflow sets it from the tag), else the last tag
    of this checkout, else the installed package's without a development or local part (a bundle's version is
    semantic: 0.2.1.dev3+gabc -> 0.2.1)."""
    given = os.environ.get("VAULTSYNC_VERSION")
    if given:
        return given.removeprefix("v")
    tag = subprocess.run(
        ["git", "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*"], cwd=REPO, capture_output=True, text=True
    )
    if tag.returncode == 0 and re.fullmatch(r"v\d+\.\d+\.\d+\S*", tag.stdout.strip()):
        return tag.stdout.strip().removeprefix("v")
    from importlib.metadata import PackageNotFoundError, version

    try:
        full = version(DIST)
    except PackageNotFoundError:
        full = "0.1.0"
    release = re.match(r"\d+\.\d+\.\d+", full)
    return release.group(0) if release else "0.1.0"


def pyproject(project: dict, version: str) -> str:
    """The bundle's pyproject: the published package with its semantic model (the ``semantic`` extra: a new
    database's vectors are the model's, filled by the server's watcher after it records the vault), at the bundle's
    version; nothing to build (uv installs it and its dependencies per platform)."""
    deps = f'    "{DIST}[semantic]=={version}",\n'
    return (
        f'[project]\nname = "vaultsync-bundle"\nversion = "{version}"\n'
        f'requires-python = "{project.get("requires-python", ">=3.11")}"\ndependencies = [\n{deps}]\n\n'
        "[tool.uv]\npackage = false\n"
    )


def stage(into: Path) -> Path:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    version = bundle_version()
    manifest = json.loads((REPO / "bundle" / "manifest.json").read_text(encoding="utf-8"))
    manifest["version"] = version  # the release's, not the placeholder in bundle/manifest.json
    (into / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    shutil.copy(REPO / "bundle" / "main.py", into / "main.py")
    (into / "pyproject.toml").write_text(pyproject(project, version), encoding="utf-8")
    for name in ("LICENSE", "README.md"):
        if (REPO / name).exists():
            shutil.copy(REPO / name, into / name)
    return into


def mcpb(*args: str) -> None:
    if not MCPB.exists():
        raise SystemExit(f"{MCPB} is missing: run `cd tests/js && npm ci` (make does)")
    subprocess.run([str(MCPB), *args], check=True)


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "dist" / "vaultsync.mcpb"
    staged = stage(REPO / "build" / "bundle")
    mcpb("validate", str(staged / "manifest.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    mcpb("pack", str(staged), str(out))


if __name__ == "__main__":
    main()

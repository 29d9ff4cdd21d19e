"""Stage and pack the MCP Bundle (``make bundle``): manifest, entry point, a dependencies-only pyproject and the
vaultsync package, validated and packed by the official CLI (``@anthropic-ai/mcpb`` from tests/js).

Usage: python bundle/build.py [OUTPUT.mcpb]   (default dist/vaultsync.mcpb)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MCPB = REPO / "tests" / "js" / "node_modules" / ".bin" / "mcpb"


def pyproject(project: dict) -> str:
    """The bundle's pyproject: vaultsync's runtime dependencies and its semantic model (the ``semantic`` extra: a
    new database's vectors are the model's, filled by the server's watcher after it records the vault), nothing to
    build (uv installs them per platform)."""
    wanted = [*project["dependencies"], *project["optional-dependencies"]["semantic"]]
    deps = "".join(f'    "{dep}",\n' for dep in wanted)
    return (
        f'[project]\nname = "vaultsync-bundle"\nversion = "{project["version"]}"\n'
        f'requires-python = "{project.get("requires-python", ">=3.11")}"\ndependencies = [\n{deps}]\n\n'
        "[tool.uv]\npackage = false\n"
    )


def stage(into: Path) -> Path:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    manifest = json.loads((REPO / "bundle" / "manifest.json").read_text(encoding="utf-8"))
    if manifest["version"] != project["version"]:
        raise SystemExit(f"bundle/manifest.json says {manifest['version']}, pyproject.toml {project['version']}")
    shutil.copy(REPO / "bundle" / "manifest.json", into / "manifest.json")
    shutil.copy(REPO / "bundle" / "main.py", into / "main.py")
    (into / "pyproject.toml").write_text(pyproject(project), encoding="utf-8")
    shutil.copytree(REPO / "vaultsync", into / "vaultsync", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
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

"""server.json, the MCP Registry's entry, against the registry's published schema (vendored in registry/, with its
source), and against what it names: the PyPI package this repository builds, the command ``uvx`` will run, and the
``mcp-name:`` marker the registry looks for in the package's README to prove that the package is ours."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((Path(__file__).parent / "registry" / "server.schema.json").read_text(encoding="utf-8"))
SERVER = json.loads((REPO / "server.json").read_text(encoding="utf-8"))
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def errors(document: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def test_server_json_is_valid_against_the_published_schema() -> None:
    assert SERVER["$schema"] == SCHEMA["$id"]
    assert errors(SERVER) == []


@pytest.mark.parametrize(
    "break_it",
    [
        lambda d: d.update(description="x" * 101),  # the registry's limit: 100 characters
        lambda d: d.update(name="vaultsync"),  # reverse-DNS namespace/name
        lambda d: d["packages"][0].pop("transport"),
        lambda d: d["packages"][0].update(version="latest"),
    ],
)
def test_the_schema_refuses_what_the_registry_refuses(break_it) -> None:
    broken = copy.deepcopy(SERVER)
    break_it(broken)
    assert errors(broken)


def test_the_entry_names_this_package_the_command_uvx_runs_and_the_readme_marker() -> None:
    (package,) = SERVER["packages"]
    assert package["registryType"] == "pypi" and package["identifier"] == PROJECT["name"]
    assert package["runtimeHint"] == "uvx" and package["transport"] == {"type": "stdio"}
    assert package["version"] == SERVER["version"]
    # `uvx vaultsync-mcp …` runs the command named like the package
    assert PROJECT["scripts"][PROJECT["name"]] == PROJECT["scripts"]["vaultsync"]
    assert [a.get("value") for a in package["packageArguments"]][0] == "serve"
    readme = (REPO / PROJECT["readme"]).read_text(encoding="utf-8")
    assert re.findall(r"mcp-name: (\S+)", readme) == [SERVER["name"]]

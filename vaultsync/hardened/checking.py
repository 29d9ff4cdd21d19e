"""Strict checks of a manifest table: every key known, every value of its type, the key named in the error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConfigError

KINDS = {
    "str": "a string",
    "path": "a path (string)",
    "bool": "true or false",
    "names": "a list of strings",
    "table": "a table",
    "tables": "an array of tables",
    "number": "a number",
}


def fail(path: Path, key: str, problem: str) -> ConfigError:
    """The error for ``key`` of the manifest at ``path``."""
    return ConfigError(f"manifest {path}: {key}: {problem}")


def check_table(path: Path, data: dict[str, Any], schema: dict[str, str], prefix: str) -> None:
    """Refuse a key ``schema`` does not know, or a value not of its kind (``KINDS``); ``prefix`` names the table."""
    for key, value in data.items():
        name = f"{prefix}{key}"
        kind = schema.get(key)
        if kind is None:
            raise fail(path, name, f"unknown key (known here: {', '.join(sorted(schema))})")
        ok = {
            "str": isinstance(value, str),
            "path": isinstance(value, str),
            "bool": isinstance(value, bool),
            "names": isinstance(value, list) and all(isinstance(v, str) and v for v in value),
            "table": isinstance(value, dict),
            "tables": isinstance(value, list) and all(isinstance(v, dict) for v in value),
            "number": isinstance(value, int | float) and not isinstance(value, bool),
        }[kind]
        if not ok:
            raise fail(path, name, f"must be {KINDS[kind]}, not {type(value).__name__} {value!r}"[:300])
        if kind in ("str", "path") and not value:
            raise fail(path, name, "must not be empty")

"""YAML frontmatter → JSON-compatible data, with a warning instead of an exception on bad input."""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from typing import Any

import yaml

from ..errors import FrontmatterRefused


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # the base (C or Python loader) is chosen at import
    """The fastest safe loader available, keeping impossible dates (``2024-02-30``) as text."""


def _timestamp(loader: Any, node: Any) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except (ValueError, OverflowError):
        return loader.construct_scalar(node)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)
MAX_NODES = 100_000
"""Frontmatter whose data has more values than this (e.g. an alias bomb) is refused."""
MAX_DEPTH = 100
"""Nesting deeper than this is refused."""


def load_frontmatter(yaml_text: str, first_line: int = 2) -> tuple[dict[str, Any] | None, str | None]:
    """Parse frontmatter YAML into ``(data, warning)``; exactly one of them is None.

    ``first_line`` is the note line (1-based) of the YAML's first line, used in messages.
    Empty YAML gives ``{}``. Never raises.

    Example:
        >>> load_frontmatter("tags: [a]\\ncreated: 2024-05-01")
        ({'tags': ['a'], 'created': '2024-05-01'}, None)
        >>> load_frontmatter("- a")
        (None, 'invalid YAML frontmatter: expected a mapping, got a list')
    """
    try:
        raw = yaml.load(yaml_text, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as exc:
        reason = exc.problem or exc.context or "syntax error"
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + first_line})" if mark is not None else ""
        return None, f"invalid YAML frontmatter: {reason}{where}"
    except Exception as exc:  # noqa: BLE001 - deep nesting, odd input: never raise
        return None, f"invalid YAML frontmatter: {_short(exc)}"
    if raw is None:
        return {}, None
    if not isinstance(raw, dict):
        return None, f"invalid YAML frontmatter: expected a mapping, got {_kind(raw)}"
    try:
        data: dict[str, Any] = _Converter().convert(raw, 0)
    except (FrontmatterRefused, RecursionError) as exc:
        return None, f"invalid YAML frontmatter: {_short(exc)}"
    return data, None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


class _Converter:
    """Turns loaded YAML into JSON-compatible values, refusing cycles and alias bombs."""

    __slots__ = ("nodes", "open")

    def __init__(self) -> None:
        self.nodes = 0
        self.open: set[int] = set()

    def convert(self, value: Any, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise FrontmatterRefused(f"more than {MAX_NODES} values")
        if value is None or isinstance(value, (str, bool, int)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else str(value)
        if isinstance(value, (dt.date, dt.datetime)):
            return value.isoformat()
        if isinstance(value, bytes):
            return base64.b64encode(value).decode("ascii")
        if not isinstance(value, (dict, list, tuple, set, frozenset)):
            return str(value)
        if depth >= MAX_DEPTH:
            raise FrontmatterRefused(f"nested deeper than {MAX_DEPTH} levels")
        if id(value) in self.open:
            raise FrontmatterRefused("recursive alias")
        self.open.add(id(value))
        try:
            if isinstance(value, dict):
                return {_key(k): self.convert(v, depth + 1) for k, v in value.items()}
            items = [self.convert(v, depth + 1) for v in value]
            if isinstance(value, (set, frozenset)):
                items.sort(key=lambda v: json.dumps(v, sort_keys=True, ensure_ascii=False))
            return items
        finally:
            self.open.discard(id(value))


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return json.dumps(key)
    if isinstance(key, (dt.date, dt.datetime)):
        return key.isoformat()
    return str(key)

"""What a search may be narrowed to: one frozen value, checked once, applied in one place.

Every door builds a ``SearchFilter`` from its own options (the CLI's ``--prefix``/``--tag``/``--where``/``--kind``,
the MCP tools' arguments, the page's query parameters, ``Vault.search``'s keywords) and hands it on unchanged; the
store asks ``admits`` of each note revision visible at the cutoff (``store.search.snapshot.allowed_notes``, which
both engines run). The revision asked about is the one visible then, so a filter reads the tags and frontmatter a
note had at the cutoff, never those it was given later.

A filter narrows which chunks are returned and ranked; it never changes a chunk's score (the keyword statistics
are those of the whole vault at the cutoff). Every condition given must hold:

- ``prefix``: the path starts with it (a folder: ``Projects/``);
- ``tags``: the note has each tag, case-insensitively, a nested tag counting for its parents (``a`` matches
  ``a/b``); a leading ``#`` is ignored;
- ``where``: the frontmatter's key has the value (a list holding it counts; ``true``/``false`` match a YAML
  boolean in any case; numbers and dates match as written);
- ``kinds``: the file is of one of these kinds (``KINDS``).

Adding a filter: a field here (with its check in ``__post_init__``, its rule in ``admits`` and its keyword in
``FilterArgs``), and each door's option for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, TypedDict

from .errors import ConfigError

KINDS = {".md": "note", ".canvas": "canvas", ".base": "base"}
"""A file's kind by its name's ending; every other recorded file (a PDF, an image, audio) is an ``attachment``."""
KIND_NAMES = (*KINDS.values(), "attachment")
"""The kinds a search may be narrowed to, in the order the doors list them."""

MAX_PREFIX_CHARS = 1024
MAX_TAGS = 20
MAX_TAG_CHARS = 200
MAX_CONDITIONS = 20
"""The most frontmatter conditions (``where``) one search takes."""
MAX_KEY_CHARS = 200
MAX_VALUE_CHARS = 1000

Scalar = str | bool | int | float
"""A frontmatter value as a door may give it (JSON): kept as the text it is written as in YAML."""


def kind_of(path: str) -> str:
    """The kind of the recorded file at ``path`` (one of ``KIND_NAMES``)."""
    dot = path.rfind(".")
    return KINDS.get(path[dot:], "attachment") if dot > path.rfind("/") else "attachment"


class FilterArgs(TypedDict, total=False):
    """``SearchFilter``'s fields as keywords (``Vault.search(query, prefix=..., tags=[...], where={...})``)."""

    prefix: str | None
    tags: Iterable[str] | None
    where: Mapping[str, Scalar] | Iterable[tuple[str, Scalar]] | None
    kinds: Iterable[str] | None


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which notes a search looks in (``SearchFilter()``: all of them)."""

    prefix: str | None = None
    """Only paths starting with this."""
    tags: tuple[str, ...] = ()
    """Only notes with every one of these tags (without ``#``)."""
    where: tuple[tuple[str, str], ...] = ()
    """Only notes whose frontmatter has each key with its value (as text)."""
    kinds: tuple[str, ...] = ()
    """Only files of these kinds (``KIND_NAMES``); none given: every kind."""

    def __post_init__(self) -> None:
        if self.prefix is not None and len(self.prefix) > MAX_PREFIX_CHARS:
            _refuse("prefix", f"a path prefix takes at most {MAX_PREFIX_CHARS} characters")
        if len(self.tags) > MAX_TAGS:
            _refuse("tags", f"at most {MAX_TAGS} tags, not {len(self.tags)}")
        for tag in self.tags:
            if not tag.lstrip("#").strip() or len(tag) > MAX_TAG_CHARS:
                _refuse("tags", f"a tag is a name of 1 to {MAX_TAG_CHARS} characters, not {tag[:MAX_TAG_CHARS]!r}")
        if len(self.where) > MAX_CONDITIONS:
            _refuse("where", f"at most {MAX_CONDITIONS} frontmatter conditions, not {len(self.where)}")
        for key, value in self.where:
            if not key.strip() or len(key) > MAX_KEY_CHARS:
                _refuse("where", f"a frontmatter key is 1 to {MAX_KEY_CHARS} characters, not {key[:MAX_KEY_CHARS]!r}")
            if len(value) > MAX_VALUE_CHARS:
                _refuse("where", f"the value of {key!r} is over {MAX_VALUE_CHARS} characters")
        for kind in self.kinds:
            if kind not in KIND_NAMES:
                _refuse("kinds", f"unknown kind {kind!r}: use one of {', '.join(KIND_NAMES)}")

    @classmethod
    def of(
        cls,
        prefix: str | None = None,
        tags: Iterable[str] | None = None,
        where: Mapping[str, Scalar] | Iterable[tuple[str, Scalar]] | None = None,
        kinds: Iterable[str] | None = None,
    ) -> SearchFilter:
        """The filter of a door's options as given (an empty one: no condition); raises ``ConfigError`` naming
        the argument that is wrong."""
        pairs = where.items() if isinstance(where, Mapping) else (where or ())
        return cls(
            prefix or None,
            _names(tags),
            tuple((str(key), _text(value)) for key, value in pairs),
            tuple(dict.fromkeys(_names(kinds))),
        )

    def __bool__(self) -> bool:
        """False when no condition is given (every note passes)."""
        return bool(self.prefix or self.tags or self.where or self.kinds)

    def admits(self, path: str, tags_json: str | None, frontmatter_json: str | None) -> bool:
        """Whether the note revision at ``path`` with these tags and frontmatter (JSON, as the store keeps them)
        passes every condition."""
        if self.prefix and not path.startswith(self.prefix):
            return False
        if self.kinds and kind_of(path) not in self.kinds:
            return False
        if self.tags:
            held = [t.lower() for t in json.loads(tags_json or "[]")]
            if not all(_has_tag(held, wanted) for wanted in self.tags):
                return False
        if self.where:
            frontmatter = json.loads(frontmatter_json) if frontmatter_json else None
            if not all(_field_match(frontmatter, key, value) for key, value in self.where):
                return False
        return True


def condition(text: str) -> tuple[str, str]:
    """A frontmatter condition written ``key=value`` (the command line's and the page's form) as a pair."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        _refuse("where", f"a frontmatter condition is key=value, not {text!r}")
    return key.strip(), value


FILTER_NAMES = tuple(f.name for f in fields(SearchFilter))
"""The filters by name, as ``FilterArgs`` and each door's options name them."""


def _refuse(argument: str, message: str) -> None:
    raise ConfigError(message, argument=argument)


def _names(given: Iterable[str] | None) -> tuple[str, ...]:
    """Names given as a list, or one name alone (``tags="project"`` is one tag, not seven letters)."""
    return (given,) if isinstance(given, str) else tuple(given or ())


def _text(value: Scalar) -> str:
    """A frontmatter value as text: a boolean as YAML writes it, anything else as ``str`` gives it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and not -(10**MAX_VALUE_CHARS) < value < 10**MAX_VALUE_CHARS:
        _refuse("where", f"a frontmatter value is at most {MAX_VALUE_CHARS} characters")
    return str(value)


def _has_tag(held: list[str], wanted: str) -> bool:
    want = wanted.lstrip("#").lower()
    return any(t == want or t.startswith(want + "/") for t in held)


def _field_match(frontmatter: Any, key: str, value: str) -> bool:
    if not isinstance(frontmatter, dict) or key not in frontmatter:
        return False
    found = frontmatter[key]
    values = found if isinstance(found, list) else [found]
    return any(str(v).lower() == value.lower() if isinstance(v, bool) else str(v) == value for v in values)

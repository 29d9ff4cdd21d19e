"""What a manifest key may hold, stated once as pydantic models, and the one formatter that turns a model's
``ValidationError`` into one line naming the key and the problem (``manifest PATH: http.bind: missing …``).

The models (``manifest.py``, ``access.py``) are strict: every key known (``extra="forbid"``), every value of its
kind, no coercion (``allow_writes = 1`` is refused, not taken for true). A field's type says its kind for the
message (``Kind``) and, when it is required, what to say when it is left out (``IfMissing``); a check across
keys raises ``refuse(key, problem)``. Relative paths resolve against the ``base`` folder given as the validation
context (the manifest's folder); a model built in code keeps its paths as given.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    StrictStr,
    ValidationError,
    ValidationInfo,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticCustomError

from ..dsn import is_dsn
from ..errors import ConfigError


@dataclass(frozen=True, slots=True)
class Kind:
    """How an error names what a key holds: ``must be {what}, not …``."""

    what: str


@dataclass(frozen=True, slots=True)
class IfMissing:
    """What an error says of a required key left out (the whole problem, ``missing: …``)."""

    problem: str


class Model(BaseModel):
    """A table of the manifest: unknown keys refused, frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _path_text(value: object) -> object:
    if isinstance(value, Path):
        return value
    if not isinstance(value, str):
        raise PydanticCustomError("path_type", "a path (string)")
    if not value:
        raise PydanticCustomError("string_too_short", "must not be empty")
    return value


def _resolved(value: Path | str, info: ValidationInfo) -> Path | str:
    """``value`` relative to the context's ``base`` folder, ``~`` expanded; a DSN kept as it is."""
    base = (info.context or {}).get("base")
    if base is None or (isinstance(value, str) and is_dsn(value)):
        return value
    return (base / Path(value).expanduser()).absolute()


Text = Annotated[StrictStr, Field(min_length=1), Kind("a string")]
PathText = Annotated[Path, BeforeValidator(_path_text), AfterValidator(_resolved), Kind("a path (string)")]
DbPath = Annotated[Path | str, BeforeValidator(_path_text), AfterValidator(_resolved), Kind("a path (string)")]
"""A file (resolved like any path) or a ``postgresql://`` URI, kept as it is."""
Flag = Annotated[StrictBool, Kind("true or false")]
Names = Annotated[tuple[Annotated[StrictStr, Field(min_length=1)], ...], Kind("a list of strings")]
Number = Annotated[float, Strict(), Kind("a number")]


def refuse(key: str, problem: str) -> PydanticCustomError:
    """A check across keys (raised from a model validator): ``key`` of the table being checked, ``problem``."""
    return PydanticCustomError("refused", "{problem}", {"key": key, "problem": problem})


M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: Mapping[str, Any], *, source: str, context: Mapping[str, Any]) -> M:
    """``data`` (a file's TOML) as ``model``; ConfigError ``{source}: KEY: PROBLEM`` for its first mistake.
    ``context``: ``base``, the folder relative paths start from, and what the model's validators ask for."""
    try:
        return model.model_validate(data, context=dict(context))
    except ValidationError as exc:
        raise ConfigError(f"{source}: {describe(exc, model, data)}") from None


def describe(exc: ValidationError, model: type[BaseModel], data: Any) -> str:
    """``KEY: PROBLEM`` for the first mistake: table by table in the file's order; in a table, an unknown key or a
    value of the wrong kind (the first in the file) before a key left out or a value refused for what it says (the
    first in the model's order, which pydantic's follows)."""
    found = []
    for i, error in enumerate(exc.errors()):
        form, loc, problem = _problem(error, model, data)
        found.append(((_position(data, loc[:-1]), form, _position(data, loc) if form == 0 else (i,)), loc, problem))
    _, loc, problem = min(found, key=lambda f: f[0])
    return f"{_key(loc)}: {problem}"


def _problem(error: ErrorDetails, model: type[BaseModel], data: Any) -> tuple[int, tuple[Any, ...], str]:
    """(0 for a mistake of form, 1 for one of content; the key's location; the problem) of one error."""
    loc, kind = tuple(error["loc"]), error["type"]
    if kind == "refused":
        extra = tuple(k for k in str(error["ctx"]["key"]).split(".") if k)
        return 1, loc + extra, str(error["ctx"]["problem"])
    if kind == "value_error":
        return 1, loc, str(error["ctx"]["error"])
    if kind == "extra_forbidden":
        fields = _model_at(model, loc[:-1]).model_fields  # but the excluded: the manifest's own location
        return 0, loc, f"unknown key (known here: {', '.join(sorted(k for k, f in fields.items() if not f.exclude))})"
    if kind == "missing":
        field = _model_at(model, loc[:-1]).model_fields[str(loc[-1])]
        said = next((m for m in _metadata(field) if isinstance(m, IfMissing)), None)
        return 1, loc, said.problem if said else "missing"
    return (0, *_wrong_kind(model, data, loc, kind))


def _wrong_kind(model: type[BaseModel], data: Any, loc: tuple[Any, ...], kind: str) -> tuple[tuple[Any, ...], str]:
    """``must be KIND, not TYPE VALUE`` for the outermost key whose value is wrong (a list of strings, not its item)."""
    holder: type[BaseModel] | None = model
    for i, part in enumerate(loc):
        if isinstance(part, int):
            continue
        if holder is None or part not in holder.model_fields:
            break
        field = holder.model_fields[part]
        inner = _model_in(field.annotation)
        rest = loc[i + 1 :]
        if inner is not None and rest and (isinstance(rest[0], str) or len(rest) > 1):
            holder = inner  # into the table (or the array's item): the mistake is further in
            continue
        key, value = loc[: i + 1], _value_at(data, loc[: i + 1])
        if kind == "string_too_short" and not rest:
            return key, "must not be empty"
        what = next((m.what for m in _metadata(field) if isinstance(m, Kind)), None)
        if what is None:
            what = "an array of tables" if typing.get_origin(field.annotation) is tuple else "a table"
        return key, f"must be {what}, not {type(value).__name__} {value!r}"[:300]
    return loc, kind


def _key(loc: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _position(data: Any, loc: tuple[Any, ...]) -> tuple[int, ...]:
    """Where ``loc`` is in the file, to report the first mistake first (a key left out: after the others)."""
    at: list[int] = []
    for part in loc:
        if isinstance(data, dict) and part in data:
            at.append(list(data).index(part))
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            at.append(part)
            data = data[part]
        else:
            at.append(1 << 30)
            break
    return tuple(at)


def _value_at(data: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        data = data[part]
    return data


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel]:
    for part in loc:
        if isinstance(part, str) and part in model.model_fields:
            model = _model_in(model.model_fields[part].annotation) or model
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The table type in ``annotation`` (``X | None``, ``tuple[X, ...]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (tuple, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _metadata(field: FieldInfo) -> list[Any]:
    """A field's markers, also those of an optional (``Names | None``)."""
    found = list(field.metadata)
    for arg in typing.get_args(field.annotation):
        if typing.get_origin(arg) is Annotated:
            found += list(arg.__metadata__)
    return found

"""The arguments both search tools take, declared once: ``search_notes`` and its whole-hits twin (the function a
signing server answers with) are built on one function, ``searching``'s, and take its arguments (``taking``).

The filters are ``vaultsync.search_filter``'s, as the CLI's options and ``Vault.search``'s keywords are: one
``SearchFilter`` from the arguments, checked there, applied in the store.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field

from ..results import SearchResult
from ..search_filter import (
    KIND_NAMES,
    MAX_CONDITIONS,
    MAX_KEY_CHARS,
    MAX_PREFIX_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_VALUE_CHARS,
    SearchFilter,
)
from .served import ServedVault
from .toolkit import CutoffArg

F = TypeVar("F", bound=Callable[..., Any])

QueryArg = Annotated[str, Field(description="Words or a phrase to look for", min_length=1, max_length=1000)]
ValidAtArg = Annotated[
    str | None,
    Field(
        description="Only notes valid at this time (frontmatter valid_from/valid_to); default: the cutoff",
        max_length=64,
    ),
]
ModeArg = Annotated[
    Literal["hybrid", "keyword", "vector"],
    Field(
        description="hybrid (default) ranks "
        "keyword matches by phrase, proximity and headings (and meaning, with a semantic model); "
        "keyword is plain BM25; vector is similarity only"
    ),
]
LimitArg = Annotated[int, Field(ge=1, le=50, description="Most hits to return")]
PrefixArg = Annotated[
    str | None, Field(description="Only paths starting with this, e.g. 'Projects/'", max_length=MAX_PREFIX_CHARS)
]
TagsArg = Annotated[
    list[Annotated[str, Field(max_length=MAX_TAG_CHARS)]] | None,
    Field(description="Only notes with all these tags (without #)", max_length=MAX_TAGS),
]
WhereArg = Annotated[
    dict[
        Annotated[str, Field(min_length=1, max_length=MAX_KEY_CHARS)],
        Annotated[str, Field(max_length=MAX_VALUE_CHARS)] | bool | int | float,
    ]
    | None,
    Field(
        description='Only notes whose frontmatter has each of these keys with its value, e.g. {"status": "active"} '
        "(a list holding the value counts)",
        max_length=MAX_CONDITIONS,
    ),
]
KindsArg = Annotated[
    list[Annotated[str, Field(json_schema_extra={"enum": list(KIND_NAMES)})]] | None,
    Field(
        description="Only files of these kinds: note (Markdown), canvas, base, attachment (a PDF, an image, any "
        "other file); default: every kind",
        max_length=len(KIND_NAMES),
    ),
]


def searching(rt: ServedVault) -> Callable[..., SearchResult]:
    """The search both tools run, over ``rt``: its parameters are the arguments they take."""

    def search(
        query: QueryArg,
        as_of: CutoffArg = None,
        valid_at: ValidAtArg = None,
        mode: ModeArg = "hybrid",
        limit: LimitArg = 10,
        prefix: PrefixArg = None,
        tags: TagsArg = None,
        where: WhereArg = None,
        kinds: KindsArg = None,
    ) -> SearchResult:
        filters = SearchFilter.of(prefix, tags, where, kinds)
        with rt.reading() as vault:
            return vault.search(query, as_of=as_of, valid_at=valid_at, mode=mode, limit=limit, filters=filters)

    return search


def taking(base: Callable[..., Any]) -> Callable[[F], F]:
    """Decorator: the tool ``fn(own..., **args)`` takes ``base``'s arguments first, then its own (the SDK builds
    the arguments' schema from the signature set here) and is called with all of them by name."""
    shared = list(inspect.signature(base, eval_str=True).parameters.values())

    def decorate(fn: F) -> F:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        fn.__signature__ = sig.replace(parameters=shared + own)  # type: ignore[attr-defined]  # read by inspect
        return fn

    return decorate

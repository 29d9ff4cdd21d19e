"""What every tool shares: registration (``ToolSet``), errors for the model, time and path arguments, cursors."""

from __future__ import annotations

import base64
import functools
import inspect
import json
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from .. import write_caller
from ..errors import ConfigError, NoteDeleted, NoteNotFound, UnknownRevision, VaultsyncError
from ..times import ACCEPTED, parse_time
from .budget import with_omitted
from .models import flat_schema
from .registry import spec_of
from .wire import compact

F = TypeVar("F", bound=Callable[..., Any])

TimeArg = Annotated[str | None, Field(description=f"Knowledge cutoff: {ACCEPTED}. Omit for now.", max_length=64)]
CutoffArg = Annotated[
    str | None,
    Field(
        description=f"Knowledge cutoff: {ACCEPTED}; or a revision id from note_history or list_changes (r12: the "
        "vault right after batch 12, nothing from later batches). Omit for now.",
        max_length=64,
    ),
]
"""The cutoff of a vault-wide question (search, listing, links): a time, or a revision id naming its batch."""
PathArg = Annotated[
    str,
    Field(
        description="Vault-relative note path, e.g. 'Projects/Atlas.md' ('.md' optional)", min_length=1, max_length=1024
    ),
]


class ToolSet:
    """Tools built before the server (``MCPServer(tools=...)``), each published with the title and annotations
    ``registry.TOOLS`` gives it, its docstring tidied (``inspect.cleandoc``) and its output schema flattened
    (``flat_schema``)."""

    def __init__(self) -> None:
        self.tools: list[Tool] = []
        self.full: dict[str, Callable[..., Any]] = {}
        """For a tool whose answer is cut to size, the function giving the whole answer (a signing server's)."""

    def add(self, fn: F) -> F:
        """Decorator: register ``fn`` as the tool named after it, as ``registry.TOOLS`` declares it (LookupError
        for a name the table lacks). A tool that changes the vault records its batches as done for the MCP caller
        (``vaultsync.write_caller``)."""
        spec = spec_of(fn.__name__)
        served = _for_caller(fn) if spec.writes else fn
        tool = Tool.from_function(
            served,
            title=spec.title,
            description=inspect.cleandoc(fn.__doc__ or ""),
            annotations=spec.annotations.model_copy(),
        )
        if tool.fn_metadata.output_schema is not None:  # a public field, read on every tools/list
            tool.fn_metadata.output_schema = with_omitted(flat_schema(tool.fn_metadata.output_schema))
        tool.fn_metadata = compact(tool.fn_metadata)  # compact answers, readable argument errors
        self.tools.append(tool)
        return fn


def _for_caller(fn: F) -> F:
    """Run a write tool as done for the caller the hardened middleware named, else the anonymous MCP one."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with write_caller.acting_for(write_caller.caller() or write_caller.ANONYMOUS):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature of F


def friendly(fn: F) -> F:
    """Expected failures become a ToolError whose message tells the model what to fix."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except NoteNotFound as exc:
            if isinstance(exc, UnknownRevision) or exc.argument in ("from", "to"):  # the path is right, not when
                raise ToolError(f"{exc}. note_history lists the note's revisions.") from None
            if isinstance(exc, NoteDeleted):
                raise ToolError(f"{exc} (pass that as_of to read_note).") from None
            if exc.argument == "as_of":  # before the vault's history: the path may be right
                raise ToolError(f"{exc}. Ask about a later as_of.") from None
            raise ToolError(
                f"{exc}. Find the right path with list_notes or search_notes "
                "(paths are case-sensitive and relative to the vault)."
            ) from None
        except VaultsyncError as exc:
            raise ToolError(exc.for_clients()) from None

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature of F


def wire_names(renames: dict[str, str]) -> Callable[[F], F]:
    """Let a tool take a wire argument named like a Python keyword: the parameter ``from_`` declared
    with ``Field(alias="from")`` is passed by the SDK as ``from``; this passes it on as ``from_``.

    The wrapper keeps the tool's signature (``functools.wraps``), so the SDK still builds the
    arguments' schema from the function it wraps.
    """

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def call(**kwargs: Any) -> Any:
            for wire, py in renames.items():
                if wire in kwargs:
                    kwargs[py] = kwargs.pop(wire)
            return fn(**kwargs)

        return call  # type: ignore[return-value]  # functools.wraps keeps the signature of F

    return decorate


def when(value: str | None, name: str) -> int | None:
    """A time argument as UTC microseconds; a bad one names the argument and the accepted forms.

    Most tools pass their time strings to ``Vault``, whose messages name the same arguments; this is
    for tools that use the time themselves (history windows, listing pages) or whose argument names
    differ from the ``Vault`` method's (``diff_note``'s ``from``/``to``).
    """
    return parse_time(value, name) if value is not None else None


def moment(value: str | None, name: str) -> int | str | None:
    """A time of one note, or a revision of it (``revision_id``, or its content hash's start), kept as written
    for ``Vault`` to find in the note's history."""
    from ..revisions import looks_like_revision

    if value is not None and looks_like_revision(value):
        return value.strip()
    try:
        return when(value, name)
    except VaultsyncError as exc:
        raise ConfigError(
            f"{exc}; or a revision id from note_history or list_changes (r12), or 8+ hex digits of a content hash",
            argument=name,
        ) from None


def encode_cursor(after: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": after}).encode()).decode()


def decode_cursor(cursor: str | None) -> str:
    """The last path of the previous page ('' for the first page); ValueError for a bad cursor."""
    if not cursor:
        return ""
    try:
        after = json.loads(base64.urlsafe_b64decode(cursor.encode()))["after"]
        if isinstance(after, str):
            return after
    except (ValueError, KeyError, TypeError):
        pass
    raise ValueError("invalid cursor: pass the next_cursor of the previous page unchanged, or omit it to start over")


def page(items_sorted: list[Any], after: str, limit: int, key: Callable[[Any], str]) -> tuple[list[Any], str | None]:
    """Keyset pagination over items sorted by ``key``: the items after ``after`` and the next cursor."""
    items = [x for x in items_sorted if key(x) > after] if after else items_sorted
    chunk = items[:limit]
    nxt = encode_cursor(key(chunk[-1])) if len(items) > limit else None
    return chunk, nxt

"""Every MCP tool in one table: its name, title, annotations, when a server offers it, and its line in the bundle.

This table is the one statement of these facts. ``ToolSet.add`` takes a tool's title and annotations from it (a
function not named here is refused), so ``tools/list`` shows what it says, in its order. Everything else follows:

- the scope a tool needs (``scope_of``): ``vault:read`` for a tool annotated ``readOnlyHint=True``; ``vault:write``
  for any other, one without annotations, and any name not in the table (the strictest default);
- which tools ``--allow-writes`` adds (those not read-only), which a hardened server runs one at a time and which
  names a manifest may give (``server.app``), the app-only tools (``server.apps.history``);
- the bundle's tool list (``scripts/docgen_bundle.py``), the test helpers' tool lists, and the checks that the
  README and the docs name every tool (``tests/server/test_tool_registry.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from mcp.types import ToolAnnotations

from ..hardened.access import READ, WRITE

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
"""A write that only adds: a new note, or text at a note's end."""
REWRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)
"""A write that replaces a note's text (its earlier states stay in the history)."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool: what ``tools/list`` shows of it besides its description and schemas (those are the function's)."""

    name: str
    """The tool's name: the name of the function that implements it."""
    title: str
    annotations: ToolAnnotations
    """The hints a client reads; ``read_only_hint`` decides the scope (``scope_of``) and whether the tool is a write."""
    summary: str = ""
    """Its line in the bundle's manifest (what a person sees before installing; a tool the bundle's server offers)."""
    needs: Literal["keystore", "apps"] | None = None
    """Offered only by a server with a keystore (signed answers), or only to a client of MCP Apps (a view's own
    tools); None: by every server (a write tool: by every server that allows writes)."""

    @property
    def writes(self) -> bool:
        """Changes the vault: offered only with ``--allow-writes``, needs ``vault:write``."""
        return scope_of(self.annotations) == WRITE


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "search_notes",
        "Search notes (now or as of a date)",
        READ_ONLY,
        "Search the notes as of a time (keyword and meaning)",
    ),
    ToolSpec("read_note", "Read a note (now or as of a date)", READ_ONLY, "A note's exact text as of a time"),
    ToolSpec("note_history", "History of a note", READ_ONLY, "Every revision of a note, following renames"),
    ToolSpec("diff_note", "Diff a note between two times", READ_ONLY, "How a note changed between two times"),
    ToolSpec(
        "list_changes",
        "What changed in a time window",
        READ_ONLY,
        "Notes created, modified, renamed or deleted in a window",
    ),
    ToolSpec(
        "list_deleted",
        "Notes deleted in a time window",
        READ_ONLY,
        "Notes deleted in a window, with the command that restores each",
    ),
    ToolSpec("list_notes", "List notes (now or as of a date)", READ_ONLY, "The notes that existed at a time"),
    ToolSpec(
        "list_attachments",
        "List attachments (now or as of a date)",
        READ_ONLY,
        "The vault's other files (images, PDFs, canvases) at a time, with type and size",
    ),
    ToolSpec(
        "read_attachment",
        "Read an attachment (now or as of a date)",
        READ_ONLY,
        "A file as of a time: a canvas's or base's text, or a link to its exact bytes",
    ),
    ToolSpec("get_links", "Links and backlinks of a note", READ_ONLY, "A note's links and backlinks as of a time"),
    ToolSpec("vault_status", "Vault status", READ_ONLY, "What is recorded and whether the watcher is current"),
    ToolSpec(
        "verify_receipt",
        "Verify a provenance receipt",
        READ_ONLY,
        needs="keystore",
    ),
    ToolSpec("create_note", "Create a note", WRITES, "Create a note"),
    ToolSpec("append_to_note", "Append to a note", WRITES, "Append to a note"),
    ToolSpec(
        "edit_note",
        "Edit one section or one exact text of a note",
        REWRITES,
        "Replace one section or one exact text of a note, at the revision read",
    ),
    ToolSpec(
        "restore_note",
        "Restore a note to a past revision",
        REWRITES,
        "Bring a past revision of a note back as a new one",
    ),
    ToolSpec(
        "history_view_note",
        "Note history view: a note as of a revision",
        READ_ONLY,
        needs="apps",
    ),
    ToolSpec(
        "history_view_diff",
        "Note history view: word diff of two revisions",
        READ_ONLY,
        needs="apps",
    ),
)
BY_NAME = {spec.name: spec for spec in TOOLS}


def scope_of(annotations: ToolAnnotations | None) -> str:
    """The scope a tool with these annotations needs: ``vault:read`` only for one declared read-only, else
    ``vault:write`` (no annotations, or no ``readOnlyHint``, is not read-only)."""
    return READ if annotations is not None and annotations.read_only_hint is True else WRITE


def required_scope(tool: str) -> str:
    """The scope a token needs to call ``tool`` (``vault:write`` for a name not in the table)."""
    spec = BY_NAME.get(tool)
    return scope_of(spec.annotations if spec is not None else None)


def spec_of(name: str) -> ToolSpec:
    """The table's entry for ``name``; LookupError naming this module when there is none."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise LookupError(
            f"tool {name!r} is not in vaultsync/server/registry.py's TOOLS: add it there with its title and "
            "annotations (its scope follows from them)"
        ) from None


def names(*, writes: bool | None = None, needs: str | None = None) -> tuple[str, ...]:
    """The names of the tools offered under ``needs`` (None: by every server), in the table's order; ``writes``:
    only the write tools (True) or only the others (False)."""
    return tuple(s.name for s in TOOLS if s.needs == needs and (writes is None or s.writes == writes))


def in_order(tools: Iterable[Any]) -> list[Any]:
    """SDK ``Tool`` objects (anything with a ``name``) in the table's order: the order ``tools/list`` shows."""
    position = {name: i for i, name in enumerate(BY_NAME)}
    return sorted(tools, key=lambda t: position.get(t.name, len(position)))

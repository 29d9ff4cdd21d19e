"""``note_history`` with a view: the timeline, the note as of any revision, a word diff, and a restore.

A host that negotiated MCP Apps (``client_supports_apps``) reads ``ui://vaultsync/note-history``
(one self-contained HTML document, ``view.py``) when the model calls ``note_history``, hands the view
the tool's answer, and forwards the view's own ``tools/call`` requests here. Those calls go to two
app-only tools (``_meta.ui.visibility = ["app"]``, hidden from the model) that answer with what the
``vaultsync ui`` page shows, made by the same code (``vaultsync.ui.views.Explorer``: the safe renderer
and the word diff), and to ``restore_note`` when the server allows writes.

A client that did not negotiate apps sees the server exactly as before: ``tools/list`` without the
app-only tools and without ``_meta.ui``, and the same answers (``AppsForAppClients``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp import MCPError
from mcp.server.apps import Apps, ResourceCsp, client_supports_apps
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.types import METHOD_NOT_FOUND
from pydantic import Field

from ...errors import NoteDeleted
from ...times import as_micros
from ...ui.views import Explorer
from ..registry import names
from ..served import ServedVault
from ..toolkit import PathArg, ToolSet, friendly
from .view import view_html

APP_URI = "ui://vaultsync/note-history"
SHOWN_ON = "note_history"
"""The model-facing tool whose answer opens the view."""
APP_TOOLS = names(needs="apps")
"""The tools only the view calls (``history_view_note``, ``history_view_diff``)."""

MomentArg = Annotated[
    int | str | None, Field(description="A revision's known_at (UTC microseconds) or a time; omit for now")
]


def add_history_app_tools(tools: ToolSet, rt: ServedVault, may_restore: Callable[[], bool]) -> None:
    """The two app-only tools (read-only): a note as of a moment, and the word diff of two moments."""

    @tools.add
    @friendly
    def history_view_note(path: PathArg, at: MomentArg = None) -> dict[str, Any]:
        """For the note-history view only: the note as of a moment (safe HTML), its revisions, and
        whether the caller may restore it."""
        with rt.reading() as vault:
            explorer, when = Explorer(vault), as_micros(at, "at")
            try:
                shown = explorer.note(path, when)
            except NoteDeleted:  # deleted now: shown as it was last, its deletion on the timeline
                kept = [r for r in vault.history(path) if r.kind != "deleted"] if when is None else []
                if not kept:
                    raise
                shown = explorer.note(kept[-1].path, kept[-1].known_at)
        keep = ("path", "title", "at", "revision", "html", "revisions")
        return {**{k: shown[k] for k in keep}, "can_restore": may_restore()}

    @tools.add
    @friendly
    def history_view_diff(path_a: PathArg, at_a: MomentArg, path_b: PathArg, at_b: MomentArg) -> dict[str, Any]:
        """For the note-history view only: the word diff between a note as of two moments."""
        with rt.reading() as vault:
            return Explorer(vault).diff(path_a, as_micros(at_a, "at_a"), path_b, as_micros(at_b, "at_b"))


def attach_history_app(
    tools: list[Any], rt: ServedVault, may_restore: Callable[[], bool]
) -> tuple[list[Any], Apps | None]:
    """``tools`` plus the app-only tools, ``note_history`` pointing at the view, and the extension serving
    it; unchanged (and no extension) when ``note_history`` is not published (a manifest left it out)."""
    shown = next((t for t in tools if t.name == SHOWN_ON), None)
    if shown is None:
        return tools, None
    extra = ToolSet()
    add_history_app_tools(extra, rt, may_restore)
    for tool in extra.tools:
        tool.meta = {**(tool.meta or {}), "ui": {"resourceUri": APP_URI, "visibility": ["app"]}}
    shown.meta = {**(shown.meta or {}), "ui": {"resourceUri": APP_URI}}
    apps = Apps()
    apps.add_html_resource(
        APP_URI,
        view_html(),
        name="note-history",
        title="Note history",
        description="A note's timeline, its text as of any revision, a word diff and a restore",
        csp=ResourceCsp(),
        prefers_border=True,
    )
    return [*tools, *extra.tools], apps


class AppsForAppClients:
    """Server middleware: a client that did not negotiate MCP Apps sees neither the app-only tools nor
    ``_meta.ui`` in ``tools/list``, and cannot call the app-only tools (as before the app existed)."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method not in ("tools/list", "tools/call") or client_supports_apps(ctx):
            return await call_next(ctx)
        if ctx.method == "tools/call":
            params = ctx.params if isinstance(ctx.params, dict) else {}
            if params.get("name") in APP_TOOLS:
                raise MCPError(code=METHOD_NOT_FOUND, message=f"Unknown tool: {params.get('name')}")
            return await call_next(ctx)
        result = await call_next(ctx)
        if not isinstance(result, dict):
            return result
        listed = result.get("tools")
        if not isinstance(listed, list):
            return result
        return {**result, "tools": [_without_ui(t) for t in listed if t.get("name") not in APP_TOOLS]}


def _without_ui(tool: dict[str, Any]) -> dict[str, Any]:
    meta = tool.get("_meta")
    if not isinstance(meta, dict) or "ui" not in meta:
        return tool
    rest = {k: v for k, v in meta.items() if k != "ui"}
    out = {k: v for k, v in tool.items() if k != "_meta"}
    return {**out, "_meta": rest} if rest else out

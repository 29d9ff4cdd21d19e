"""The note-history MCP App over the official MCP client: with and without the apps extension."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mcp import Client, MCPError
from mcp.server.apps import APP_MIME_TYPE
from support.hardened_helpers import hardened_stdio, write_manifest
from support.history_app_helpers import NOTE, AppsSupport, make_four_revisions

from vaultsync import Vault
from vaultsync.server import ServeConfig, ServedVault, build_server
from vaultsync.server.app import server_for
from vaultsync.server.apps import APP_URI

APP_ONLY = {"history_view_note", "history_view_diff"}


@pytest.fixture
def vault(tmp_path: Path):
    make_four_revisions(tmp_path / "vault", tmp_path / "db" / "v.db")
    with Vault.open(tmp_path / "db" / "v.db", root=tmp_path / "vault") as opened:
        yield opened


def _dump(result) -> str:
    return json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # auto: the 2026 era; legacy: initialize (2025-11-25)
async def test_an_apps_client_sees_the_view_on_note_history_and_reads_it(vault: Vault, mode: str) -> None:
    server = build_server(ServeConfig.of(vault, allow_writes=True))
    async with Client(server, mode=mode, extensions=[AppsSupport()]) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["note_history"].meta["ui"] == {"resourceUri": APP_URI}
        for name in APP_ONLY:
            assert tools[name].meta["ui"] == {"resourceUri": APP_URI, "visibility": ["app"]}
        assert not any((t.meta or {}).get("ui") for n, t in tools.items() if n not in APP_ONLY | {"note_history"})
        read = await client.read_resource(APP_URI)
        (content,) = read.contents
        assert content.mime_type == APP_MIME_TYPE
        html = content.text
        assert content.meta["ui"]["csp"] == {} and content.meta["ui"]["prefersBorder"] is True
        csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
        assert "default-src 'none'" in csp and "connect-src 'none'" in csp and "unsafe-inline" not in csp
        assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]+';", csp)
        assert "<script src" not in html and "<link" not in html and "http" not in html.replace("http-equiv", "")
        # the view's own calls: the note as of its first revision, and a word diff
        first = (await client.call_tool("history_view_note", {"path": NOTE})).structured_content
        assert [r["kind"] for r in first["revisions"]] == ["created", "modified", "modified", "modified"]
        assert first["can_restore"] is True
        old = await client.call_tool("history_view_note", {"path": NOTE, "at": first["revisions"][0]["known_at"]})
        assert "Monday" in old.structured_content["html"]
        revs = first["revisions"]
        runs = await client.call_tool(
            "history_view_diff",
            {"path_a": NOTE, "at_a": revs[0]["known_at"], "path_b": NOTE, "at_b": revs[1]["known_at"]},
        )
        assert ["-", "Monday"] in runs.structured_content["runs"] and ["+", "Tuesday"] in runs.structured_content[
            "runs"
        ]


@pytest.mark.anyio
async def test_a_read_only_server_offers_no_restore(vault: Vault) -> None:
    async with Client(build_server(ServeConfig.of(vault)), extensions=[AppsSupport()]) as client:
        shown = (await client.call_tool("history_view_note", {"path": NOTE})).structured_content
        assert shown["can_restore"] is False


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_without_apps_sees_the_server_unchanged(vault: Vault, mode: str) -> None:
    """tools/list and the note_history answer, byte for byte those of the same server without the app."""

    async def seen(server, **kw) -> tuple[str, str, str]:
        async with Client(server, mode=mode, **kw) as client:
            listed = await client.list_tools()
            answer = await client.call_tool("note_history", {"path": NOTE})
            diff = await client.call_tool("diff_note", {"path": NOTE, "from": "2024-01-15"})
        return _dump(listed), _dump(answer), _dump(diff)

    config = ServeConfig.of(vault, allow_writes=True)
    without_app = await seen(server_for(ServedVault(config), app=False))
    assert await seen(build_server(config)) == without_app
    with_app = await seen(build_server(config), extensions=[AppsSupport()])
    assert with_app[1:] == without_app[1:] and with_app[0] != without_app[0]  # only tools/list differs
    assert '"revision"' in without_app[1] and "Friday" in without_app[2]
    async with Client(build_server(config), mode=mode) as client:
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("history_view_note", {"path": NOTE})


ROLES = """
[role_filter]
caller_roles = {roles}
default = "deny_all"

[role_filter.allow]
note_history = ["reader", "writer"]
read_note = ["reader", "writer"]
restore_note = ["writer"]
"""


@pytest.mark.anyio
@pytest.mark.parametrize("roles", [["reader"], ["reader", "writer"]])
@pytest.mark.slow
async def test_the_restore_is_offered_only_to_a_role_that_may_restore(tmp_path: Path, roles: list[str]) -> None:
    make_four_revisions(tmp_path / "vault", tmp_path / "db" / "v.db")
    manifest = write_manifest(
        tmp_path / "m.toml", tmp_path / "db" / "v.db", ROLES.format(roles=json.dumps(roles)), allow_writes=True
    )
    async with Client(hardened_stdio(tmp_path / "vault", manifest), extensions=[AppsSupport()]) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert APP_ONLY | {"note_history", "read_note"} <= names  # the view's tools go with note_history
        assert ("restore_note" in names) == ("writer" in roles)
        shown = (await client.call_tool("history_view_note", {"path": NOTE})).structured_content
        assert shown["can_restore"] is ("writer" in roles)
        assert (await client.read_resource(APP_URI)).contents[0].mime_type == APP_MIME_TYPE


@pytest.mark.anyio
async def test_a_deleted_note_shows_as_it_was_last_with_its_deletion(vault: Vault) -> None:
    (vault.root / NOTE).unlink()
    vault.sync(known_at="2024-05-01")
    async with Client(build_server(ServeConfig.of(vault, allow_writes=True)), extensions=[AppsSupport()]) as client:
        shown = (await client.call_tool("history_view_note", {"path": NOTE})).structured_content
        assert [r["kind"] for r in shown["revisions"]][-2:] == ["modified", "deleted"]
        assert "Friday" in shown["html"]
        restored = await client.call_tool("restore_note", {"path": NOTE, "revision": shown["revisions"][0]["revision"]})
        assert not restored.is_error

"""Assistants list and read attachments as of a date: a canvas's text, and an image as a resource link whose
resource serves exactly that revision's bytes (never inline in the tool's answer)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from mcp import Client, MCPError
from mcp.types import ResourceLink
from support.mcp_helpers import error_text, sc

from vaultsync import Vault
from vaultsync.server import ServeConfig, build_server
from vaultsync.server import attachments as served_attachments

pytestmark = pytest.mark.anyio

CANVAS_V1 = {"nodes": [{"id": "a", "type": "text", "text": "first idea", "x": 0, "y": 0, "width": 10, "height": 10}]}


def png(seed: int, size: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + bytes((seed * 31 + i * 7) % 251 for i in range(size))


@pytest.fixture
def vault(tmp_path: Path):
    root = tmp_path / "vault"
    (root / "Assets").mkdir(parents=True)
    (root / "Note.md").write_text("# Note\n\n![[diagram.png]]\n")
    (root / "Assets" / "diagram.png").write_bytes(png(1, 300_000))
    (root / "board.canvas").write_text(json.dumps(CANVAS_V1))
    with Vault.open(tmp_path / "db" / "v.db", root=root) as v:
        v.sync(known_at="2024-01-01")
        (root / "Assets" / "diagram.png").write_bytes(png(2, 200_000))
        v.sync(known_at="2024-02-01")
        (root / "Assets" / "diagram.png").unlink()
        v.sync(known_at="2024-03-01")
        yield v


async def test_attachments_are_listed_with_type_and_size_as_of_a_date(vault: Vault) -> None:
    async with Client(build_server(ServeConfig.of(vault))) as c:
        then = sc(await c.call_tool("list_attachments", {"as_of": "2024-01-15"}))["attachments"]
        assert [(a["path"], a["mime_type"], a["size"]) for a in then] == [
            ("Assets/diagram.png", "image/png", len(png(1, 300_000))),
            ("board.canvas", "application/json", len(json.dumps(CANVAS_V1))),
        ]
        now = sc(await c.call_tool("list_attachments", {}))["attachments"]
        assert [a["path"] for a in now] == ["board.canvas"], "the deleted image is gone now, notes never listed"


async def test_an_image_as_of_a_date_is_a_resource_link_to_those_exact_bytes(vault: Vault) -> None:
    async with Client(build_server(ServeConfig.of(vault))) as c:
        for when, body in (("2024-01-15", png(1, 300_000)), ("2024-02-15", png(2, 200_000))):
            result = await c.call_tool("read_attachment", {"path": "Assets/diagram.png", "as_of": when})
            links = [b for b in result.content if isinstance(b, ResourceLink)]
            assert len(links) == 1 and links[0].mime_type == "image/png" and links[0].size == len(body)
            assert sum(len(getattr(b, "text", "")) for b in result.content) < 2000, "never the bytes inline"
            facts = sc(result)
            assert facts["uri"] == str(links[0].uri) and facts["readable"] and "text" not in facts
            read = await c.read_resource(str(links[0].uri))
            assert base64.b64decode(read.contents[0].blob) == body  # the link reads that revision, after deletion
        gone = await c.call_tool("read_attachment", {"path": "Assets/diagram.png"})
        assert gone.is_error and "deleted" in error_text(gone)


async def test_a_canvas_gives_its_text_and_a_note_is_sent_to_read_note(vault: Vault) -> None:
    async with Client(build_server(ServeConfig.of(vault))) as c:
        board = sc(await c.call_tool("read_attachment", {"path": "board.canvas"}))
        assert board["text"].strip() == "first idea" and board["mime_type"] == "application/json"
        note = await c.call_tool("read_attachment", {"path": "Note.md"})
        assert note.is_error and "read_note" in error_text(note)


async def test_the_resource_refuses_bytes_over_its_limit_and_links_it_never_made(vault, monkeypatch) -> None:
    monkeypatch.setattr(served_attachments, "MAX_BLOB_BYTES", 100_000)
    async with Client(build_server(ServeConfig.of(vault))) as c:
        facts = sc(await c.call_tool("read_attachment", {"path": "Assets/diagram.png", "as_of": "2024-01-15"}))
        assert facts["readable"] is False
        for uri in (facts["uri"], "attachment://latest/Assets/diagram.png", "attachment://r1/Note.md"):
            with pytest.raises(MCPError) as caught:
                await c.read_resource(uri)
            assert "\n" not in str(caught.value), str(caught.value)


async def test_an_embed_resolves_as_of_a_date_to_the_revision_read_attachment_reads(vault: Vault) -> None:
    async with Client(build_server(ServeConfig.of(vault))) as c:
        then = sc(await c.call_tool("get_links", {"path": "Note.md", "as_of": "2024-02-15"}))["outgoing"]
        assert [(o["resolved"], o["mime_type"]) for o in then] == [("Assets/diagram.png", "image/png")]
        read = sc(await c.call_tool("read_attachment", {"path": then[0]["resolved"], "as_of": then[0]["revision"]}))
        assert read["size"] == len(png(2, 200_000))
        blob = (await c.read_resource(read["uri"])).contents[0].blob
        assert base64.b64decode(blob) == png(2, 200_000)
        now = sc(await c.call_tool("get_links", {"path": "Note.md"}))["outgoing"]
        assert [o.get("resolved") for o in now] == [None], "the image was deleted since"


async def test_resources_list_names_an_attachment_by_its_bytes_and_type_never_as_a_markdown_note(vault: Vault) -> None:
    async with Client(build_server(ServeConfig.of(vault))) as c:
        listed = {r.name: r for r in (await c.list_resources()).resources}
        board = listed["board.canvas"]
        assert str(board.uri).startswith("attachment://r") and board.mime_type == "application/json"
        assert listed["Note.md"].mime_type == "text/markdown" and str(listed["Note.md"].uri) == "note://Note.md"
        read = (await c.read_resource(str(board.uri))).contents[0]
        assert base64.b64decode(read.blob) == json.dumps(CANVAS_V1).encode()

"""One size budget for every tool answer: on a note dense in links and tags and full of characters that grow
when escaped, every tool's answer (both copies: structured and text) stays under ``MAX_ANSWER_BYTES``, says
what it left out, and read_note pages the rest."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client
from support.mcp_helpers import sc, write

from vaultsync import Vault
from vaultsync.parsers.limits import DEFAULT_LIMITS
from vaultsync.server import ServeConfig, build_server
from vaultsync.server.budget import MAX_ANSWER_BYTES

LINKS, TAGS = DEFAULT_LIMITS.links, DEFAULT_LIMITS.tags  # as many as a note yields: well over the budget
"""Enough that either alone is over the budget; a link is mostly quotes, which the text copy escapes again."""
PATH = "Dense.md"


def dense_note(words: str) -> str:
    links = "\n".join(f'[[Target number {i} "quoted"]]' for i in range(LINKS))
    tags = " ".join(f"#tag{i}" for i in range(TAGS))
    quotes = '"\\' * 60_000  # each character escaped once in the structured copy, twice in the text one
    return f"# Dense {words}\n\n{links}\n\n{tags}\n\n{quotes}\n"


@pytest.fixture(scope="module")
def dense(tmp_path_factory: pytest.TempPathFactory) -> Any:
    base = tmp_path_factory.mktemp("dense")
    root, db = base / "vault", base / "db" / "vaultsync.db"
    write(root, PATH, dense_note("first"))
    (root / "Pasted.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(2 * MAX_ANSWER_BYTES))  # never inline
    with Vault.open(db, root=root) as vault:
        vault.sync(known_at="2024-01-01")
        write(root, PATH, dense_note("second"))
        vault.sync(known_at="2024-02-01")
    with Vault.open(db, root=root) as vault:
        yield vault


ARGUMENTS: dict[str, dict[str, Any]] = {
    "search_notes": {"query": "Target number quoted", "full_text": True, "explain": True, "limit": 50},
    "read_note": {"path": PATH},
    "note_history": {"path": PATH},
    "diff_note": {"path": PATH, "from": "2024-01-01"},
    "list_changes": {"since": "2023-01-01"},
    "list_deleted": {},
    "list_notes": {},
    "list_attachments": {},
    "read_attachment": {"path": "Pasted.png"},
    "get_links": {"path": PATH},
    "vault_status": {},
    "create_note": {"path": "Made.md", "content": "# Made\n"},
    "append_to_note": {"path": "Made.md", "text": "more"},
    "edit_note": {"path": "Made.md", "expected_revision": "00000000", "new_text": "less"},  # refused: an error
    "restore_note": {"path": PATH, "as_of": "2024-01-01"},
}


def wire(result: Any) -> int:
    """Bytes of both copies of an answer as they go on the wire."""
    text = "".join(getattr(block, "text", "") for block in result.content)  # a resource link has none
    structured = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
    return len(json.dumps(text, ensure_ascii=False).encode()) + len(structured.encode())


@pytest.mark.anyio
@pytest.mark.slow
async def test_every_tool_answer_on_a_dense_note_stays_under_the_budget(dense: Vault) -> None:
    async with Client(build_server(ServeConfig.of(dense, allow_writes=True))) as c:
        tools = [t.name for t in (await c.list_tools()).tools]
        assert set(tools) <= set(ARGUMENTS), f"give the new tool arguments here: {set(tools) - set(ARGUMENTS)}"
        sizes = {}
        for name in tools:
            result = await c.call_tool(name, ARGUMENTS[name])
            sizes[name] = wire(result)
            assert sizes[name] <= MAX_ANSWER_BYTES, (name, sizes[name])
        print(f"\nanswer sizes (bytes on the wire, both copies): {sizes}")


@pytest.mark.anyio
async def test_read_note_counts_what_it_left_out_and_pages_the_rest(dense: Vault) -> None:
    async with Client(build_server(ServeConfig.of(dense))) as c:
        first = await c.call_tool("read_note", {"path": PATH, "max_chars": 1})
        assert wire(first) <= MAX_ANSWER_BYTES
        answer = sc(first)
        assert answer["content"] == "#" and answer["omitted"]["links"] > 0 and answer["links"]
        assert wire(first) > MAX_ANSWER_BYTES // 2, "cut near the budget, not far below"
        links, tags, offsets = list(answer["links"]), list(answer["tags"]), {"links": 0, "tags": 0}
        assert len(links) + answer["omitted"]["links"] == LINKS
        while answer.get("omitted"):
            offsets = {k: offsets[k] + len(answer[k]) for k in offsets}
            page = await c.call_tool(
                "read_note",
                {"path": PATH, "max_chars": 1, "links_offset": offsets["links"], "tags_offset": offsets["tags"]},
            )
            assert wire(page) <= MAX_ANSWER_BYTES
            answer = sc(page)
            assert answer["links"] or answer["tags"], "every page moves on"
            if answer.get("omitted"):
                assert wire(page) > MAX_ANSWER_BYTES // 2, "a page that is cut is cut near the budget, not far below"
            links += answer["links"]
            tags += answer["tags"]
        assert [link["target"] for link in links] == [f'Target number {i} "quoted"' for i in range(LINKS)]
        assert tags == [f"tag{i}" for i in range(TAGS)]
        whole = sc(await c.call_tool("read_note", {"path": PATH}))  # content first: it is sized by read_note
        assert whole["next_offset"] is not None and "omitted" in whole and "content" not in whole["omitted"]


def test_an_answer_far_over_the_budget_is_cut_near_it_not_to_nothing() -> None:
    """300,000 links (the text copy escapes their quotes again, so the wire holds well over twice each byte cut):
    the answer keeps the links that fit, and says how many it left out."""
    from vaultsync.server.budget import fit, wire_bytes

    links = [{"target": f'n{i} "q"', "kind": "wikilink", "line": 3} for i in range(300_000)]
    answer = {"path": PATH, "content": "#", "links": list(links)}
    omitted = fit(answer)
    assert MAX_ANSWER_BYTES // 2 < wire_bytes(answer) <= MAX_ANSWER_BYTES
    assert answer["links"] == links[: len(answer["links"])] and omitted == {"links": 300_000 - len(answer["links"])}

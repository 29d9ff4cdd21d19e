"""Answers sized for an assistant, through the official MCP client against the real server: compact JSON in
the text block (the same object as structuredContent), no debug fields unless asked (explain=true), short
revision ids that every tool takes back, one excerpt (or, with full_text, the exact text) per hit, listings
grouped by folder; and readable argument errors. The sizes on the Hub vault are benchmarks/bench_answer_sizes.py's."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from support.mcp_helpers import error_text, sc
from support.repo import REPO

from vaultsync import Vault
from vaultsync.server import ServeConfig, build_server
from vaultsync.times import format_time

SHORT = re.compile(r"^[0-9a-f]{8,}$")


@pytest.fixture
def sample(tmp_path: Path) -> tuple[Path, Path]:
    """The sample vault (notes/) imported, then one note edited twice (three revisions)."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    shutil.copytree(REPO / "notes", root)
    with Vault.open(db, root=root) as vault:
        vault.sync()
        for n in (1, 2):
            with (root / "Inbox.md").open("a", encoding="utf-8") as f:
                f.write(f"\nAnother line {n}.\n")
            vault.sync()
    return root, db


def compact(result: Any) -> dict[str, Any]:
    """The answer, checking that its text block is the compact JSON of its structured content."""
    data = sc(result)
    text = result.content[0].text
    assert text == json.dumps(data, ensure_ascii=False, separators=(",", ":")), text[:200]
    assert "\n  " not in text and ": null" not in text and ":null" not in text
    return data


@pytest.mark.anyio
async def test_search_answers_are_compact_grouped_and_explain_only_when_asked(sample: tuple[Path, Path]) -> None:
    root, db = sample
    async with Client(build_server(ServeConfig(db=db, root=root))) as c:
        result = await c.call_tool("search_notes", {"query": "atlas", "limit": 10})
        data = compact(result)
        text = result.content[0].text
        for word in ("signals", "keyword", "vector", "score", "chunk_id", "uri", "content_hash", "snippet"):
            assert f'"{word}"' not in text, word
        notes = data["notes"]
        assert notes and sum(len(n["hits"]) for n in notes) == 10
        assert len({n["path"] for n in notes}) == len(notes)  # one group a note
        carried = 0
        for note in notes:
            assert SHORT.match(note["revision"]) and len(note["revision"]) == 8
            disk = (root / note["path"]).read_bytes()
            assert hashlib.sha256(disk).hexdigest().startswith(note["revision"])
            assert data["times"][note["time"]].endswith("Z")  # times are said once, rows name them by index
            for heading, first, last, excerpt in note["hits"]:
                assert isinstance(heading, str) and 1 <= first <= last
                flat = " ".join(" ".join(disk.decode().splitlines()[first - 1 : last]).split())
                assert excerpt.strip("…") in flat, (excerpt, flat)  # an excerpt of the hit's own lines
                carried += len(excerpt)
        assert len(text) <= 5000 and len(text) <= 1.5 * carried, (len(text), carried)

        # the same ranking, explained: every hit in rank order with its scores
        explained = compact(await c.call_tool("search_notes", {"query": "atlas", "limit": 10, "explain": True}))
        ranks = explained["explain"]
        assert len(ranks) == 10 and all({"path", "lines", "chunk_id", "score"} <= set(r) for r in ranks)
        assert any("keyword" in r for r in ranks) and explained["notes"] == notes
        assert [n["path"] for n in notes] == list(dict.fromkeys(r["path"] for r in ranks))  # notes by best hit

        # full_text: each hit's exact text instead of the excerpt
        full = compact(await c.call_tool("search_notes", {"query": "atlas", "limit": 3, "full_text": True}))
        for note in full["notes"]:
            disk = (root / note["path"]).read_text(encoding="utf-8")
            for _, _, _, chunk in note["hits"]:
                assert chunk in disk


@pytest.mark.anyio
async def test_lists_are_terse_and_revisions_short_and_accepted_back(sample: tuple[Path, Path]) -> None:
    root, db = sample
    async with Client(build_server(ServeConfig(db=db, root=root, allow_writes=True))) as c:
        listing = await c.call_tool("list_notes", {"limit": 500})
        data = compact(listing)
        rows = [
            (folder + name, rev, data["times"][at])
            for folder, notes in data["folders"].items()
            for name, rev, at in notes
        ]
        with Vault.open(db, name=root.name, readonly=True) as vault:
            expected = vault.ls()
        assert [r[0] for r in rows] == [r.path for r in expected]
        assert all(r[1] == e.content_hash[:8] and r[2] == format_time(e.known_at) for r, e in zip(rows, expected))
        assert len(listing.content[0].text) / len(rows) <= 80, len(listing.content[0].text) / len(rows)

        history = await c.call_tool("note_history", {"path": "Inbox.md"})
        revs = compact(history)["revisions"]
        assert [r["kind"] for r in revs] == ["created", "modified", "modified"]
        assert all("path" not in r and SHORT.match(r["revision"]) for r in revs)
        assert all(re.fullmatch(r"r\d+", r["id"]) for r in revs) and len({r["id"] for r in revs}) == 3
        assert len(history.content[0].text) / len(revs) <= 112  # a row: kind, time, its id and its content hash

        # the short id is a revision id: restore_note and expected_revision take it back
        first, last = revs[0]["revision"], revs[-1]["revision"]
        restored = sc(
            await c.call_tool("restore_note", {"path": "Inbox.md", "revision": first, "expected_revision": last})
        )
        assert hashlib.sha256((root / "Inbox.md").read_bytes()).hexdigest().startswith(first)
        assert restored["path"] == "Inbox.md"
        changes = compact(await c.call_tool("list_changes", {"since": revs[0]["known_at"]}))
        assert [(x["kind"], x["path"]) for x in changes["changes"]][-1] == ("modified", "Inbox.md")
        assert changes["changes"][-1]["revision"] == first


@pytest.mark.anyio
async def test_argument_errors_name_the_argument_without_a_url(sample: tuple[Path, Path]) -> None:
    root, db = sample
    async with Client(build_server(ServeConfig(db=db, root=root, allow_writes=True))) as c:
        missing = error_text(await c.call_tool("read_note", {}))
        assert "missing argument 'path'" in missing and "http" not in missing and "pydantic" not in missing
        wrong = error_text(await c.call_tool("list_notes", {"limit": "many"}))
        assert "argument 'limit'" in wrong and "integer" in wrong and "http" not in wrong
        both = error_text(await c.call_tool("edit_note", {"new_text": "x"}))
        assert "missing argument 'path'" in both and "missing argument 'expected_revision'" in both
        bad = error_text(
            await c.call_tool("append_to_note", {"path": "Inbox.md", "text": "x", "expected_revision": "zzzz"})
        )
        assert "not a revision id" in bad and "changed since" not in bad, bad


@pytest.mark.anyio
async def test_write_tools_that_rewrite_are_marked_destructive(sample: tuple[Path, Path]) -> None:
    root, db = sample
    async with Client(build_server(ServeConfig(db=db, root=root, allow_writes=True))) as c:
        tools = {t.name: t.annotations for t in (await c.list_tools()).tools}
    assert (tools["edit_note"].destructive_hint, tools["restore_note"].destructive_hint) == (True, True)
    assert (tools["create_note"].destructive_hint, tools["append_to_note"].destructive_hint) == (False, False)

"""One model per answer: the library's results (``vaultsync.results``) are the schema, and the MCP tools' answers
take their fields from them (``vaultsync.server.models.Derived``): a fact is declared once, with its type,
default and description, and reaches every door that names it."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from pydantic import Field
from support.mcp_helpers import sc

from vaultsync import Vault
from vaultsync.results import DeletedNote, Links, Note, Stats
from vaultsync.server import ServeConfig, build_server
from vaultsync.server.models import DeletedRow, Derived, LinksResult, NoteResult, StatusResult


@pytest.fixture
def vault(tmp_path: Path) -> tuple[Path, Path]:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    (root / "Atlas.md").write_text("---\ntags: [project]\n---\n# Atlas\n\nSee [[Ana]].\n", encoding="utf-8")
    with Vault.open(db, root=root) as v:
        v.sync()
    return root, db


class Coloured(Note):
    """A library result that gained a fact."""

    colour: str = Field(default="blue", description="The note's colour")


class ColouredAnswer(Derived, fields=(Coloured, ("path", "colour", "known_at", "size", "offset"))):
    """An MCP answer naming the new fact, and one of its own."""

    offset: int = Field(description="Its own: character offset")


def test_a_fact_added_to_a_library_result_reaches_the_answer_that_names_it(vault: tuple[Path, Path]) -> None:
    root, db = vault
    with Vault.open(db, root=root) as v:
        note = v.read("Atlas.md")
    coloured = Coloured.of(note.revision, note.content)
    assert coloured.to_json()["colour"] == "blue" and "revision" not in coloured.to_json()
    schema = ColouredAnswer.model_json_schema()
    assert list(schema["properties"]) == ["path", "colour", "known_at", "size", "offset"], "in the order named"
    assert schema["properties"]["colour"] == {
        "default": "blue",
        "description": "The note's colour",
        "title": "Colour",
        "type": "string",
    }, "its type, default and description as the library declares them"
    answer = ColouredAnswer.of(coloured, offset=3)
    assert answer.model_dump() == {
        "path": "Atlas.md",
        "colour": "blue",
        "known_at": note.known_at,
        "size": note.revision.size,
        "offset": 3,
    }


def test_the_mcp_answers_share_the_library_facts_they_do_not_redeclare() -> None:
    for answer, result, own in (
        (NoteResult, Note, {"content", "tags", "links", "mime_type", "offset", "total_chars", "next_offset"}),
        (StatusResult, Stats, {"writes_enabled", "watcher", "semantic_vectors"}),
        (DeletedRow, DeletedNote, set()),
        (LinksResult, Links, set()),
    ):
        shared = set(answer.model_fields) & set(result.model_fields)
        assert shared - own, answer
        if not own:  # an answer of the library's facts alone: every one of them, in the library's order
            assert list(answer.model_fields)[: len(result.model_fields)] == list(result.model_fields), answer
        for name in shared - own:
            mine, theirs = answer.model_fields[name], result.model_fields[name]
            assert (mine.annotation, mine.description, mine.default) == (
                theirs.annotation,
                theirs.description,
                theirs.default,
            ), f"{answer.__name__}.{name}"


@pytest.mark.anyio
async def test_read_json_and_read_note_say_the_same_facts(vault: tuple[Path, Path]) -> None:
    """``read --json`` (the library's ``to_json``, in its order) and ``read_note`` (its own order, paging fields
    added, the warnings and kind left out) carry the same values for the facts they share."""
    root, db = vault
    with Vault.open(db, root=root) as v:
        note = v.read("Atlas.md").to_json()
    assert list(note) == [
        "path",
        "content",
        "known_at",
        "content_hash",
        "size",
        "title",
        "frontmatter",
        "tags",
        "aliases",
        "links",
        "warnings",
        "kind",
        "renamed_from",
        "id",
    ]
    async with Client(build_server(ServeConfig(db=db, root=root))) as c:
        served = sc(await c.call_tool("read_note", {"path": "Atlas.md"}))
    assert list(served)[:6] == ["path", "content", "known_at", "content_hash", "id", "size"]
    shared = {k: v for k, v in note.items() if k not in ("warnings", "kind")}
    assert shared == {k: served[k] for k in note if k in served}
    assert served["tags"] == ["project"] and served["links"] and served["id"] == note["id"]

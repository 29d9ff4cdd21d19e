"""Canvases and bases give chunks from their reading text; other attachments give a title and their path to search."""

from __future__ import annotations

import json

from vaultsync.parsers import parse_file


def board(nodes: list[dict], edges: list[dict] | None = None) -> str:
    return json.dumps({"nodes": nodes, "edges": edges or []})


def node(id_: str, x: int, y: int, **fields: object) -> dict:
    return {"id": id_, "x": x, "y": y, "width": 100, "height": 40, **fields}


def test_canvas_cards_in_reading_order_with_groups_links_and_edge_labels() -> None:
    text = board(
        [
            node("late", 0, 900, type="text", text="Last card"),
            node("g", -10, 90, type="group", label="Ideas", width=800, height=400),
            node("right", 400, 100, type="text", text="Right of the first #idea"),
            node("first", 0, 100, type="text", text="First card, see [[Plan]]"),
            node("file", 0, 300, type="file", file="Files/scan.pdf"),
            node("web", 0, 1000, type="link", url="https://example.com/x"),
        ],
        [{"id": "e", "fromNode": "first", "toNode": "right", "label": "leads to"}],
    )
    parsed = parse_file(text, "Boards/plan.canvas")
    reading = "".join(chunk.text for chunk in parsed.chunks)
    assert reading == (
        "Last card\n\n<https://example.com/x>\n\n## Ideas\n\nFirst card, see [[Plan]]\n\n"
        "Right of the first #idea\n\n![[Files/scan.pdf]]\n\nleads to\n\n"
    )
    assert parsed.title == "plan.canvas"
    assert [(link.target, link.embed) for link in parsed.links] == [
        ("https://example.com/x", False),
        ("Plan", False),
        ("Files/scan.pdf", True),
    ]
    assert parsed.tags == ("idea",)
    assert ("Ideas",) in {chunk.heading_path for chunk in parsed.chunks}


def test_base_views_and_filters_are_headed_chunks() -> None:
    text = (
        "filters:\n  and:\n    - file.hasTag(\"book\")\n    - 'rating > 3'\n"
        'views:\n  - type: table\n    name: Reading list\n    filters:\n      or:\n        - status == "open"\n'
        "    order: [file.name, rating]\n  - type: cards\n    name: Covers\n"
    )
    parsed = parse_file(text, "books.base")
    reading = "".join(chunk.text for chunk in parsed.chunks)
    assert reading == (
        '# Filters\n\n- file.hasTag("book")\n- rating > 3\n\n'
        '# Reading list (table)\n\n- status == "open"\n- order: file.name, rating\n\n# Covers (cards)\n\n'
    )
    assert {chunk.heading_path for chunk in parsed.chunks} == {
        ("Filters",),
        ("Reading list (table)",),
        ("Covers (cards)",),
    }


def test_broken_canvas_and_base_keep_no_text_and_say_why() -> None:
    for path, text in (("a.canvas", "{not json"), ("b.base", "views: [unclosed"), ("c.canvas", "[1, 2]")):
        parsed = parse_file(text, path)
        assert [c.text for c in parsed.chunks] == [path], "only its name is searched"
        assert len(parsed.warnings) == 1 and "its text is not searched" in parsed.warnings[0]


def test_other_attachments_have_a_title_and_their_path_as_their_one_chunk() -> None:
    for path in ("img/photo.png", "scan.pdf", "notes.txt", "a.canvas", "b.base", "Files/#draft [[x]].png"):
        parsed = parse_file("", path)
        assert parsed.title == path.rpartition("/")[2] and not parsed.warnings
        assert [(c.text, c.heading_path, c.kind) for c in parsed.chunks] == [(path, (), "name")]
        assert not parsed.links and not parsed.tags

"""Notes dense in tags, links or headings: parsed up to the per-note limits, their text kept whole.

The oracles are the generated notes themselves (how many tags, links and headings they hold, which come
first) and the text: a note's chunks joined give back its exact bytes whatever the limits did. Tokens past
a limit are never made (counted on markdown-it's own token stream).
"""

from __future__ import annotations

from pathlib import Path

from vaultsync import Vault
from vaultsync.parsers import ParseLimits, parse_note
from vaultsync.parsers.engine import MD
from vaultsync.parsers.limits import DEFAULT_LIMITS, limits_env

SMALL = ParseLimits(tags=50, links=40, headings=20, chunks=30)


def dense_tags(n: int) -> str:
    return "# Tags\n\n" + "\n".join(" ".join(f"#t{i + k:06d}" for k in range(10)) for i in range(0, n, 10)) + "\n"


def dense_links(n: int) -> str:
    lines = [f"[[n{i}]] [m{i}](M{i}.md) ![e{i}](E{i}.png)" for i in range(0, n, 3)]
    return "# Links\n\n" + "\n".join(lines) + "\n"


def dense_headings(n: int) -> str:
    return "".join(f"{'#' * (i % 6 + 1)} H{i}\ntext {i}\n" for i in range(n))


def test_a_note_dense_in_tags_keeps_the_first_ones_and_all_its_text() -> None:
    text = dense_tags(1_000)
    note = parse_note(text, "Tags.md", limits=SMALL)
    assert note.tags == tuple(f"t{i:06d}" for i in range(50))
    assert "".join(c.text for c in note.chunks) == text
    assert len(note.warnings) == 1 and "first 50 tags" in note.warnings[0]


def test_a_note_dense_in_links_keeps_the_first_ones_in_order() -> None:
    text = dense_links(300)
    note = parse_note(text, "Links.md", limits=SMALL)
    assert [link.target for link in note.links[:6]] == ["n0", "M0.md", "E0.png", "n3", "M3.md", "E3.png"]
    assert len(note.links) == 40 and note.links[-1].line == 3 + 39 // 3
    assert "".join(c.text for c in note.chunks) == text
    assert len(note.warnings) == 1 and "first 40 links" in note.warnings[0]


def test_a_note_dense_in_headings_has_bounded_sections_and_chunks() -> None:
    text = dense_headings(500)
    note = parse_note(text, "Headings.md", limits=SMALL)
    assert len(note.chunks) <= SMALL.chunks
    assert len({c.heading_path for c in note.chunks}) <= SMALL.headings + 1
    assert "".join(c.text for c in note.chunks) == text
    assert note.title == "H0"
    assert len(note.warnings) == 1 and "first 20 headings" in note.warnings[0] and "chunks of up to" in note.warnings[0]


def test_no_token_is_made_past_a_limit() -> None:
    for text, kinds in ((dense_tags(2_000), {"tag"}), (dense_links(2_000), {"wikilink", "link_open", "image"})):
        tokens = MD.parse(text, limits_env(SMALL))
        made = [c for t in tokens for c in t.children or () if c.type in kinds]
        assert len(made) <= max(SMALL.tags, SMALL.links)


def test_the_default_limits_hold_for_the_dense_notes_and_leave_ordinary_notes_alone() -> None:
    tags = parse_note(dense_tags(30_000), "Tags.md")
    assert len(tags.tags) == DEFAULT_LIMITS.tags and len(tags.warnings) == 1
    headings = parse_note(dense_headings(5_000), "Headings.md")
    assert len(headings.chunks) <= DEFAULT_LIMITS.chunks and len(headings.warnings) == 1
    ordinary = "---\ntags: [a, b]\n---\n# T\n\n## S\n\nSee [[X#Y|z]] and [m](M.md) #c\n"
    assert parse_note(ordinary, "T.md") == parse_note(ordinary, "T.md", limits=ParseLimits(10**9, 10**9, 10**9, 10**9))
    assert parse_note(ordinary, "T.md").warnings == ()


def test_a_dense_note_is_recorded_whole_searchable_with_one_warning(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    text = dense_tags(20_000) + "closing words zebrafinch\n"
    (root / "Dense.md").write_text(text, encoding="utf-8")
    (root / "Plain.md").write_text("# Plain\n\nnothing dense #plain\n", encoding="utf-8")
    with Vault.open(tmp_path / "v.db", root=root) as vault:
        summary = vault.sync()
        assert [(w.path, "10,000 tags" in w.reason) for w in summary.warnings] == [("Dense.md", True)]
        assert vault.read("Dense.md").content == text
        assert [hit["path"] for hit in vault.search("zebrafinch").hits] == ["Dense.md"]
        assert [hit["path"] for hit in vault.search("t019999").hits] == ["Dense.md"]

"""What the search index holds: every chunk with content, and no chunk that is blank or only headings.

The oracle is markdown-it itself (CommonMark + front matter): a chunk has content when parsing its text
alone yields a block other than an ATX heading, a thematic break or a front matter whose lines are all
blank, heading-like or breaks (YAML has no blocks, so the documented line rule decides there; a setext
heading's text line counts as content, as documented in ``tokenizer.has_content``).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from mdit_py_plugins.front_matter import front_matter_plugin
from support.search_truth import split_export

from vaultsync.vault import Vault

REPO = Path(__file__).resolve().parents[2]
MD = MarkdownIt("commonmark").use(front_matter_plugin)
FRONTMATTER_BARE = re.compile(r"\s*|\s{0,3}(#{1,6}(\s.*)?|(-\s*){3,}|(\*\s*){3,}|(_\s*){3,})")


def has_content(text: str) -> bool:
    for token in MD.parse(text):
        if token.level != 0 or token.nesting == -1 or token.type == "hr":
            continue
        if token.type == "heading_open" and token.markup.startswith("#"):
            continue
        if token.type == "inline":
            continue  # a heading's inline (a paragraph has its paragraph_open)
        if token.type == "front_matter":
            # YAML has no Markdown blocks: the documented line rule decides. A line that reads as a heading
            # or a thematic break (a YAML comment such as "# Title", "***") is not content; "#tag" is.
            if all(FRONTMATTER_BARE.fullmatch(line) for line in token.content.split("\n")):
                continue
        return True
    return False


def check_index(vault: Vault) -> int:
    """Every indexed chunk has content; a chunk with content is indexed. Returns how many were left out."""
    _, chunks = split_export(vault.export())
    notes: dict[str, list[dict]] = {}
    for chunk in chunks:
        notes.setdefault(chunk["path"], []).append(chunk)
    left_out = 0
    for path, items in notes.items():
        some_content = any(has_content(c["text"]) for c in items)
        for chunk in items:
            if has_content(chunk["text"]):
                assert chunk["indexed"], (path, chunk["text"])
            elif some_content or not chunk["text"].strip():
                assert not chunk["indexed"], (path, chunk["text"])
                left_out += 1
            else:  # a note of headings only keeps them, or it could not be found at all
                assert chunk["indexed"], (path, chunk["text"])
    for query in ["the", "a", "notes", "sync", "budget"]:
        for hit in vault.search(query, limit=50).hits:
            assert has_content(hit["text"]) or not any(has_content(c["text"]) for c in notes[hit["path"]]), (
                query,
                hit["text"],
            )
    return left_out


def test_no_sample_vault_chunk_in_the_index_is_blank_or_heading_only(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    shutil.copytree(REPO / "notes", root)
    with Vault.open(tmp_path / "db.sqlite", root=root) as vault:
        vault.sync()
        assert check_index(vault) > 0  # the sample vault has heading-only sections: they were left out
        # the query: words a person remembers, in order, from one note
        hits = vault.search("sync ate my notes").hits
        assert hits[0]["path"] == "Meetings/2025/2025-01-13 Atlas Kickoff.md"
        assert hits[0]["signals"]["phrase"] == 1.0
        assert "**sync ate my notes**" in hits[0]["snippet"]  # the chunk holds the query as typed: marked whole


HEADINGS = st.sampled_from(["# Title", "## Plan", "### Deep", "## Risks ##", "   ## Indented", "#### Four"])
BODY = st.sampled_from(
    [
        "Some words here.",
        "- a list item",
        "1. first",
        "> quoted",
        "```\n# not a heading\n```",
        "| a | b |\n|---|---|\n| 1 | 2 |",
        "#tag-only",
        "    indented code",
        "text ^block1",
        "<div>html</div>",
        "word " * 60,
    ]
)
BARE_LINES = st.sampled_from(["", "", "---", "***", "_ _ _", "  "])
LINE = st.one_of(HEADINGS, BODY, BARE_LINES)


@st.composite
def note(draw: st.DrawFn) -> str:
    lines = []
    if draw(st.booleans()):
        lines += ["---", *draw(st.sampled_from([[], ["tags: [x]"]])), "---"]
    lines += draw(st.lists(LINE, max_size=25))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n"]))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(notes=st.lists(note(), min_size=1, max_size=4))
@example(notes=["---\n# Title\n---\nSome words here.\n", "---\n#tag-only\n---\n## Plan\n"])
@pytest.mark.slow
def test_no_generated_chunk_in_the_index_is_blank_or_heading_only(tmp_path_factory, notes: list[str]) -> None:
    base = tmp_path_factory.mktemp("c")
    root = base / "vault"
    root.mkdir()
    for i, text in enumerate(notes):
        (root / f"n{i}.md").write_text(text, encoding="utf-8")
    with Vault.open(base / "db.sqlite", root=root) as vault:
        vault.sync()
        check_index(vault)

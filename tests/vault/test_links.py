"""Link resolution as of a time (vaultsync/links.py): Obsidian-style rules, backlinks through history."""

from __future__ import annotations

from pathlib import Path

import pytest

from vaultsync import NoteNotFound, Vault
from vaultsync.links import Resolver

NOTES = ["A/Note.md", "B/Note.md", "B/Other.md", "Deep/Sub/Thing.md", "Top.md"]


@pytest.mark.parametrize(
    ("link", "source", "expected"),
    [
        ({"target": "Top"}, "A/Note.md", "Top.md"),
        ({"target": "top"}, "A/Note.md", "Top.md"),  # case-insensitive
        ({"target": "Note"}, "B/Other.md", "B/Note.md"),  # same folder wins
        ({"target": "Note"}, "Top.md", "A/Note.md"),  # else shortest, then alphabetical
        ({"target": "B/Note"}, "A/Note.md", "B/Note.md"),  # exact vault path
        ({"target": "Sub/Thing.md"}, "Top.md", "Deep/Sub/Thing.md"),  # path tail
        ({"target": "../Top.md", "kind": "markdown"}, "A/Note.md", "Top.md"),  # relative Markdown link
        ({"target": "Other.md", "kind": "markdown"}, "B/Note.md", "B/Other.md"),
        ({"target": "", "heading": "H"}, "Top.md", "Top.md"),  # [[#H]] is the note itself
        ({"target": "Missing"}, "Top.md", None),
        ({"target": "https://example.org/Top", "kind": "markdown"}, "Top.md", None),
        ({"target": "image.png", "embed": True}, "Top.md", None),
    ],
)
def test_resolver(link: dict, source: str, expected: str | None) -> None:
    assert Resolver(NOTES).resolve({"kind": "wikilink", **link}, source) == expected


def test_backlinks_follow_time(tmp_path: Path) -> None:
    root = tmp_path / "v"
    root.mkdir()
    (root / "Target.md").write_text("# Target\n", encoding="utf-8")
    (root / "Early.md").write_text("see [[Target]]\n", encoding="utf-8")
    with Vault.open(tmp_path / "db", root=root) as vault:
        vault.sync(known_at="2024-01-01")
        (root / "Early.md").write_text("no link any more\n", encoding="utf-8")
        (root / "Late.md").write_text("see [[target#Part|t]]\n", encoding="utf-8")
        vault.sync(known_at="2024-02-01")
        then = vault.links("Target.md", as_of="2024-01-15")
        now = vault.links("Target")
        assert [b["source"] for b in then.backlinks] == ["Early.md"]
        assert [(b["source"], b["heading"]) for b in now.backlinks] == [("Late.md", "Part")]
        assert vault.links("Late.md").outgoing[0]["resolved"] == "Target.md"
        with pytest.raises(NoteNotFound):
            vault.links("Late.md", as_of="2024-01-15")

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


def test_embeds_and_links_to_attachments_resolve_to_the_file_that_existed_then(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    (root / "Assets").mkdir(parents=True)
    (root / "Note.md").write_text("# Note\n\n![[diagram.png|300]]\n\n[the scan](Assets/My%20Scan.pdf)\n")
    (root / "Assets" / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\nfirst")
    (root / "Assets" / "My Scan.pdf").write_bytes(b"%PDF-1.4\n")
    with Vault.open(tmp_path / "db" / "v.db", root=root) as vault:
        vault.sync(known_at="2024-01-01")
        (root / "Assets" / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\nsecond")
        second = vault.sync(known_at="2024-02-01").batch_id
        (root / "Assets" / "diagram.png").unlink()
        vault.sync(known_at="2024-03-01")

        def outgoing(as_of: str | None) -> list[tuple]:
            links = vault.links("Note.md", as_of=as_of).outgoing
            return [(o["target"], o["resolved"], o.get("mime_type"), o.get("revision")) for o in links]

        scan = ("Assets/My Scan.pdf", "Assets/My Scan.pdf", "application/pdf", "r1")
        assert outgoing("2024-01-15") == [("diagram.png", "Assets/diagram.png", "image/png", "r1"), scan]
        assert outgoing("2024-02-15") == [("diagram.png", "Assets/diagram.png", "image/png", f"r{second}"), scan]
        assert outgoing(None) == [("diagram.png", None, None, None), scan], "deleted since: unresolved now"
        backlinks = vault.links("Assets/My Scan.pdf", as_of="2024-01-15").backlinks
        assert [(b["source"], b["target"]) for b in backlinks] == [("Note.md", "Assets/My Scan.pdf")]

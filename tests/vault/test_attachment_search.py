"""A PDF's text and any attachment's name are searched exactly as of each batch, on both engines; a PDF that cannot be
read is recorded all the same, its bytes kept, with a warning; a binary file's diff says how its bytes changed."""

from __future__ import annotations

import json
from pathlib import Path

from support.pdfs import pdf

from vaultsync import Vault
from vaultsync.disk import attachments


def found(vault: Vault, words: str, when: int | None = None) -> set[str]:
    return {hit["path"] for hit in vault.search(words, as_of=when, mode="keyword", limit=50).hits}


def test_pdf_text_and_file_names_are_found_only_while_they_held_them(tmp_path: Path, db: str) -> None:
    root = tmp_path / "vault"
    (root / "Scans").mkdir(parents=True)
    (root / "note.md").write_text("# Note\n\nnothing here\n", encoding="utf-8")
    scan, photo = root / "Scans" / "invoice.pdf", root / "Scans" / "whiteboard.png"
    moments: list[int] = []
    with Vault.open(db, root=root, name="v") as vault:
        scan.write_bytes(pdf(["Invoice from Quokka Limited", "total due in marzipan"]))
        photo.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 10)
        moments.append(vault.sync().known_at)
        scan.write_bytes(pdf(["Receipt from Obelisk Trading"]))
        photo.rename(root / "Scans" / "sketch-of-the-tundra.png")
        moments.append(vault.sync().known_at)
        scan.unlink()
        moments.append(vault.sync().known_at)
        first, second, third = moments

        assert found(vault, "quokka", first) == {"Scans/invoice.pdf"}
        assert found(vault, "marzipan", first) == {"Scans/invoice.pdf"}, "every page is searched"
        assert found(vault, "quokka", second) == set() and found(vault, "obelisk", first) == set()
        assert found(vault, "obelisk", second) == {"Scans/invoice.pdf"}
        assert found(vault, "obelisk", third) == set() and found(vault, "obelisk") == set()
        assert found(vault, "invoice", third) == set(), "a deleted PDF is not found by its name either"

        assert found(vault, "whiteboard", first) == {"Scans/whiteboard.png"}
        assert found(vault, "whiteboard", second) == set(), "renamed since"
        assert found(vault, "tundra", second) == found(vault, "tundra") == {"Scans/sketch-of-the-tundra.png"}
        assert found(vault, "tundra", first) == set()

        hit = vault.search("obelisk", as_of=second, mode="keyword").hits[0]
        assert hit["heading_path"] == ["Page 1"], hit
        assert vault.read("Scans/invoice.pdf", as_of=second).content == "# Page 1\n\nReceipt from Obelisk Trading\n\n"
        assert vault.read("Scans/whiteboard.png", as_of=first).content == "", "an image has no text, only a name"


def test_a_pdf_that_cannot_be_read_is_recorded_with_its_bytes_and_a_warning(tmp_path: Path, db: str) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    broken = pdf(["the whole text"])[:300]
    (root / "broken.pdf").write_bytes(broken)
    with Vault.open(db, root=root, name="v") as vault:
        summary = vault.sync()
        assert not summary.errors and summary.added == 1
        assert [(w.path, "not a readable PDF" in w.reason) for w in summary.warnings] == [("broken.pdf", True)]
        pieces: list[bytes] = []
        vault.read_bytes("broken.pdf", pieces.append)
        assert b"".join(pieces) == broken
        assert found(vault, "broken") == {"broken.pdf"}, "found by its name"


def test_diff_of_a_binary_file_says_how_its_bytes_changed(tmp_path: Path, cli) -> None:
    db = str(tmp_path / "db" / "vaultsync.db")
    root = tmp_path / "vault"
    root.mkdir()
    png, scan = root / "photo.png", root / "scan.pdf"
    old_png, new_png = b"\x89PNG\r\n\x1a\n" + b"a" * 1500, b"\x89PNG\r\n\x1a\n" + b"b" * 2500
    old_pdf, new_pdf = pdf(["total due: 10"]), pdf(["total due: 12"])
    with Vault.open(db, root=root, name="v") as vault:
        png.write_bytes(old_png)
        scan.write_bytes(old_pdf)
        vault.sync()
        png.write_bytes(new_png)
        scan.write_bytes(new_pdf)
        vault.sync()
        png.unlink()
        vault.sync()
    hashes = [attachments.digest(iter([data]))[0][:12] for data in (old_png, new_png, old_pdf, new_pdf)]

    done = cli("diff", "photo.png", "--from", "r1", "--to", "r2", db=db)
    assert done.returncode == 0 and done.stdout == (
        f"Binary file photo.png changed (1,508 → 2,508 bytes, sha256 {hashes[0]} → {hashes[1]})\n"
    ), done.stdout + done.stderr
    done = cli("diff", "photo.png", "--from", "r2", "--to", "r3", db=db)
    assert done.stdout == f"Binary file photo.png changed (2,508 → absent bytes, sha256 {hashes[1]})\n"
    done = cli("diff", "photo.png", "--from", "r1", "--to", "r1", db=db)
    assert done.stdout == "" and "no change" in done.stderr

    done = cli("diff", "scan.pdf", "--from", "r1", "--to", "r2", "--json", db=db)
    text = json.loads(done.stdout)["diff"]
    first, _, rest = text.partition("\n")
    assert (
        first
        == f"Binary file scan.pdf changed ({len(old_pdf):,} → {len(new_pdf):,} bytes, sha256 {hashes[2]} → {hashes[3]})"
    )
    assert "-total due: 10\n+total due: 12\n" in rest, "a PDF's text follows, as a diff"


def test_the_text_dictionary_is_never_trained_on_a_pdf_bytes(tmp_path: Path) -> None:
    """The first batch's texts train the database's compression dictionary: a PDF is handed to the parser as its
    bytes, which are not text the store keeps."""
    root = tmp_path / "vault"
    root.mkdir()
    for i in range(40):
        (root / f"a-report{i}.pdf").write_bytes(pdf([f"quarterly report {i} " * 200]))
        (root / f"note{i}.md").write_text(f"# Note {i}\n\n" + "the harbour lantern keeper " * 120, encoding="utf-8")
    with Vault.open(tmp_path / "db" / "v.db", root=root, name="v") as vault:
        vault.sync()
        with vault._view() as view:
            trained = view._con.execute("SELECT body FROM dictionaries").fetchall()
    assert len(trained) == 1 and b"harbour" in trained[0][0]
    assert b"%PDF" not in trained[0][0] and b"endobj" not in trained[0][0]

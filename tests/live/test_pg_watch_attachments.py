"""The watcher records attachments on PostgreSQL as on SQLite: an image's bytes as each save left them, a PDF's text
searchable as of each save, a move as a rename, a deletion; the stored bytes read back exactly."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from support.pdfs import pdf
from support.watch_helpers import wait_until

from vaultsync import Vault
from vaultsync.errors import NoteNotFound
from vaultsync.live.watcher import Watcher

pgserver = pytest.importorskip("support.pgserver")

pytestmark = [pytest.mark.pg, pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")]


def test_the_watcher_records_attachments_on_postgresql(tmp_path: Path) -> None:
    db = pgserver.fresh_or_skip("watch_attachments")
    root = tmp_path / "vault"
    root.mkdir()
    (root / "note.md").write_text("# n\n\n![[pic.png]] ![[scan.pdf]]\n", encoding="utf-8")
    rng = random.Random(9)
    first, second = b"\x89PNG\r\n\x1a\n" + rng.randbytes(1_500_000), b"\x89PNG\r\n\x1a\n" + rng.randbytes(200_000)

    def bytes_now(path: str) -> bytes | None:
        pieces: list[bytes] = []
        try:
            vault.read_bytes(path, pieces.append)
        except NoteNotFound:
            return None
        return b"".join(pieces)

    def found(word: str, when: int | None = None) -> set[str]:
        return {hit["path"] for hit in vault.search(word, as_of=when, mode="keyword").hits}

    with Vault.open(db, root=root, name="v") as vault, Watcher(vault, step_ms=50, debounce_ms=500):
        (root / "pic.png").write_bytes(first)
        (root / "scan.pdf").write_bytes(pdf(["Invoice from Quokka Limited"]))
        wait_until(lambda: bytes_now("pic.png") == first and found("quokka") == {"scan.pdf"}, what="the new files")
        was = vault.history("scan.pdf")[-1].known_at
        (root / "pic.png").write_bytes(second)
        (root / "scan.pdf").write_bytes(pdf(["Receipt from Obelisk Trading"]))
        wait_until(lambda: bytes_now("pic.png") == second and found("obelisk") == {"scan.pdf"}, what="the saves")
        assert found("quokka") == set() and found("quokka", was) == {"scan.pdf"}
        (root / "Media").mkdir()
        (root / "pic.png").rename(root / "Media" / "pic.png")
        wait_until(lambda: bytes_now("Media/pic.png") == second, what="the moved image")
        assert vault.history("Media/pic.png")[-1].renamed_from == "pic.png"
        (root / "Media" / "pic.png").unlink()
        wait_until(lambda: sorted(r.path for r in vault.ls()) == ["note.md", "scan.pdf"], what="the deleted image")
        kinds = [r.kind for r in vault.history("Media/pic.png")]
        pieces: list[bytes] = []
        vault.read_bytes("pic.png", pieces.append, as_of=was)
        assert b"".join(pieces) == first
        assert vault.check() == []
    assert kinds[0] == "created" and kinds[-2:] == ["renamed", "deleted"] and "modified" in kinds

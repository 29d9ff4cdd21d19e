"""Attachments (images, PDFs, canvases, bases, any file of the vault) are recorded, read and restored byte for byte.

A vault written by the test with images, PDFs (made by hand: a minimal valid PDF), canvases and bases is changed
over 50 batches (edits, re-saves of the same bytes, renames, deletions, copies); after each batch the test keeps
what the folder held. Then every file at every batch is read back as of that batch's time, exactly, on SQLite and
PostgreSQL, the listing as of each batch is the folder's, whole-folder restores give back the folder as it was,
and each distinct content is stored once.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.pdfs import pdf

from vaultsync import Vault
from vaultsync.disk import attachments
from vaultsync.disk.attachments import Body, Changed, bytes_pieces
from vaultsync.dsn import is_dsn
from vaultsync.errors import NoteNotFound, StoreError
from vaultsync.store import files
from vaultsync.vault import lookback, restore

BATCHES = 50
WORDS = ["zeppelin", "quokka", "marzipan", "obelisk", "tundra", "saffron", "gondola"]
"""Words a canvas card holds at some batches: searched for as of every batch."""


def canvas(cards: list[str]) -> bytes:
    nodes = [
        {"id": f"n{i}", "type": "text", "text": text, "x": i * 300, "y": 0, "width": 250, "height": 60}
        for i, text in enumerate(cards)
    ]
    nodes.append({"id": "f", "type": "file", "file": "Notes/plan.md", "x": 0, "y": 200, "width": 250, "height": 60})
    return json.dumps({"nodes": nodes, "edges": []}, indent="\t").encode("utf-8")


def base(name: str) -> bytes:
    return f'filters:\n  and:\n    - file.hasTag("{name}")\nviews:\n  - type: table\n    name: {name}\n'.encode()


def image(rng: random.Random, size: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + rng.randbytes(size)


def state(root: Path) -> dict[str, bytes]:
    """Every recorded file of the folder (dot-places left out), by vault-relative path."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    }


def change(root: Path, rng: random.Random, step: int) -> None:
    """One batch's worth of changes: a few of edits, re-saves, renames, deletions, copies and new files."""
    here = sorted(state(root))
    for _ in range(rng.randint(1, 3)):
        pick = rng.choice(here) if here else None
        roll = rng.random()
        if pick is not None and roll < 0.2 and pick in state(root):  # re-saved with the same bytes
            data = (root / pick).read_bytes()
            (root / pick).write_bytes(data)
        elif pick is not None and roll < 0.35 and (root / pick).exists():  # renamed
            target = root / "Moved" / f"{step}-{Path(pick).name}"
            target.parent.mkdir(exist_ok=True)
            (root / pick).rename(target)
        elif pick is not None and roll < 0.45 and (root / pick).exists():  # deleted
            (root / pick).unlink()
        elif pick is not None and roll < 0.55 and (root / pick).exists():  # copied
            (root / f"copy-{step}-{Path(pick).name}").write_bytes((root / pick).read_bytes())
        else:
            kind = rng.choice(["png", "pdf", "canvas", "base", "md"])
            name = f"Files/{kind}-{rng.randint(0, 6)}.{kind}"
            (root / name).parent.mkdir(exist_ok=True)
            (root / name).write_bytes(
                {
                    "png": lambda: image(rng, rng.randint(10, 3000)),
                    "pdf": lambda: pdf([f"page {step}"]),
                    "canvas": lambda: canvas([f"idea {WORDS[step % len(WORDS)]}", f"card {rng.randint(0, 9)}"]),
                    "base": lambda: base(f"view{step}"),
                    "md": lambda: f"# Note {step}\n\n![[png-{step % 7}.png]]\n".encode(),
                }[kind]()
            )


@pytest.fixture
def recorded(db: str, tmp_path: Path) -> Iterator[tuple[Vault, Path, list[tuple[int, dict[str, bytes]]]]]:
    root = tmp_path / "vault"
    (root / "Files").mkdir(parents=True)
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "app.json").write_text("{}")
    rng = random.Random(51)
    (root / "Files" / "cover.png").write_bytes(image(rng, 2_500_000))  # more than two stored pieces
    (root / "Files" / "scan.pdf").write_bytes(pdf(["first scan"]))
    (root / "Files" / "board.canvas").write_bytes(canvas(["first idea"]))
    (root / "Files" / "tasks.base").write_bytes(base("tasks"))
    (root / "plan.md").write_text("# Plan\n\n![[cover.png]]\n", encoding="utf-8")
    seen: list[tuple[int, dict[str, bytes]]] = []
    with Vault.open(db, root=root, name="v") as vault:
        for step in range(BATCHES):
            if step:
                change(root, rng, step)
            summary = vault.sync(allow_mass_delete=True)
            assert not summary.errors, summary.errors
            if summary.batch_id is not None:
                seen.append((summary.known_at, state(root)))
        yield vault, root, seen


@pytest.mark.slow
@pytest.mark.pg
def test_fifty_batches_read_back_exactly_are_stored_once_and_restore(recorded, db: str, tmp_path: Path) -> None:
    """One history (built once per engine), checked: reads, storage, search, a copy into the other engine, restores."""
    every_file_at_every_batch_reads_back_exactly(recorded)
    vault, _, seen = recorded
    assert vault.check() == [], "every stored content gives back its hash"
    other = copied_to_the_other_engine(db, tmp_path)
    with Vault.open(other, name="v", readonly=True) as copy:
        every_file_at_every_batch_reads_back_exactly((copy, None, seen))
        canvas_text_is_found_exactly_while_a_canvas_held_it((copy, None, seen))
        assert copy.check() == []
    each_distinct_content_is_stored_once(recorded)
    canvas_text_is_found_exactly_while_a_canvas_held_it(recorded)
    for index, (known_at, files_then) in enumerate(seen[:: len(seen) // 5]):  # checkouts of five moments
        done = lookback.checkout(vault, tmp_path / f"checkout{index}", as_of=known_at)
        assert state(tmp_path / f"checkout{index}") == files_then and done.notes == len(files_then)
    folder_restores_give_back_the_folder_as_it_was(recorded)


def copied_to_the_other_engine(db: str, tmp_path: Path) -> str:
    """``vaultsync copy`` of ``db`` into a database of the other engine: its connection string or file."""
    from vaultsync.store.transfer import copy_databases

    if is_dsn(db):
        other = str(tmp_path / "copy.db")
    else:
        pgserver = pytest.importorskip("support.pgserver")
        try:
            other = pgserver.shared().fresh("attachcopy")
        except pgserver.Unavailable as exc:
            pytest.skip(str(exc))
    copy_databases(db, other)
    return other


def every_file_at_every_batch_reads_back_exactly(recorded) -> None:
    vault, _, seen = recorded
    assert len(seen) > BATCHES * 0.8, "nearly every step changed something"
    kinds = {Path(path).suffix for _, files_then in seen for path in files_then}
    assert {".png", ".pdf", ".canvas", ".base", ".md"} <= kinds
    for known_at, files_then in seen:
        assert [r.path for r in vault.ls(as_of=known_at)] == sorted(files_then)
        assert [r.path for r in vault.ls(as_of=known_at, attachments=False)] == sorted(
            p for p in files_then if p.endswith(".md")
        )
        for path, data in files_then.items():
            pieces: list[bytes] = []
            rev = vault.read_bytes(path, pieces.append, as_of=known_at)
            assert b"".join(pieces) == data, f"{path} as of batch at {known_at}"
            assert rev.size == len(data)


def each_distinct_content_is_stored_once(recorded) -> None:
    vault, _, seen = recorded
    distinct = {attachments.digest(iter([data]))[0] for _, then in seen for p, data in then.items() if p[-3:] != ".md"}
    with vault._view() as view:
        stored = view._con.execute("SELECT count(*), sum(size) FROM attachment_bodies").fetchone()
    assert stored[0] == len(distinct)
    renamed = [r for r in vault.changes(since=seen[0][0]) if r.kind == "renamed" and r.path.startswith("Moved/")]
    assert renamed, "a moved attachment is a rename"


def canvas_text_is_found_exactly_while_a_canvas_held_it(recorded) -> None:
    vault, _, seen = recorded
    found_any = 0
    for known_at, files_then in seen:
        for word in WORDS:
            holding = {p for p, data in files_then.items() if p.endswith(".canvas") and word.encode() in data}
            hits = vault.search(word, as_of=known_at, mode="keyword", limit=100).hits
            assert {hit["path"] for hit in hits} == holding, (word, known_at)
            found_any += bool(holding)
    assert found_any > 10, "the words were held by canvases at many batches"


def folder_restores_give_back_the_folder_as_it_was(recorded) -> None:
    """Back through the last ten batches one at a time (each a small step: a restore deleting most files at once
    is held back as a mass deletion, for attachments as for notes), then forward to the last: every file then holds
    its bytes then."""
    vault, root, seen = recorded
    for known_at, files_then in [*seen[-2:-11:-1], seen[-1]]:
        steps = restore.plan_folder(vault, "", as_of=known_at, delete_newer=True)
        restore.apply(vault, steps, source="restore", detail="test")
        now = state(root)
        assert {path: now.get(path) for path in files_then} == files_then
        # what else is there was moved here since, and is kept on purpose (as a note moved here is)
        assert set(now) - set(files_then) <= {step.path for step in steps if step.kept}


def test_a_deleted_image_is_restored_and_history_covers_it(tmp_path: Path, db: str, cli) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    data = image(random.Random(1), 1_500_000)
    (root / "photo.png").write_bytes(data)
    with Vault.open(db, root=root, name="v") as vault:
        first = vault.sync()
        (root / "photo.png").unlink()
        vault.sync()
        assert [r.kind for r in vault.history("photo.png")] == ["created", "deleted"]
        assert vault.ls() == []
        restore.apply(
            vault, [restore.plan_note(vault, "photo.png", as_of=first.known_at)], source="restore", detail="test"
        )
        assert (root / "photo.png").read_bytes() == data
        assert [r.kind for r in vault.history("photo.png")] == ["created", "deleted", "created"]
    out = tmp_path / "out.png"
    done = cli("read", "photo.png", "--output", str(out), db=db)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == data


def test_the_same_bytes_at_a_new_path_after_a_deletion_are_a_rename(tmp_path: Path, db: str) -> None:
    root = tmp_path / "vault"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.pdf").write_bytes(pdf(["moved"]))
    with Vault.open(db, root=root, name="v") as vault:
        vault.sync()
        (root / "b").mkdir()
        (root / "a" / "x.pdf").rename(root / "b" / "y.pdf")
        vault.sync(["a/x.pdf", "b/y.pdf"])
        assert vault.history("b/y.pdf")[-1].renamed_from == "a/x.pdf"


def test_a_file_over_the_size_limit_is_recorded_by_hash_and_size(tmp_path: Path, db: str, monkeypatch, cli) -> None:
    monkeypatch.setenv("VAULTSYNC_MAX_ATTACHMENT_MB", "0.01")  # 10 KiB
    root = tmp_path / "vault"
    root.mkdir()
    big = random.Random(2).randbytes(50_000)
    (root / "video.mp4").write_bytes(big)
    (root / "small.png").write_bytes(b"tiny")
    with Vault.open(db, root=root, name="v") as vault:
        summary = vault.sync()
        assert [w.path for w in summary.warnings] == ["video.mp4"]
        assert "recorded by hash and size only" in summary.warnings[0].reason
        rev = vault.history("video.mp4")[-1]
        assert rev.size == len(big) and rev.content_hash == attachments.digest(iter([big]))[0]
        with pytest.raises(StoreError, match="by hash and size only"):
            vault.read_bytes("video.mp4", lambda piece: None)
    done = cli("read", "video.mp4", db=db)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "not kept" in done.stderr


def test_ignored_and_temporary_files_are_not_recorded(tmp_path: Path, db: str) -> None:
    root = tmp_path / "vault"
    (root / "private").mkdir(parents=True)
    (root / "Clips").mkdir()
    (root / ".vaultsyncignore").write_text("*.mp4\nprivate/\n!Clips/keep.mp4\n", encoding="utf-8")
    for name in ("a.mp4", "Clips/keep.mp4", "Clips/other.mp4", "private/key.png", "note.md~", "4913", "x.png"):
        (root / name).write_bytes(b"data")
    (root / "note.md").write_text("# n\n", encoding="utf-8")
    with Vault.open(db, root=root, name="v") as vault:
        vault.sync()
        assert [r.path for r in vault.ls()] == ["Clips/keep.mp4", "note.md", "x.png"]


def test_bytes_that_change_while_stored_store_nothing(tmp_path: Path, open_engine) -> None:
    store = open_engine(tmp_path / "db.sqlite", search=False)
    try:
        data = b"x" * (attachments.PIECE + 10)
        wrong = Body(attachments.digest(iter([b"other"]))[0], len(data), bytes_pieces(data))
        vault_id = store.ensure_vault("v", str(tmp_path))
        with pytest.raises(Changed), store.batch(vault_id) as batch:
            batch.store_body(wrong)
        with store.batch(vault_id) as batch:
            with pytest.raises(Changed):
                batch.store_body(wrong)
            right = Body(attachments.digest(iter([data]))[0], len(data), bytes_pieces(data))
            batch.store_body(right)
        with store.db.atomic() as con:
            assert files.info(con, wrong.hash) is None
            assert b"".join(files.pieces(con, right.hash)) == data
    finally:
        store.close()


def test_git_history_records_binary_blobs_streaming_the_large_ones(tmp_path: Path, db: str, monkeypatch) -> None:
    from vaultsync import gitimport

    monkeypatch.setattr(gitimport, "INLINE_BYTES", 1000)  # every blob over 1000 bytes is streamed from git
    root = tmp_path / "vault"
    root.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}

    def git(*args: str, when: str = "2024-01-01T00:00:00Z") -> None:
        subprocess.run(
            ["git", *args],
            cwd=root,
            check=True,
            capture_output=True,
            env={**env, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "PATH": "/usr/bin:/bin"},
        )

    git("init", "-q")
    rng = random.Random(3)
    versions = [image(rng, 300_000), image(rng, 500)]
    (root / "pic.png").write_bytes(versions[0])
    (root / "doc.pdf").write_bytes(pdf(["one"]))
    (root / "n.md").write_text("# n\n", encoding="utf-8")
    git("add", "-A")
    git("commit", "-q", "-m", "one", when="2024-01-01T00:00:00Z")
    (root / "pic.png").write_bytes(versions[1])
    (root / "doc.pdf").unlink()
    git("add", "-A")
    git("commit", "-q", "-m", "two", when="2024-02-01T00:00:00Z")
    with Vault.open(db, root=root, name="v") as vault:
        vault.import_git()
        for when, expected in (("2024-01-15", versions[0]), ("2024-02-15", versions[1])):
            pieces: list[bytes] = []
            vault.read_bytes("pic.png", pieces.append, as_of=when)
            assert b"".join(pieces) == expected
        assert [r.path for r in vault.ls(as_of="2024-01-15")] == ["doc.pdf", "n.md", "pic.png"]
        assert [r.path for r in vault.ls(as_of="2024-02-15")] == ["n.md", "pic.png"]


def test_the_watcher_records_attachments_as_they_change(tmp_path: Path) -> None:
    from support.watch_helpers import wait_until

    from vaultsync.live.watcher import Watcher

    root = tmp_path / "vault"
    root.mkdir()
    (root / "note.md").write_text("# n\n\n![[pic.png]]\n", encoding="utf-8")
    first, second = image(random.Random(4), 200_000), image(random.Random(5), 300_000)

    def bytes_now(path: str) -> bytes | None:
        pieces: list[bytes] = []
        try:
            vault.read_bytes(path, pieces.append)
        except NoteNotFound:
            return None
        return b"".join(pieces)

    with Vault.open(tmp_path / "db" / "v.db", root=root) as vault, Watcher(vault, step_ms=50, debounce_ms=500):
        (root / "pic.png").write_bytes(first)
        (root / "pic.png~").write_bytes(first)  # an editor's backup: never recorded
        wait_until(lambda: bytes_now("pic.png") == first, what="the new image")
        (root / "pic.png").write_bytes(second)
        wait_until(lambda: bytes_now("pic.png") == second, what="the image saved again")
        (root / "Media").mkdir()
        (root / "pic.png").rename(root / "Media" / "pic.png")
        wait_until(lambda: bytes_now("Media/pic.png") == second, what="the moved image")
        assert vault.history("Media/pic.png")[-1].renamed_from == "pic.png"
        (root / "Media" / "pic.png").unlink()
        wait_until(lambda: [r.path for r in vault.ls()] == ["note.md"], what="the deleted image")
        kinds = [r.kind for r in vault.history("Media/pic.png")]
    assert kinds[0] == "created" and kinds[-2:] == ["renamed", "deleted"] and "modified" in kinds


@pytest.mark.anyio
async def test_an_assistant_reads_a_canvas_text_and_an_image_facts_never_its_bytes(tmp_path: Path) -> None:
    from mcp import Client
    from support.mcp_helpers import sc

    from vaultsync.server import ServeConfig, build_server

    root = tmp_path / "vault"
    root.mkdir()
    (root / "board.canvas").write_bytes(canvas(["first idea", "second idea"]))
    photo = image(random.Random(6), 400_000)
    (root / "photo.jpg").write_bytes(photo)
    (root / "scan.pdf").write_bytes(pdf(["the scanned words"]))
    with Vault.open(tmp_path / "db" / "v.db", root=root) as vault:
        vault.sync()
        async with Client(build_server(ServeConfig.of(vault))) as c:
            board = sc(await c.call_tool("read_note", {"path": "board.canvas"}))
            assert board["content"] == "first idea\n\nsecond idea\n\n![[Notes/plan.md]]\n\n"  # reading order
            assert board["mime_type"] == "application/json"
            assert board["size"] == len(canvas(["first idea", "second idea"]))
            shown = await c.call_tool("read_note", {"path": "photo.jpg"})
            facts = sc(shown)
            assert facts["mime_type"] == "image/jpeg" and facts["size"] == len(photo) and facts["content"] == ""
            assert len(json.dumps(facts)) < 2000, "an image's bytes are never sent"
            listed = sc(await c.call_tool("list_notes", {}))
            assert "photo.jpg" in json.dumps(listed) and "board.canvas" in json.dumps(listed)
            scan = sc(await c.call_tool("read_note", {"path": "scan.pdf"}))
            assert scan["mime_type"] == "application/pdf" and scan["content"] == "# Page 1\n\nthe scanned words\n\n"
            scan = sc(await c.call_tool("read_attachment", {"path": "scan.pdf"}))
            assert scan["text"] == "# Page 1\n\nthe scanned words\n\n" and scan["uri"].endswith("/scan.pdf")
            assert sc(await c.call_tool("read_attachment", {"path": "photo.jpg"})).get("text") is None


def test_a_purged_image_leaves_no_bytes_but_its_twin_keeps_its_own(tmp_path: Path, db: str) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    secret, shared = image(random.Random(7), 100_000), image(random.Random(8), 100_000)
    (root / "secret.png").write_bytes(secret)
    (root / "a.png").write_bytes(shared)
    (root / "b.png").write_bytes(shared)
    (root / "board.canvas").write_bytes(canvas(["the launch code"]))
    with Vault.open(db, root=root, name="v") as vault:
        vault.sync()
        (root / "secret.png").unlink()
        (root / "a.png").unlink()
        vault.sync()
        vault.purge(note="secret.png")
        vault.purge(note="a.png")
        vault.purge(texts=["launch"])  # a text purge leaves attachments (a canvas's bytes) whole
        with vault._view() as view:
            stored = {row[0] for row in view._con.execute("SELECT hash FROM attachment_bodies").fetchall()}
        digest_of = {
            name: attachments.digest(iter([data]))[0] for name, data in (("secret", secret), ("shared", shared))
        }
        assert digest_of["secret"] not in stored and digest_of["shared"] in stored
        assert vault.check() == []
        pieces: list[bytes] = []
        vault.read_bytes("b.png", pieces.append)
        assert b"".join(pieces) == shared
        pieces = []
        vault.read_bytes("board.canvas", pieces.append)
        assert b"".join(pieces) == canvas(["the launch code"])

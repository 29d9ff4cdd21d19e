"""An append writes in place (``vaultsync.disk.appendfs``): what another program writes to the note, through
a descriptor it opened before, during or after the append, is never lost.

The old append swapped a temp file in for the note; a program holding the note open (an editor, a
shell's ``>>``) then wrote into the swapped-out file, which the append deleted. The saves between an
append's read, its last check and its write are in tests/disk/test_safe_writes.py; these pin what
happens after the write, and what the append refuses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from support.mcp_helpers import sc

from vaultsync import Vault
from vaultsync.disk import appendfs
from vaultsync.disk.edit import append_file
from vaultsync.errors import PathError, RevisionMismatch
from vaultsync.revisions import expecting, revision_of
from vaultsync.server import ServeConfig, build_server


@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow", "no-exchange")
def test_a_program_holding_the_note_open_keeps_what_it_writes_after_the_append(tmp_path: Path) -> None:
    note = tmp_path / "Daily.md"
    note.write_text("# Daily\n", encoding="utf-8")
    inode = note.stat().st_ino
    held = os.open(note, os.O_WRONLY | os.O_APPEND)  # a shell's >>, an editor holding the note open
    try:
        os.write(held, b"typed before\n")
        append_file(str(tmp_path), "Daily.md", "from the assistant\n")
        os.write(held, b"typed after\n")  # the append has returned; this descriptor still writes
    finally:
        os.close(held)
    assert note.read_text(encoding="utf-8") == "# Daily\ntyped before\nfrom the assistant\ntyped after\n"
    assert note.stat().st_ino == inode, "the note is still the same file"
    assert [p.name for p in tmp_path.iterdir()] == ["Daily.md"]


def test_what_a_held_descriptor_writes_after_an_append_is_recorded_by_the_next_sync(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    (root / "Log.md").write_text("# Log\n", encoding="utf-8")
    with Vault.open(tmp_path / "db", root=root) as vault:
        vault.sync()
        held = os.open(root / "Log.md", os.O_WRONLY | os.O_APPEND)
        try:
            vault.append_to_note("Log.md", "- from the assistant\n")
            assert vault.read("Log.md").content == "# Log\n- from the assistant\n"
            os.write(held, b"- typed\n")
        finally:
            os.close(held)
        vault.sync()
        assert vault.read("Log.md").content == "# Log\n- from the assistant\n- typed\n"


@pytest.mark.anyio
async def test_a_program_holding_the_note_open_through_a_burst_of_appends_keeps_every_line(tmp_path: Path) -> None:
    """Against a real server: a program opened the note (``exec 3>>Journal.md``) before 20 appends
    and writes through that descriptor while they are in flight and after: every line of both is
    on disk and in the last recorded revision."""
    root = tmp_path / "vault"
    root.mkdir()
    note = root / "Journal.md"
    note.write_text("# Journal\n", encoding="utf-8")
    lines = [f"- assistant {i:02d}" for i in range(20)]
    typed = [f"- typed {i}" for i in range(5)]
    held = os.open(note, os.O_WRONLY | os.O_APPEND)
    try:
        async with Client(build_server(ServeConfig(db=tmp_path / "db", root=root, allow_writes=True))) as c:

            async def append(line: str) -> None:
                sc(await c.call_tool("append_to_note", {"path": "Journal.md", "text": line}))

            async def program() -> None:
                for text in typed[:-1]:
                    await anyio.sleep(0.05)
                    os.write(held, f"\n{text}\n".encode())

            async with anyio.create_task_group() as tg:
                tg.start_soon(program)
                for line in lines:
                    tg.start_soon(append, line)
            os.write(held, f"\n{typed[-1]}\n".encode())  # after every append returned
            last = sc(await c.call_tool("append_to_note", {"path": "Journal.md", "text": "- last"}))
            stored = sc(await c.call_tool("read_note", {"path": "Journal.md"}))["content"]
    finally:
        os.close(held)
    on_disk = note.read_text(encoding="utf-8")
    body = [line for line in on_disk.splitlines()[1:] if line]
    assert sorted(line for line in body if "assistant" in line) == lines
    assert [line for line in body if "typed" in line] == typed, "every line the program wrote is there"
    assert body[-1] == "- last" and stored == on_disk and last["ingested"]


def _save_from(copy: str):
    """An editor saving ``copy`` (what it read before) plus a line of its own, by renaming a new file over the note."""

    def save(note: Path) -> None:
        tmp = note.with_name(".editor.tmp")
        tmp.write_text(copy + "typed in the editor\n", encoding="utf-8")
        os.replace(tmp, note)

    return save


def _rewrite_in_place_from(copy: str):
    """An editor saving ``copy`` plus its line in place: truncate, then write (vim's backupcopy=yes)."""

    def save(note: Path) -> None:
        with open(note, "w", encoding="utf-8") as handle:
            handle.write(copy + "typed in the editor\n")

    return save


@pytest.mark.parametrize("saver", [_save_from, _rewrite_in_place_from])
@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow")
def test_a_save_right_after_the_write_from_an_older_copy_gets_the_text_appended_again(
    tmp_path: Path, saver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The editor's save lands after the append wrote and before it checked the note by name, from a
    copy read before the append: the save wins, and the append adds its text to the note as saved."""
    note = tmp_path / "Daily.md"
    note.write_text("# Daily\n", encoding="utf-8")
    real, saves = appendfs._landed, []

    def editor_saves_then_landed(*args: object) -> None:
        if not saves:
            saver("# Daily\n")(note)
            saves.append(1)
        real(*args)

    monkeypatch.setattr(appendfs, "_landed", editor_saves_then_landed)
    append_file(str(tmp_path), "Daily.md", "from the assistant")
    assert saves and note.read_text(encoding="utf-8") == "# Daily\ntyped in the editor\nfrom the assistant"
    assert [p.name for p in tmp_path.iterdir()] == ["Daily.md"]


@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow")
def test_a_save_right_after_the_write_that_kept_the_text_is_not_appended_to_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = tmp_path / "Daily.md"
    note.write_text("# Daily\n", encoding="utf-8")
    real, saves = appendfs._landed, []

    def editor_reloads_saves_then_landed(*args: object) -> None:
        if not saves:  # the editor read the note with the appended text in it, and saves it with a line added
            _save_from(note.read_text(encoding="utf-8") + "\n")(note)
            saves.append(1)
        real(*args)

    monkeypatch.setattr(appendfs, "_landed", editor_reloads_saves_then_landed)
    append_file(str(tmp_path), "Daily.md", "from the assistant")
    assert saves and note.read_text(encoding="utf-8") == "# Daily\nfrom the assistant\ntyped in the editor\n"


@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow")
def test_an_in_place_save_that_truncates_around_the_write_gets_the_text_appended_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor truncates the note just before the append writes (after its last check) and writes
    its copy at offset 0 just after: the append's text lands at 0 and is overwritten. The append
    notices (the note does not hold its text where it landed) and appends again."""
    note = tmp_path / "Daily.md"
    note.write_text("# Daily\n", encoding="utf-8")
    real, saves = appendfs._write_at_end, []

    def editor_truncates_write_then_editor_writes(fd: int, data: bytes, rel: str) -> int:
        if saves:
            return real(fd, data, rel)
        editor = os.open(note, os.O_WRONLY | os.O_TRUNC)
        try:
            start = real(fd, data, rel)
            os.write(editor, b"# Daily\ntyped in the editor\n")
        finally:
            os.close(editor)
        saves.append(start)
        return start

    monkeypatch.setattr(appendfs, "_write_at_end", editor_truncates_write_then_editor_writes)
    append_file(str(tmp_path), "Daily.md", "from the assistant")
    assert saves == [0], "the first write landed on the truncated note"
    assert note.read_text(encoding="utf-8") == "# Daily\ntyped in the editor\nfrom the assistant"


def _editor_appends_after_the_read(monkeypatch: pytest.MonkeyPatch, note: Path, text: str) -> None:
    """The editor adds ``text`` in place once, after the append read the note and before its last check."""
    real, saves = appendfs._unchanged, []

    def editor_appends_then_check(*args: object) -> None:
        if not saves:
            with open(note, "a", encoding="utf-8") as handle:
                handle.write(text)
            saves.append(1)
        real(*args)

    monkeypatch.setattr(appendfs, "_unchanged", editor_appends_then_check)


@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow")
def test_the_newline_rule_sees_what_the_editor_added_after_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The note ended with a newline when read; the editor then added a line without one: the append
    reads it again and puts its text on a line of its own."""
    note = tmp_path / "Daily.md"
    note.write_text("# Daily\n", encoding="utf-8")
    _editor_appends_after_the_read(monkeypatch, note, "typed")
    append_file(str(tmp_path), "Daily.md", "from the assistant")
    assert note.read_text(encoding="utf-8") == "# Daily\ntyped\nfrom the assistant"


def test_an_expected_revision_is_checked_against_the_note_as_it_is_when_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = tmp_path / "Plan.md"
    note.write_text("# Plan\n", encoding="utf-8")
    _editor_appends_after_the_read(monkeypatch, note, "typed\n")
    with pytest.raises(RevisionMismatch):
        append_file(str(tmp_path), "Plan.md", "assistant line", expecting("Plan.md", revision_of(b"# Plan\n")))
    assert note.read_text(encoding="utf-8") == "# Plan\ntyped\n", "nothing written"


@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow")
def test_a_note_with_another_hard_link_is_refused(tmp_path: Path) -> None:
    """In place, an append would change the file under every name, here one outside the vault."""
    root, outside = tmp_path / "vault", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "profile").write_text("export A=1\n", encoding="utf-8")
    os.link(outside / "profile", root / "Profile.md")
    with pytest.raises(PathError, match=r"^Profile\.md has 2 names \(hard links"):
        append_file(str(root), "Profile.md", "export B=2")
    assert (outside / "profile").read_text(encoding="utf-8") == "export A=1\n"


SHORT_WRITE = """
import os, resource, signal, sys
from vaultsync.disk.edit import append_file
from vaultsync.errors import PathError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit, write() returns short, then fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (len("# Big\\n") + 10, resource.RLIM_INFINITY))
try:
    append_file(sys.argv[1], "Big.md", "x" * 100)
except PathError as exc:
    print(exc)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE short writes as Linux makes them")
def test_a_write_cut_short_says_how_much_of_the_text_is_in_the_note(tmp_path: Path) -> None:
    """A process may write only up to its file size limit: the first write is short, the next fails.
    The bytes written stay (taking them back could cut another program's), and the error says so."""
    (tmp_path / "Big.md").write_text("# Big\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", SHORT_WRITE, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "cannot append to Big.md: File too large; the first 10 of its 100 bytes were "
        "written at the end of the note and are left there"
    )
    assert (tmp_path / "Big.md").read_text(encoding="utf-8") == "# Big\n" + "x" * 10


def test_an_empty_text_writes_nothing(tmp_path: Path) -> None:
    note = tmp_path / "Empty.md"
    note.write_bytes(b"")
    before = note.stat().st_mtime_ns
    append_file(str(tmp_path), "Empty.md", "")
    assert note.read_bytes() == b"" and note.stat().st_mtime_ns == before

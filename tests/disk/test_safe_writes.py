"""The write tools through the official MCP client against the real server (``build_server`` with writes
allowed, in this process: what these tests pin is what the tools do to the folder, not the process around
them; tests/server/test_mcp_stdio.py runs ``vaultsync serve --allow-writes`` as a subprocess): symlinks of every
shape refused, a folder swapped for a symlink mid-write, concurrent appends all kept, NFD names, modes.

The library-level tests beside them pin what a server test cannot time: an editor saving the note
exactly between a write's read and its last check, and between that check and the write, for an
append (in place) and a whole-note rewrite (a swap). tests/disk/test_append_in_place.py pins what only an
in-place append keeps: writes through a descriptor opened before the append.
"""

from __future__ import annotations

import ctypes
import os
import stat
import subprocess
import sys
import threading
import time
import unicodedata
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer
from support.capabilities import weaker
from support.mcp_helpers import error_text, sc

from vaultsync import Vault
from vaultsync.disk import appendfs, vaultfs
from vaultsync.disk.edit import append_file
from vaultsync.revisions import rewrite_file
from vaultsync.server import ServeConfig, build_server

GIT_CONFIG = "[core]\n\trepositoryformatversion = 0\n"


def server(db: Path, root: Path) -> MCPServer:
    """What ``vaultsync --db DB serve ROOT --allow-writes`` serves."""
    return build_server(ServeConfig(db=db, root=root, allow_writes=True))


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    """A vault with a .git folder, an .obsidian folder, a folder outside it and an imported note."""
    root, outside, db = tmp_path / "vault", tmp_path / "outside", tmp_path / "db" / "vaultsync.db"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(GIT_CONFIG, encoding="utf-8")
    (root / ".git" / "notes.md").write_text("# in .git\n", encoding="utf-8")
    (root / ".obsidian" / "plugins").mkdir(parents=True)
    (root / "Real.md").write_text("# Real\n", encoding="utf-8")
    (root / "data.txt").write_text("not a note\n", encoding="utf-8")
    outside.mkdir()
    (outside / "x.md").write_text("# outside\n", encoding="utf-8")
    with Vault.open(db, root=root) as vault:
        vault.sync()
    return {"root": root, "outside": outside, "db": db}


def snapshot(*folders: Path) -> dict[str, bytes]:
    """Every file below the folders (symlinks as their target text), to compare before and after."""
    found = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_symlink():
                found[str(path)] = os.readlink(path).encode()
            elif path.is_file():
                found[str(path)] = path.read_bytes()
    return found


# name -> (symlink path in the vault, its target, the note path a tool is given)
SHAPES = {
    "to a dot-folder file": ("cfg.md", ".git/config", "cfg.md"),
    "dangling into a dot-folder": ("plug.md", ".obsidian/plugins/evil/main.js", "plug.md"),
    "relative and nested": ("A/B/rel.md", "../../Real.md", "A/B/rel.md"),
    "to a non-note": ("text.md", "data.txt", "text.md"),
    "folder alias into .git": ("gitdir", ".git", "gitdir/notes.md"),
    "folder alias out of the vault": ("out", "{outside}", "out/x.md"),
}


@pytest.mark.anyio
@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow")
async def test_every_symlink_shape_is_refused_by_both_write_tools(setup: dict[str, Path]) -> None:
    root, outside = setup["root"], setup["outside"]
    for link, target, _ in SHAPES.values():
        where = root / link
        where.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target.format(outside=outside), where)
    before = snapshot(root, outside)
    async with Client(server(setup["db"], root)) as c:
        for shape, (link, _, path) in SHAPES.items():
            for tool, args in (
                ("append_to_note", {"path": path, "text": "[core]\n\tfsmonitor = touch /tmp/pwned"}),
                ("create_note", {"path": path, "content": "module.exports = 1"}),
            ):
                message = error_text(await c.call_tool(tool, args))
                assert "\n" not in message
                if tool == "create_note" and link == path:  # the name is taken (by the symlink itself)
                    assert "already exists" in message, (shape, message)
                else:
                    assert "is a symlink" in message, (shape, tool, message)
            if "/" in path and "/" not in link:  # a new note through the folder alias
                new = path.rsplit("/", 1)[0] + "/new.md"
                assert "is a symlink" in error_text(await c.call_tool("create_note", {"path": new, "content": "x"}))
        listed = [f + row[0] for f, rows in sc(await c.call_tool("list_notes", {}))["folders"].items() for row in rows]
    assert listed == ["Real.md", "data.txt"]  # (data.txt: an attachment)
    assert snapshot(root, outside) == before, "nothing written anywhere"
    assert not (root / ".obsidian" / "plugins" / "evil").exists()


def _exchange(a: Path, b: Path) -> None:
    """Swap two names atomically (Linux ``renameat2(RENAME_EXCHANGE)``): neither is ever missing."""
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_exchange = -100, 2
    if libc.renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a))


def _swap(folder: Path, outside: Path, stop: threading.Event) -> int:
    """Swap ``folder`` between a real folder and a symlink to ``outside`` until ``stop``; swaps made."""
    link = folder.with_name("link")
    os.symlink(outside, link)
    swaps = 0
    while not stop.is_set():
        _exchange(folder, link)  # now a symlink out of the vault
        time.sleep(0.0005)
        _exchange(folder, link)  # a real folder again
        swaps += 1
    os.unlink(link)
    return swaps


@pytest.mark.anyio
@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow")
async def test_a_folder_swapped_for_a_symlink_mid_write_never_leads_outside(
    setup: dict[str, Path], capability_profile: str
) -> None:
    root, outside = setup["root"], setup["outside"]
    (root / "Race").mkdir()
    (root / "Race" / "log.md").write_text("# Log\n", encoding="utf-8")
    (outside / "log.md").write_text("# outside log\n", encoding="utf-8")
    if not hasattr(ctypes.CDLL(None), "renameat2"):
        pytest.skip("needs renameat2 (Linux, glibc 2.28+) to swap a folder and a symlink atomically")
    before = snapshot(outside)
    stop = threading.Event()
    swaps: list[int] = []
    swapper = threading.Thread(target=lambda: swaps.append(_swap(root / "Race", outside, stop)))
    async with Client(server(setup["db"], root)) as c:
        swapper.start()
        try:
            for i in range(60):
                await c.call_tool("append_to_note", {"path": "Race/log.md", "text": f"line {i}"})
                await c.call_tool("create_note", {"path": f"Race/new {i}.md", "content": f"# {i}"})
        finally:
            stop.set()
            await anyio.to_thread.run_sync(swapper.join)
    assert swaps and swaps[0] > 0
    after = snapshot(outside)
    if weaker(capability_profile, "nothing at all is created outside the vault during a folder swap"):
        # without directory fds a temp file is created through the path, then checked, then written: at worst an
        # empty temp file is left where the symlink pointed; no note and no content ever is
        left = {path: data for path, data in after.items() if path not in before}
        assert all(Path(p).name.startswith(".vaultsync-") and data == b"" for p, data in left.items()), left
        after = {path: data for path, data in after.items() if path in before}
    assert after == before, "nothing was written outside the vault"
    assert not (root / "link").exists() and (root / "Race").is_dir() and not (root / "Race").is_symlink()


@pytest.mark.anyio
@pytest.mark.capabilities_off("no-dir-fd", "no-exchange")
@pytest.mark.slow
async def test_forty_concurrent_appends_all_land_on_disk_and_in_the_store(setup: dict[str, Path]) -> None:
    root = setup["root"]
    (root / "Log.md").write_text("# Log\n", encoding="utf-8")
    lines = [f"- entry {i:02d}" for i in range(40)]
    async with Client(server(setup["db"], root)) as c:
        results: list[dict] = []

        async def append(line: str) -> None:
            results.append(sc(await c.call_tool("append_to_note", {"path": "Log.md", "text": line})))

        async with anyio.create_task_group() as tg:
            for line in lines:
                tg.start_soon(append, line)
        stored = sc(await c.call_tool("read_note", {"path": "Log.md"}))["content"]
        history = sc(await c.call_tool("note_history", {"path": "Log.md", "limit": 100}))
    on_disk = (root / "Log.md").read_text(encoding="utf-8")
    assert sorted(on_disk.splitlines()[1:]) == lines
    assert stored == on_disk
    assert all(r["ingested"] for r in results) and len(results) == 40
    assert len({r["content_hash"] for r in results}) == 40, "each append is its own recorded revision"
    assert len(history["revisions"]) == 40  # Log.md was not imported yet: the first append records it


@pytest.mark.anyio
async def test_an_editor_saving_during_a_burst_of_appends_keeps_every_line(setup: dict[str, Path]) -> None:
    """Against a real server: another program adds to the note (in place, as a plugin or a shell's
    ``>>`` does) while 20 appends are in flight; every line of both ends on disk and in the last
    recorded revision. The exact in-window interleavings are pinned deterministically by
    test_an_editor_saving_between_read_and_replace_is_kept."""
    root = setup["root"]
    note = root / "Journal.md"
    note.write_text("# Journal\n", encoding="utf-8")
    lines = [f"- assistant {i:02d}" for i in range(20)]
    edits = [f"- typed {i}" for i in range(4)]

    def editor_saves(text: str) -> None:
        with open(note, "a", encoding="utf-8") as handle:
            handle.write("\n" + text + "\n")  # on a line of its own, whatever the note ended with

    async with Client(server(setup["db"], root)) as c:

        async def append(line: str) -> None:
            sc(await c.call_tool("append_to_note", {"path": "Journal.md", "text": line}))

        async def editor() -> None:
            for text in edits:
                await anyio.sleep(0.05)
                await anyio.to_thread.run_sync(editor_saves, text)

        async with anyio.create_task_group() as tg:
            tg.start_soon(editor)
            for line in lines:
                tg.start_soon(append, line)
        on_disk = note.read_text(encoding="utf-8")
        appended = sc(await c.call_tool("append_to_note", {"path": "Journal.md", "text": "- last"}))
        stored = sc(await c.call_tool("read_note", {"path": "Journal.md"}))["content"]
    body = [line for line in on_disk.splitlines()[1:] if line]
    assert sorted(line for line in body if "assistant" in line) == lines
    assert [line for line in body if "typed" in line] == edits, "every editor save survived"
    assert stored == note.read_text(encoding="utf-8") and appended["ingested"]


@pytest.mark.anyio
async def test_an_nfd_named_note_is_found_by_its_nfc_name_and_never_twinned(setup: dict[str, Path]) -> None:
    root = setup["root"]
    nfc_name, nfd_name = "Café.md", unicodedata.normalize("NFD", "Café.md")
    folder_nfd = unicodedata.normalize("NFD", "Résumé")
    (root / folder_nfd).mkdir()
    (root / nfd_name).write_text("# Café\n", encoding="utf-8")
    async with Client(server(setup["db"], root)) as c:
        made = sc(await c.call_tool("append_to_note", {"path": nfc_name, "text": "open late"}))
        assert made["path"] == nfc_name
        assert "already exists" in error_text(await c.call_tool("create_note", {"path": nfc_name, "content": "x"}))
        sc(await c.call_tool("create_note", {"path": "Résumé/Jobs.md", "content": "# Jobs"}))
        sc(await c.call_tool("append_to_note", {"path": "Résumé/Jobs.md", "text": "- one"}))
        assert sc(await c.call_tool("read_note", {"path": nfc_name}))["content"] == "# Café\nopen late\n"
    assert sorted(os.listdir(root)) == sorted([".git", ".obsidian", "Real.md", "data.txt", nfd_name, folder_nfd])
    assert (root / nfd_name).read_text(encoding="utf-8") == "# Café\nopen late\n"  # append ends with a newline
    assert os.listdir(root / folder_nfd) == ["Jobs.md"]


@pytest.mark.anyio
async def test_an_append_keeps_the_file_mode(setup: dict[str, Path]) -> None:
    root = setup["root"]
    modes = {"Shared.md": 0o644, "Group.md": 0o640, "Script.md": 0o755}
    for name, mode in modes.items():
        (root / name).write_text(f"# {name}\n", encoding="utf-8")
        os.chmod(root / name, mode)
    async with Client(server(setup["db"], root)) as c:
        for name in modes:
            sc(await c.call_tool("append_to_note", {"path": name, "text": "more"}))
    assert {name: stat.S_IMODE((root / name).stat().st_mode) for name in modes} == modes


# ---------------------------------------------------------------- the exact interleavings, in the library


def _save_in_place(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def _save_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(".editor.tmp")
    tmp.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")
    os.replace(tmp, path)


# Two write paths: an append writes into the note itself (appendfs), a whole-note rewrite (edit_note,
# restore_note) swaps a temp file in for the note (vaultfs.edit). Each reads the note, checks it a last
# time, then writes; the editor saves at those two moments, once, and both paths must keep its save.


def _append(root: Path) -> None:
    append_file(str(root), "Daily.md", "from the assistant")


def _rewrite(root: Path) -> None:
    """edit_note's path (``rewrite_file``), here adding what ``_append`` adds."""
    rewrite_file(
        str(root), "Daily.md", lambda old: old + (b"" if old.endswith(b"\n") else b"\n") + b"from the assistant"
    )


AFTER_READ = {"append": (_append, appendfs, "_unchanged"), "rewrite": (_rewrite, vaultfs, "_temp")}
"""The call each path makes after it read the note and before its last check."""
AT_THE_WRITE = {"append": (_append, appendfs, "_write_at_end"), "rewrite": (_rewrite, vaultfs, "_exchange")}
"""The call that writes, after the last check: the append's O_APPEND write, the rewrite's swap."""


def _editor_saves_first(monkeypatch: pytest.MonkeyPatch, module: object, call: str, save, note: Path) -> list[int]:
    """Make ``module.call`` let the editor save first, the first time it is called; the saves made."""
    real, saves = getattr(module, call), []

    def editor_saves_then_call(*args: object) -> object:
        if not saves:
            save(note, "typed in the editor\n")
            saves.append(1)
        return real(*args)

    monkeypatch.setattr(module, call, editor_saves_then_call)
    return saves


@pytest.mark.parametrize("path", ["append", "rewrite"])
@pytest.mark.parametrize("save", [_save_in_place, _save_atomically])
@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow", "no-exchange")
def test_an_editor_saving_between_read_and_replace_is_kept(
    tmp_path: Path, save, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor saves the note after the write read it and before its last check: the write
    notices, reads the note again and keeps the editor's text."""
    note = tmp_path / "Daily.md"
    note.write_text("# Daily\n", encoding="utf-8")
    write, module, call = AFTER_READ[path]
    saves = _editor_saves_first(monkeypatch, module, call, save, note)
    write(tmp_path)
    assert saves and note.read_text(encoding="utf-8") == "# Daily\ntyped in the editor\nfrom the assistant"
    assert [p.name for p in tmp_path.iterdir()] == ["Daily.md"], "no temp file left behind"


@pytest.mark.parametrize("path", ["append", "rewrite"])
@pytest.mark.parametrize("save", [_save_in_place, _save_atomically])
@pytest.mark.capabilities_off("no-dir-fd", "no-exchange")
def test_an_editor_saving_between_the_last_check_and_the_swap_is_kept(
    tmp_path: Path, save, path: str, capability_profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The narrowest window: the editor saves after the write's last check, just before it writes.
    An append writes in place with O_APPEND: an in-place save is before its text, and a save that
    renamed a new file over the note is noticed after the write (the note does not hold the text)
    and appended to again. A rewrite swaps with an exchange, so it sees what it replaced, swaps back
    and tries again. Without an exchange rename (Windows) the rewrite's replace is a plain rename:
    the editor's save in that window is lost, and the rewrite's text is all that is there."""
    note = tmp_path / "Daily.md"
    note.write_text("# Daily\n", encoding="utf-8")
    write, module, call = AT_THE_WRITE[path]
    saves = _editor_saves_first(monkeypatch, module, call, save, note)
    write(tmp_path)
    assert saves
    if path == "rewrite" and weaker(
        capability_profile, "an editor's save between a rewrite's last check and its replace is kept"
    ):
        assert note.read_text(encoding="utf-8") == "# Daily\nfrom the assistant"
        assert [p.name for p in tmp_path.iterdir()] == ["Daily.md"], "no temp file left behind"
        return
    assert note.read_text(encoding="utf-8") == "# Daily\ntyped in the editor\nfrom the assistant"
    assert [p.name for p in tmp_path.iterdir()] == ["Daily.md"], "no temp file left behind"


@pytest.mark.capabilities_off("no-fcntl")
@pytest.mark.slow
def test_a_write_into_a_held_vault_waits_for_its_watcher(setup: dict[str, Path]) -> None:
    """Another process watches the vault (holds the writer lock): the write tool writes the file and
    returns once that watcher has recorded it, as a success with the recorded revision."""
    root, db = setup["root"], setup["db"]
    watcher = subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "--db", str(db), "watch", str(root)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with Vault.open(db, root=root) as vault:
            deadline = time.monotonic() + 30
            while not (vault.lock.holder_info() or {}).get("watching"):
                assert watcher.poll() is None and time.monotonic() < deadline, "the watcher did not start"
                time.sleep(0.05)

        async def write() -> dict:
            async with Client(server(db, root)) as c:
                return sc(await c.call_tool("append_to_note", {"path": "Real.md", "text": "seen by the watcher"}))

        made = anyio.run(write)
        assert made["ingested"] is True
        with Vault.open(db, name="vault", readonly=True) as vault:
            assert vault.read("Real.md").content == "# Real\nseen by the watcher\n"
            assert vault.read("Real.md").revision.content_hash == made["content_hash"]
    finally:
        watcher.terminate()
        watcher.wait(timeout=30)


# ---------------------------------------------------------------- import and watch: the same symlink rule


@pytest.mark.capabilities_off("no-dir-fd", "no-nofollow")
def test_import_and_the_watchers_path_sync_skip_symlinks_alike(setup: dict[str, Path]) -> None:
    """Symlinked notes and folders are not notes for a full import nor for the watcher's path sync
    (``Vault.sync(paths)``): no content through them is stored, and neither sees renames the other does not."""
    root, outside, db = setup["root"], setup["outside"], setup["db"]
    (root / "Projects").mkdir()
    (root / "Projects" / "Atlas.md").write_text("# Atlas\n", encoding="utf-8")
    for link, target in (
        ("cfg.md", ".git/config"),
        ("text.md", "data.txt"),
        ("alias", "Projects"),
        ("ext", str(outside)),
        ("same.md", "Real.md"),
    ):
        os.symlink(target, root / link)
    with Vault.open(db, root=root) as vault:
        full = vault.sync()
        assert [r.path for r in vault.ls()] == ["Projects/Atlas.md", "Real.md", "data.txt"]  # (an attachment)
        named = ["cfg.md", "same.md", "text.md"]  # symlinked notes are named; symlinked folders are not entered
        assert sorted(e.path for e in full.errors) == named and full.renamed == 0
        assert all("a symlink, not followed" in e.reason for e in full.errors)
        touched = vault.sync(["cfg.md", "text.md", "alias", "alias/Atlas.md", "ext", "ext/x.md", "same.md"])
        assert (touched.added, touched.deleted, touched.renamed, touched.modified) == (0, 0, 0, 0)
        assert sorted(e.path for e in touched.errors) == named
        # a real folder replaced by a symlink to itself elsewhere: its notes are gone for both
        os.rename(root / "Projects", root / "Moved")
        os.symlink("Moved", root / "Projects")
        watched = vault.sync(["Projects", "Moved"])
        assert watched.renamed == 1 and [r.path for r in vault.ls()] == ["Moved/Atlas.md", "Real.md", "data.txt"]
        assert vault.sync().added == 0 and vault.sync().renamed == 0

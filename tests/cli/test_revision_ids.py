"""Revision ids as a person uses them: ``history`` prints one id a revision (``r`` and its batch), even when
the text comes back to an earlier state (its content hash then repeats, in its own column); ``read``,
``diff`` and ``restore`` take the id back, and the old forms (times, content-hash digits) still work; an
unknown or ambiguous id is one ``Error:`` line (a real subprocess: no traceback). The MCP tools take the
same ids: ``note_history`` gives them, ``read_note``, ``diff_note`` and ``restore_note`` take them."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from mcp import Client
from support.cli import run_cli
from support.mcp_helpers import error_text, sc

from vaultsync.server import ServeConfig, build_server

ONE, TWO = "# Plan\n\nfirst\n", "# Plan\n\nsecond\n"
TWIN_A, TWIN_B = "# Twin\n\nline 14854\n", "# Twin\n\nline 60210\n"
"""Two texts whose content hashes share their first 8 hex digits (3ff08759): 8 digits name neither."""
TIMES = ["2025-01-01", "2025-01-02", "2025-01-03", "2025-01-04", "2025-01-05"]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def vault(tmp_path: Path, cli) -> tuple[Path, Path]:
    """Plan.md: first, second, first again (its hash repeats), then moved into Archive/; Twin.md: two texts
    whose hashes share 8 digits. One import a day."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    states = [(ONE, TWIN_A), (TWO, TWIN_B), (ONE, TWIN_A), (ONE, TWIN_B)]
    for day, (plan, twin) in zip(TIMES, states):
        (root / "Plan.md").write_text(plan, encoding="utf-8")
        (root / "Twin.md").write_text(twin, encoding="utf-8")
        assert cli("import", str(root), "--known-at", day, db=db).returncode == 0
    (root / "Archive").mkdir()
    (root / "Plan.md").rename(root / "Archive" / "Plan.md")
    assert cli("import", str(root), "--known-at", TIMES[4], db=db).returncode == 0
    return root, db


def history(db: Path, note: str) -> list[dict]:
    return json.loads(run_cli("history", note, "--json", db=db, check=True).stdout)


def test_history_ids_name_one_revision_even_when_the_text_comes_back(vault, cli) -> None:
    _, db = vault
    revs = history(db, "Archive/Plan.md")
    ids = [r["id"] for r in revs]
    assert [r["kind"] for r in revs] == ["created", "modified", "modified", "renamed"]
    assert len(set(ids)) == 4 and all(re.fullmatch(r"r\d+", i) for i in ids), ids
    assert revs[0]["revision"] == revs[2]["revision"] == sha(ONE)[:8]  # the content column repeats, the id not
    shown = cli("history", "Archive/Plan.md", db=db, check=True).stdout.splitlines()
    assert [line.split()[1] for line in shown] == ids
    assert [line.split()[2] for line in shown] == [r["revision"] for r in revs]


@pytest.mark.slow
def test_diff_between_two_ids_from_history(vault) -> None:
    _, db = vault
    first, second, again, moved = (r["id"] for r in history(db, "Archive/Plan.md"))
    out = run_cli("diff", "Archive/Plan.md", "--from", first, "--to", second, db=db, check=True).stdout
    assert f"--- Plan.md @ {first} (2025-01-01T00:00:00Z)" in out and f"+++ Plan.md @ {second}" in out
    assert "-first" in out and "+second" in out
    back = run_cli("diff", "Archive/Plan.md", "--from", second, "--to", again, db=db, check=True).stdout
    assert "-second" in back and "+first" in back  # the id that would have repeated names the later revision
    assert run_cli("diff", "Archive/Plan.md", "--from", again, "--to", moved, db=db, check=True).stdout == ""
    # the old forms still work: times, and content-hash digits (the latest revision with that text)
    by_time = run_cli("diff", "Archive/Plan.md", "--from", TIMES[0], "--to", TIMES[1], db=db, check=True).stdout
    assert "-first" in by_time and "+second" in by_time
    by_hash = run_cli("diff", "Archive/Plan.md", "--from", sha(TWO)[:8], db=db, check=True).stdout
    assert "-second" in by_hash and "+first" in by_hash
    as_json = json.loads(run_cli("diff", "Archive/Plan.md", "--from", first, "--to", second, "--json", db=db).stdout)
    assert (as_json["from"], as_json["to"]) == (first, second) and "+second" in as_json["diff"]


@pytest.mark.slow
def test_read_and_restore_take_the_id(vault) -> None:
    root, db = vault
    first, second, _, _ = (r["id"] for r in history(db, "Archive/Plan.md"))
    assert run_cli("read", "Archive/Plan.md", "--as-of", second, db=db, check=True).stdout == TWO
    assert run_cli("read", "Plan.md", "--as-of", first, db=db, check=True).stdout == ONE  # by its old name too
    run_cli("restore", "Archive/Plan.md", "--revision", second, db=db, check=True)
    assert (root / "Archive" / "Plan.md").read_text(encoding="utf-8") == TWO
    run_cli("restore", "Archive/Plan.md", "--revision", sha(ONE)[:8], db=db, check=True)  # the old form
    assert (root / "Archive" / "Plan.md").read_text(encoding="utf-8") == ONE


@pytest.mark.slow
def test_unknown_ambiguous_and_deleted_ids_are_one_clear_line(vault) -> None:
    _, db = vault
    ids = [r["id"] for r in history(db, "Twin.md")]
    for args, said in (
        (("diff", "Archive/Plan.md", "--from", "r999"), "vault 'vault' has no revision r999: its latest is r5"),
        (
            ("read", "Twin.md", "--as-of", "3ff08759"),
            f"begins the content of several revisions of 'Twin.md' ({', '.join(ids)})",
        ),
        (("restore", "Twin.md", "--revision", "3ff08759", "--dry-run"), "give its id (r12) or more hex digits"),
        (("read", "Plan.md", "--as-of", history(db, "Plan.md")[-1]["id"]), "is its deletion"),
        (("diff", "Twin.md", "--from", "soon"), "or a revision id as history and changes show it (r12)"),
        (("restore", "Twin.md", "--as-of", "2020-01-01", "--dry-run"), "vault 'vault' has no history before"),
        (("read", "Twin.md", "--as-of", "20250301"), "neither a time nor a revision of 'Twin.md': use YYYY-MM-DD"),
    ):
        done = run_cli(*args, db=db)
        lines = done.stderr.strip().splitlines()
        assert done.returncode != 0 and len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
        assert said in lines[0] and "Traceback" not in done.stderr, lines[0]
    # more digits tell the twins apart
    assert run_cli("read", "Twin.md", "--as-of", sha(TWIN_A)[:12], db=db, check=True).stdout == TWIN_A


@pytest.mark.anyio
async def test_mcp_tools_give_and_take_the_same_ids(vault) -> None:
    root, db = vault
    async with Client(build_server(ServeConfig(db=db, root=root, allow_writes=True))) as c:
        revs = sc(await c.call_tool("note_history", {"path": "Archive/Plan.md"}))["revisions"]
        ids = [r["id"] for r in revs]
        assert ids == [r["id"] for r in history(db, "Archive/Plan.md")]
        read = sc(await c.call_tool("read_note", {"path": "Archive/Plan.md", "as_of": ids[1]}))
        assert read["content"] == TWO and read["id"] == ids[1]
        diff = sc(await c.call_tool("diff_note", {"path": "Archive/Plan.md", "from": ids[1], "to": ids[2]}))
        assert "-second" in diff["diff"] and "+first" in diff["diff"] and diff["from"] == ids[1]
        message = error_text(await c.call_tool("diff_note", {"path": "Archive/Plan.md", "from": "r999"}))
        assert "has no revision r999" in message, message
        message = error_text(await c.call_tool("read_note", {"path": "Twin.md", "as_of": "3ff08759"}))
        assert "begins the content of several revisions" in message, message
        message = error_text(await c.call_tool("read_note", {"path": "Twin.md", "as_of": "soon"}))
        assert (
            "invalid as_of 'soon'" in message and "or a revision id from note_history or list_changes (r12)" in message
        ), message
        changes = sc(await c.call_tool("list_changes", {"since": "2024-12-31"}))["changes"]
        assert {r["id"] for r in changes if r.get("path") == "Archive/Plan.md"} == {ids[3]}
        sc(await c.call_tool("restore_note", {"path": "Archive/Plan.md", "revision": ids[1]}))
    assert (root / "Archive" / "Plan.md").read_text(encoding="utf-8") == TWO


def test_an_undo_refused_names_revisions_by_their_ids_and_the_flag(vault) -> None:
    _, db = vault
    twin = [r["id"] for r in history(db, "Twin.md")]
    done = run_cli("undo", twin[2][1:], "--dry-run", db=db)  # the batch that made Twin's third and Plan's third
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("refused") and "Twin.md" in x)
    assert f"now at {twin[3]}, the batch left it at {twin[2]}; --force overwrites it" in line, line
    plan = next(x for x in done.stdout.splitlines() if x.startswith("refused") and " Plan.md" in x)
    assert "absent now" in plan and "--force" in plan, plan


@pytest.mark.slow
def test_a_folder_moved_away_edited_and_moved_back_keeps_its_whole_history(tmp_path: Path, cli) -> None:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    (root / "Projects").mkdir(parents=True)
    note = root / "Projects" / "Atlas.md"
    steps = [
        lambda: note.write_text(ONE, encoding="utf-8"),
        lambda: (root / "Archive").mkdir() or (root / "Projects").rename(root / "Archive" / "Projects"),
        lambda: (root / "Archive" / "Projects" / "Atlas.md").write_text(TWO, encoding="utf-8"),
        lambda: (root / "Archive" / "Projects").rename(root / "Projects"),
    ]
    for day, step in zip(TIMES, steps):
        step()
        assert cli("import", str(root), "--known-at", day, db=db).returncode == 0
    revs = history(db, "Projects/Atlas.md")
    assert [(r["kind"], r["path"]) for r in revs] == [
        ("created", "Projects/Atlas.md"),
        ("renamed", "Archive/Projects/Atlas.md"),
        ("modified", "Archive/Projects/Atlas.md"),  # the edit made while it lived in Archive/
        ("renamed", "Projects/Atlas.md"),
    ]
    assert len({r["id"] for r in revs}) == 4
    edit = revs[2]["id"]
    out = run_cli("diff", "Projects/Atlas.md", "--from", revs[0]["id"], "--to", edit, db=db, check=True).stdout
    assert "-first" in out and "+second" in out
    by_time = run_cli("diff", "Projects/Atlas.md", "--from", TIMES[1], "--to", TIMES[2], db=db, check=True).stdout
    assert "--- Archive/Projects/Atlas.md @ 2025-01-02" in by_time and "+second" in by_time  # its name then


@pytest.mark.anyio
@pytest.mark.slow
async def test_restore_as_of_an_id_on_the_command_line_and_over_mcp(vault) -> None:
    root, db = vault
    first, second, _, _ = (r["id"] for r in history(db, "Archive/Plan.md"))
    run_cli("restore", "Archive/Plan.md", "--as-of", second, db=db, check=True)
    assert (root / "Archive" / "Plan.md").read_text(encoding="utf-8") == TWO
    folder = run_cli("restore", "--prefix", "Archive/", "--as-of", second, "--dry-run", db=db)
    assert folder.returncode == 1 and "a folder is restored as of a time" in folder.stderr, folder.stderr
    assert "Traceback" not in folder.stderr
    async with Client(build_server(ServeConfig(db=db, root=root, allow_writes=True))) as c:
        sc(await c.call_tool("restore_note", {"path": "Archive/Plan.md", "as_of": first}))
    assert (root / "Archive" / "Plan.md").read_text(encoding="utf-8") == ONE

"""A revision id as a vault-wide cutoff: ``ls``, ``search`` and ``export --as-of r12`` (and the MCP ``list_notes``
and ``search_notes``) see the vault right after batch 12, exactly: a later batch that shares its time stays
unseen, where the same time given as a date sees it. ``undo`` takes the id as history prints it. ``read`` by time
at a name a note had then (renamed since) gives it; at a name it got later, one line names its name then. An
unknown id is one ``Error:`` line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from support.cli import run_cli
from support.mcp_helpers import error_text, sc

from vaultsync.server import ServeConfig, build_server

FIRST, SECOND = "# Plan\n\nalpha first\n", "# Plan\n\nbravo second\n"
LATE = "# Late\n\ncharlie arrives in the same second\n"


@pytest.fixture
def vault(tmp_path: Path, cli) -> tuple[Path, Path, list[str]]:
    """Plan.md: alpha (2025-01-01), bravo (2025-01-02); Late.md added by a second batch of 2025-01-02 (the same
    time); Plan.md moved into Archive/ (2025-01-03). Returns the root, the database and the four batches' ids."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    return root, db, build(root, db, cli)


def build(root: Path, db: Path | str, cli) -> list[str]:
    """The ``vault`` fixture's history in ``db`` (a file, or a PostgreSQL connection string): its batches' ids."""
    root.mkdir()
    steps = [
        ("2025-01-01", lambda: (root / "Plan.md").write_text(FIRST, encoding="utf-8")),
        ("2025-01-02", lambda: (root / "Plan.md").write_text(SECOND, encoding="utf-8")),
        ("2025-01-02", lambda: (root / "Late.md").write_text(LATE, encoding="utf-8")),
        ("2025-01-03", lambda: (root / "Archive").mkdir() or (root / "Plan.md").rename(root / "Archive" / "Plan.md")),
    ]
    for day, step in steps:
        step()
        done = cli("import", str(root), "--known-at", day, db=db)
        assert done.returncode == 0, done.stderr
    plan = [r["id"] for r in json.loads(cli("history", "Archive/Plan.md", "--json", db=db).stdout)]
    late = json.loads(cli("history", "Late.md", "--json", db=db).stdout)[0]["id"]
    return [plan[0], plan[1], late, plan[2]]


def listed(cli, db: Path | str, *args: str) -> list[str]:
    done = cli("ls", *args, "--json", db=db)
    assert done.returncode == 0, done.stderr
    return [r["path"] for r in json.loads(done.stdout)]


def hits(cli, db: Path | str, query: str, *args: str) -> list[str]:
    done = cli("search", query, "--mode", "keyword", *args, "--json", db=db)
    assert done.returncode == 0, done.stderr
    return [h["path"] for h in json.loads(done.stdout)["hits"]]


def test_ls_and_search_as_of_an_id_see_exactly_that_batch(vault, cli) -> None:
    _, db, (r1, r2, r3, r4) = vault
    assert listed(cli, db, "--as-of", "2025-01-02") == ["Late.md", "Plan.md"]  # the time: both batches of that day
    assert listed(cli, db, "--as-of", r2) == ["Plan.md"]  # the id: nothing from the later batch of the same time
    assert listed(cli, db, "--as-of", r3) == ["Late.md", "Plan.md"]
    assert listed(cli, db, "--as-of", r4) == ["Archive/Plan.md", "Late.md"]
    assert cli("ls", "--as-of", r1, db=db).stdout.split()[-1] == "Plan.md"  # the human listing too
    assert hits(cli, db, "charlie", "--as-of", r2) == [] and hits(cli, db, "charlie", "--as-of", r3) == ["Late.md"]
    assert hits(cli, db, "bravo", "--as-of", r1) == [] and hits(cli, db, "bravo", "--as-of", r2) == ["Plan.md"]
    assert hits(cli, db, "alpha", "--as-of", r1) == ["Plan.md"] and hits(cli, db, "alpha", "--as-of", r2) == []
    found = json.loads(cli("search", "bravo", "--as-of", r2, "--json", db=db).stdout)
    assert found["as_of"] == "2025-01-02T00:00:00Z"  # the batch's time, said as a time
    exported = [json.loads(line) for line in cli("export", "--as-of", r2, db=db).stdout.splitlines()[1:]]
    assert {row["path"] for row in exported} == {"Plan.md"}


@pytest.mark.pg
def test_an_id_is_the_same_cutoff_on_postgresql(tmp_path: Path, cli) -> None:
    pgserver = pytest.importorskip("support.pgserver")
    dsn = pgserver.fresh_or_skip("cutoffs")
    _, r2, r3, _ = build(tmp_path / "vault", dsn, cli)
    assert listed(cli, dsn, "--as-of", "2025-01-02") == ["Late.md", "Plan.md"]
    assert listed(cli, dsn, "--as-of", r2) == ["Plan.md"] and listed(cli, dsn, "--as-of", r3) == ["Late.md", "Plan.md"]
    assert hits(cli, dsn, "charlie", "--as-of", r2) == [] and hits(cli, dsn, "charlie", "--as-of", r3) == ["Late.md"]


@pytest.mark.slow
def test_an_unknown_id_or_a_bad_cutoff_is_one_clear_line(vault) -> None:
    _, db, ids = vault
    for args, said in (
        (("ls", "--as-of", "r999"), "vault 'vault' has no revision r999: its latest is " + ids[3]),
        (("search", "plan", "--as-of", "r999"), "has no revision r999"),
        (("ls", "--as-of", "soon"), "or a revision id (r12: the vault right after batch 12"),
        (("search", "plan", "--as-of", "3ff08759"), "invalid --as-of '3ff08759'"),  # a note's content is no cutoff
    ):
        done = run_cli(*args, db=db)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
        assert said in lines[0] and "Traceback" not in done.stderr, lines[0]


def test_undo_takes_the_id_history_prints(vault, cli) -> None:
    root, db, (_, _, r3, _) = vault
    by_id = cli("undo", r3, "--dry-run", "--json", db=db)
    by_number = cli("undo", r3[1:], "--dry-run", "--json", db=db)
    assert by_id.returncode == by_number.returncode == 0, by_id.stderr
    assert json.loads(by_id.stdout) == json.loads(by_number.stdout) and "Late.md" in by_id.stdout
    cli("undo", r3, db=db)
    assert not (root / "Late.md").exists()
    bad = run_cli("undo", "rx", db=db)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "r12" in bad.stderr, bad.stderr


@pytest.mark.slow
def test_read_by_time_at_a_name_the_note_had_then(vault, cli) -> None:
    _, db, _ = vault
    assert cli("read", "Plan.md", "--as-of", "2025-01-02", db=db).stdout == SECOND  # its old name, renamed later
    assert cli("read", "Plan.md", "--as-of", "2025-01-02T23:59:59Z", db=db).stdout == SECOND
    assert cli("read", "Plan.md", "--as-of", "2025-01-01T12:00:00Z", db=db).stdout == FIRST
    then = json.loads(cli("read", "Plan.md", "--as-of", "2025-01-02", "--json", db=db).stdout)
    assert then["path"] == "Plan.md" and then["content"] == SECOND
    for args, said in (  # no note at that name then: one clear line, naming the note's name then or since
        (("read", "Plan.md", "--as-of", "2025-01-04"), "(it was renamed to Archive/Plan.md)"),
        (("read", "Archive/Plan.md", "--as-of", "2025-01-02"), "(the note later at Archive/Plan.md was Plan.md then)"),
        (("read", "Archive/Plan.md", "--as-of", "2024-12-31"), "has no history before"),
        (("read", "Late.md", "--as-of", "2025-01-01"), "note 'Late.md' did not exist as of 2025-01-01T00:00:00Z in"),
    ):
        done = run_cli(*args, db=db)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1 and said in lines[0], done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.anyio
async def test_mcp_list_search_and_read_take_the_same_cutoffs(vault) -> None:
    root, db, (r1, r2, r3, _) = vault
    async with Client(build_server(ServeConfig(db=db, root=root))) as c:
        listing = sc(await c.call_tool("list_notes", {"as_of": r2}))
        assert "Late.md" not in json.dumps(listing) and "Plan.md" in json.dumps(listing), listing
        assert listing["as_of"] == "2025-01-02T00:00:00Z", listing
        assert "Late.md" in json.dumps(sc(await c.call_tool("list_notes", {"as_of": r3})))
        found = sc(await c.call_tool("search_notes", {"query": "charlie", "as_of": r2, "mode": "keyword"}))
        assert found["notes"] == [], found
        found = sc(await c.call_tool("search_notes", {"query": "charlie", "as_of": r3, "mode": "keyword"}))
        assert [n["path"] for n in found["notes"]] == ["Late.md"], found
        found = sc(await c.call_tool("search_notes", {"query": "alpha", "as_of": r1, "mode": "keyword"}))
        assert [n["path"] for n in found["notes"]] == ["Plan.md"], found
        for tool, args in (("list_notes", {}), ("search_notes", {"query": "plan"})):
            message = error_text(await c.call_tool(tool, {**args, "as_of": "r999"}))
            assert "has no revision r999" in message, message
        links = sc(await c.call_tool("get_links", {"path": "Late.md", "as_of": r3}))
        assert links["path"] == "Late.md" and links["as_of"] == "2025-01-02T00:00:00Z", links
        message = error_text(await c.call_tool("get_links", {"path": "Late.md", "as_of": r2}))
        assert "did not exist as of 2025-01-02" in message, message  # not yet, right after r2
        message = error_text(await c.call_tool("list_notes", {"as_of": "soon"}))
        assert "invalid as_of 'soon'" in message and "or a revision id (r12" in message, message
        read = sc(await c.call_tool("read_note", {"path": "Plan.md", "as_of": "2025-01-02"}))
        assert read["content"] == SECOND and read["path"] == "Plan.md", read
        message = error_text(await c.call_tool("read_note", {"path": "Plan.md", "as_of": "2025-01-04"}))
        assert "did not exist" in message and "renamed to Archive/Plan.md" in message, message
        message = error_text(await c.call_tool("read_note", {"path": "Archive/Plan.md", "as_of": "2025-01-02"}))
        assert "the note later at Archive/Plan.md was Plan.md then" in message, message

"""One meaning of a revision id in every door: ``rN`` is the vault right after batch N, so given for one note it is
that note as it stood then, whether or not batch N changed it. Every form a door prints (the ids of ``history``,
``changes``, ``list_changes``, ``note_history``, ``read_note``; the content-hash digits) is taken back by every door
that takes a revision: ``read``/``diff``/``restore`` and ``read_note``/``diff_note``/``restore_note``/``edit_note``
(``expected_revision``). A wrong revision of a right path says so, and how to list its revisions. Times take up to
nine fractional digits, cut (never rounded) to the store's microseconds, so a time includes exactly the batches
known at or before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from support.mcp_helpers import error_text, sc

from vaultsync.server import ServeConfig, build_server

ONE, TWO, THREE = "# Plan\n\nfirst\n", "# Plan\n\nsecond\n", "# Plan\n\nthird\n"
OTHER, GONE = "# Other\n\nbeside it\n", "# Gone\n\nsoon deleted\n"
DAYS = ["2025-01-01", "2025-01-02", "2025-01-03", "2025-01-04", "2025-01-05", "2025-01-05"]


@pytest.fixture
def vault(tmp_path: Path, cli) -> tuple[Path, Path, list[str]]:
    """Batch 1: Gone.md; 2: Plan.md (first); 3: Other.md (Plan unchanged); 4: Plan.md second, Gone.md deleted;
    5: Other.md edited (Plan unchanged); 6: Late.md, at the same time as batch 5. One import a day; returns the
    root, the database and the batches' ids as ``changes --json`` prints them."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    return root, db, build(root, db, cli)


def build(root: Path, db: Path | str, cli) -> list[str]:
    """The ``vault`` fixture's history in ``db`` (a file, or a PostgreSQL connection string): its batches' ids."""
    root.mkdir()
    steps = [
        lambda: (root / "Gone.md").write_text(GONE, encoding="utf-8"),
        lambda: (root / "Plan.md").write_text(ONE, encoding="utf-8"),
        lambda: (root / "Other.md").write_text(OTHER, encoding="utf-8"),
        lambda: [(root / "Plan.md").write_text(TWO, encoding="utf-8"), (root / "Gone.md").unlink()],
        lambda: (root / "Other.md").write_text(OTHER + "more\n", encoding="utf-8"),
        lambda: (root / "Late.md").write_text("# Late\n", encoding="utf-8"),
    ]
    for day, step in zip(DAYS, steps):
        step()
        assert cli("import", str(root), "--known-at", day, db=db).returncode == 0
    rows = json.loads(cli("changes", "--since", "2024-12-31", "--json", db=db, check=True).stdout)
    batches = list(dict.fromkeys(row["id"] for row in rows))
    assert len(batches) == 6, rows
    return batches[:5]


def test_an_id_of_a_batch_that_left_the_note_alone_reads_it_as_it_stood(vault, cli) -> None:
    _, db, (r1, r2, r3, r4, r5) = vault
    assert cli("read", "Plan.md", "--as-of", r3, db=db, check=True).stdout == ONE  # batch 3 changed Other.md only
    assert cli("read", "Plan.md", "--as-of", r5, db=db, check=True).stdout == TWO
    assert cli("read", "Plan.md", "--as-of", r2, db=db, check=True).stdout == ONE  # the id history prints
    as_json = json.loads(cli("read", "Plan.md", "--as-of", r3, "--json", db=db, check=True).stdout)
    assert as_json["id"] == r2  # the revision it had then, named by the batch that made it


def test_diff_from_an_id_is_the_vault_after_that_batch(vault, cli) -> None:
    _, db, (r1, r2, r3, r4, r5) = vault
    out = cli("diff", "Plan.md", "--from", r3, "--to", r5, db=db, check=True).stdout
    assert "-first" in out and "+second" in out
    before = cli("diff", "Plan.md", "--from", r1, "--to", r3, db=db, check=True).stdout  # not there yet after r1
    assert f"--- Plan.md (absent after {r1})" in before and "+first" in before
    gone = cli("diff", "Gone.md", "--from", r3, "--to", r4, db=db, check=True).stdout  # deleted by batch 4
    assert f"+++ Gone.md (absent after {r4})" in gone and "-soon deleted" in gone
    assert cli("diff", "Plan.md", "--from", r3, "--to", r2, db=db, check=True).stdout == ""  # the same revision


def test_restore_as_of_an_id_of_a_batch_that_left_the_note_alone(vault, cli) -> None:
    root, db, (r1, r2, r3, r4, r5) = vault
    cli("restore", "Plan.md", "--as-of", r3, db=db, check=True)
    assert (root / "Plan.md").read_text(encoding="utf-8") == ONE
    cli("restore", "Plan.md", "--revision", r5, db=db, check=True)
    assert (root / "Plan.md").read_text(encoding="utf-8") == TWO


def test_a_wrong_revision_of_a_right_path_says_so(vault, cli) -> None:
    _, db, (r1, r2, r3, r4, r5) = vault
    for args, said in (
        (("read", "Plan.md", "--as-of", r1), f"note 'Plan.md' did not exist yet after batch 1 ({r1}): its first "),
        (("read", "Gone.md", "--as-of", r5), f"did not exist after batch 5 ({r5}): it was deleted in {r4}"),
        (("read", "Plan.md", "--as-of", "deadbeef"), "note 'Plan.md' has no revision 'deadbeef' (its revisions: "),
        (("restore", "Plan.md", "--revision", "r99", "--dry-run"), "vault 'vault' has no revision r99: its latest"),
    ):
        done = cli(*args, db=db)
        assert done.returncode == 1 and done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
        assert done.stdout == ""


@pytest.mark.anyio
async def test_mcp_doors_take_what_the_other_doors_print(vault) -> None:
    root, db, (r1, r2, r3, r4, r5) = vault
    async with Client(build_server(ServeConfig(db=db, root=root, allow_writes=True))) as c:
        changes = sc(await c.call_tool("list_changes", {"since": "2024-12-31"}))["changes"]
        assert [row["id"] for row in changes if row["path"] == "Other.md"] == [r3, r5]
        read = sc(await c.call_tool("read_note", {"path": "Plan.md", "as_of": r3}))
        assert read["content"] == ONE and read["id"] == r2
        diff = sc(await c.call_tool("diff_note", {"path": "Plan.md", "from": r3, "to": r5}))["diff"]
        assert "-first" in diff and "+second" in diff
        for wrong, said in (
            ({"path": "Plan.md", "from": "deadbeef"}, "note 'Plan.md' has no revision 'deadbeef'"),
            ({"path": "Plan.md", "from": r1, "to": r1}, "existed at neither time"),
        ):
            message = error_text(await c.call_tool("diff_note", wrong))
            assert said in message and "Find the right path" not in message, message
        message = error_text(await c.call_tool("read_note", {"path": "Plan.md", "as_of": r1}))
        assert f"did not exist yet after batch 1 ({r1})" in message, message
        assert message.endswith("note_history lists the note's revisions.") and "later as_of" not in message
        message = error_text(await c.call_tool("read_note", {"path": "Nope.md", "as_of": r3}))
        assert "Find the right path" in message, message  # a wrong path is still said to be one


@pytest.mark.anyio
async def test_expected_revision_takes_the_ids_list_changes_history_and_read_note_print(vault, cli) -> None:
    root, db, (r1, r2, r3, r4, r5) = vault
    history = json.loads(cli("history", "Plan.md", "--json", db=db, check=True).stdout)
    async with Client(build_server(ServeConfig(db=db, root=root, allow_writes=True))) as c:
        # an id from list_changes (a batch that left the note alone), one from history, read_note's id and
        # content hash, the digits history shows
        latest = sc(await c.call_tool("read_note", {"path": "Plan.md"}))
        for expected in (r5, history[-1]["id"], latest["id"], latest["content_hash"], history[-1]["revision"]):
            edit = {"path": "Plan.md", "expected_revision": expected, "old_text": "second", "new_text": "second"}
            sc(await c.call_tool("edit_note", edit))
        stale = {"path": "Plan.md", "expected_revision": r3, "old_text": "second", "new_text": "third"}
        message = error_text(await c.call_tool("edit_note", stale))
        assert f"not the expected revision {r3}" in message and "nothing was written" in message, message
        assert (root / "Plan.md").read_text(encoding="utf-8") == TWO
        edit = {"path": "Plan.md", "expected_revision": r5, "old_text": "second", "new_text": "third"}
        sc(await c.call_tool("edit_note", edit))
        assert (root / "Plan.md").read_text(encoding="utf-8") == THREE

        now = sc(await c.call_tool("read_note", {"path": "Plan.md"}))["id"]
        sc(await c.call_tool("restore_note", {"path": "Plan.md", "as_of": r3, "expected_revision": now}))
    assert (root / "Plan.md").read_text(encoding="utf-8") == ONE


JUST_BEFORE = "2025-01-03T23:59:59.999999999Z"
"""A nanosecond before batch 4 (known at 2025-01-04T00:00:00Z): rounded, it would include that batch; cut, not."""
JUST_AFTER = "2025-01-04T00:00:00.000000001+00:00"


def test_times_with_nanoseconds_include_exactly_the_batches_known_by_then(vault, cli) -> None:
    _, db, (r1, r2, r3, r4, r5) = vault
    assert cli("read", "Plan.md", "--as-of", JUST_BEFORE, db=db, check=True).stdout == ONE
    assert cli("read", "Plan.md", "--as-of", JUST_AFTER, db=db, check=True).stdout == TWO
    window = cli("changes", "--since", JUST_BEFORE, "--until", JUST_AFTER, "--json", db=db, check=True).stdout
    assert {row["id"] for row in json.loads(window)} == {r4}
    assert cli("ls", "--as-of", JUST_BEFORE, "--json", db=db, check=True).stdout.count('"path"') == 3
    out = cli("diff", "Plan.md", "--from", JUST_BEFORE, "--to", "2025-01-04T00:00:00.000000000Z", db=db).stdout
    assert "-first" in out and "+second" in out
    done = cli("read", "Plan.md", "--as-of", "2025-01-04T00:00:00.0000000001Z", db=db)  # ten digits
    assert done.returncode == 1 and "invalid --as-of" in done.stderr, done.stderr


@pytest.mark.anyio
async def test_mcp_tools_take_times_with_nanoseconds(vault) -> None:
    root, db, (r1, r2, r3, r4, r5) = vault
    async with Client(build_server(ServeConfig(db=db, root=root))) as c:
        assert sc(await c.call_tool("read_note", {"path": "Plan.md", "as_of": JUST_BEFORE}))["content"] == ONE
        assert sc(await c.call_tool("read_note", {"path": "Plan.md", "as_of": JUST_AFTER}))["content"] == TWO
        window = sc(await c.call_tool("list_changes", {"since": JUST_BEFORE, "until": JUST_AFTER}))["changes"]
        assert {row["id"] for row in window} == {r4}


def test_windows_of_changes_and_history_take_ids(vault, cli) -> None:
    _, db, (r1, r2, r3, r4, r5) = vault

    def ids(*args: str) -> list[str]:
        return [row["id"] for row in json.loads(cli(*args, "--json", db=db, check=True).stdout)]

    r6 = ids("changes", "--since", r5)[0]  # the batch of the same time as batch 5: after it, exactly
    assert ids("changes", "--since", DAYS[4]) == []  # the time: every batch of that time is before the window
    assert ids("changes", "--since", r3, "--until", r4) == [r4, r4]  # Plan.md modified, Gone.md deleted
    assert ids("changes", "--since", r4, "--until", r5) == [r5] and r6 not in ids("changes", "--until", r5)
    assert ids("history", "Plan.md", "--since", r2) == [r4] and ids("history", "Plan.md", "--until", r3) == [r2]
    done = cli("changes", "--since", r5, "--until", r4, db=db)
    assert done.returncode == 1 and "until is earlier than since" in done.stderr, done.stderr


@pytest.mark.anyio
async def test_list_changes_and_note_history_take_ids(vault) -> None:
    root, db, (r1, r2, r3, r4, r5) = vault
    async with Client(build_server(ServeConfig(db=db, root=root))) as c:
        window = sc(await c.call_tool("list_changes", {"since": r3, "until": r5}))
        assert [row["id"] for row in window["changes"]] == [r4, r4, r5] and window["since"] == r3
        revisions = sc(await c.call_tool("note_history", {"path": "Plan.md", "since": r2}))["revisions"]
        assert [r["id"] for r in revisions] == [r4]


@pytest.mark.pg
def test_the_same_rule_on_postgresql(tmp_path: Path, cli) -> None:
    pgserver = pytest.importorskip("support.pgserver")
    dsn = pgserver.fresh_or_skip("revision_rule")
    r1, r2, r3, r4, r5 = build(tmp_path / "vault", dsn, cli)
    assert cli("read", "Plan.md", "--as-of", r3, db=dsn, check=True).stdout == ONE
    before = cli("diff", "Plan.md", "--from", r1, "--to", r3, db=dsn, check=True).stdout
    assert f"--- Plan.md (absent after {r1})" in before and "+first" in before
    window = json.loads(cli("changes", "--since", r5, "--json", db=dsn, check=True).stdout)
    assert [row["path"] for row in window] == ["Late.md"]  # the batch of the same time, after r5 exactly
    assert cli("read", "Plan.md", "--as-of", JUST_BEFORE, db=dsn, check=True).stdout == ONE


def test_an_id_with_a_validity_time_reads_what_applied_then_as_known_after_that_batch(tmp_path: Path, cli) -> None:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    policy = root / "Policy.md"
    for day, text in (("2025-01-01", "# Policy\n\nold rule\n"), ("2025-01-02", NEW_RULE)):
        policy.write_text(text, encoding="utf-8")
        assert cli("import", str(root), "--known-at", day, db=db).returncode == 0
    r2 = json.loads(cli("history", "Policy.md", "--json", db=db, check=True).stdout)[-1]["id"]
    for as_of in ("2025-01-02", r2):  # the same answer for the time and the id of the same batch
        said = cli("read", "Policy.md", "--as-of", as_of, "--valid-at", "2025-06-01", db=db, check=True).stdout
        assert said == "# Policy\n\nold rule\n", as_of
    assert cli("read", "Policy.md", "--as-of", r2, "--valid-at", "2030-06-01", db=db, check=True).stdout == NEW_RULE


NEW_RULE = "---\nvalid_from: 2030-01-01\n---\n# Policy\n\nnew rule\n"


def test_the_ids_changes_prints_are_the_ids_every_door_takes(vault, cli) -> None:
    """`changes` prints each row's revision id as `r12`, the form `read`, `diff` and `restore` take."""
    _, db, (r1, r2, r3, r4, r5) = vault
    lines = cli("changes", "--since", "2024-12-31", db=db, check=True).stdout.splitlines()
    printed = [line.split()[1] for line in lines]
    assert printed[:5] == [r1, r2, r3, r4, r4], lines
    assert cli("read", "Plan.md", "--as-of", printed[2], db=db, check=True).stdout == ONE

"""A question about a time before the vault's history: before its first batch, or before a retention purge's horizon.

An empty answer there must say why (the vault did not exist yet, or forgot that time), in the library's result,
the command line's line and ``--json``, and the MCP tools' results; never look like "nothing matched".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from support.cli import invoke
from support.mcp_helpers import error_text, listed_paths, sc

from vaultsync import Vault
from vaultsync.cli.history import window_note
from vaultsync.errors import ConfigError, NoteNotFound
from vaultsync.server import ServeConfig, build_server
from vaultsync.times import format_time

T1, T2, T3 = "2024-05-01T12:00:00Z", "2024-06-01T00:00:00Z", "2024-07-01T00:00:00Z"
EARLY = "2001-01-01"


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, Path]:
    """A vault whose history starts at T1 (Alpha), then Beta at T2 (Alpha deleted), then Gamma at T3."""
    root, db = tmp_path / "notes", tmp_path / "db" / "vaultsync.db"
    root.mkdir()
    (root / "Alpha.md").write_text("# Alpha\n\nthe lighthouse keeper\n", encoding="utf-8")
    with Vault.open(db, root=root) as vault:
        vault.sync(known_at=T1)
        (root / "Beta.md").write_text("# Beta\n\nanother lighthouse\n", encoding="utf-8")
        (root / "Alpha.md").unlink()
        vault.sync(known_at=T2)
        (root / "Gamma.md").write_text("# Gamma\n\nno beacon here\n", encoding="utf-8")
        vault.sync(known_at=T3)
    return db, root


def test_search_before_the_first_batch_says_so(history: tuple[Path, Path]) -> None:
    db, _ = history
    with Vault.open(db, readonly=True) as vault:
        early = vault.search("lighthouse", as_of=EARLY)
        assert (early.hits, early.before_history, early.first_batch) == ([], True, T1)
        at_start = vault.search("lighthouse", as_of=T1)  # the first batch itself is history
        assert [h["path"] for h in at_start.hits] == ["Alpha.md"] and at_start.before_history is False
        missing = vault.search("zeppelin", as_of=T2)  # nothing matched: not the same answer
        assert (missing.hits, missing.before_history, missing.first_batch) == ([], False, T1)
        assert format_time(vault.first_known_at) == T1
        data = early.to_json()
        assert list(data)[:6] == ["query", "as_of", "valid_at", "mode", "match", "hits"]  # added, not renamed
        assert (data["before_history"], data["first_batch"]) == (True, T1)


def test_a_vault_with_no_batch_yet(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    with Vault.open(tmp_path / "v.db", root=root) as vault:
        found = vault.search("anything")
        assert (found.hits, found.before_history, found.first_batch, vault.first_known_at) == ([], True, None, None)
        assert window_note(vault, EARLY) == "vault 'empty' has no history yet"


def test_read_before_the_first_batch_names_where_history_starts(history: tuple[Path, Path]) -> None:
    db, _ = history
    with Vault.open(db, readonly=True) as vault:
        with pytest.raises(NoteNotFound) as early:
            vault.read("Alpha.md", as_of=EARLY)
        assert str(early.value) == (
            f"note 'Alpha.md' did not exist as of {EARLY}T00:00:00Z: vault 'notes' has no "
            f"history before {T1} (its first batch)"
        )
        with pytest.raises(NoteNotFound) as gone:  # deleted by then: the history existed, the note did not
            vault.read("Alpha.md", as_of=T3)
        assert "no history" not in str(gone.value) and "was deleted at" in str(gone.value)


def test_cli_search_ls_changes_and_read_before_history(history: tuple[Path, Path]) -> None:
    db, _ = history
    found = invoke("search", "lighthouse", "--as-of", EARLY, db=db)
    assert found.returncode == 0 and found.stdout == ""
    assert found.stderr.strip() == f"no matches: vault 'notes' has no history before {T1} (its first batch)"
    none = invoke("search", "zeppelin", "--as-of", T2, db=db)
    assert (none.returncode, none.stdout, none.stderr.strip()) == (0, "", "no matches")
    data = json.loads(invoke("search", "lighthouse", "--as-of", EARLY, "--json", db=db, check=True).stdout)
    assert (data["hits"], data["before_history"], data["first_batch"]) == ([], True, T1)
    data = json.loads(invoke("search", "lighthouse", "--as-of", T2, "--json", db=db, check=True).stdout)
    assert ([h["path"] for h in data["hits"]], data["before_history"]) == (["Beta.md"], False)

    listed = invoke("ls", "--as-of", EARLY, db=db)
    assert (listed.returncode, listed.stdout) == (0, "")
    assert listed.stderr.strip() == f"no notes: vault 'notes' has no history before {T1} (its first batch)"
    assert json.loads(invoke("ls", "--as-of", EARLY, "--json", db=db, check=True).stdout) == []
    assert invoke("ls", "--as-of", T1, db=db, check=True).stderr == ""

    window = invoke("changes", "--since", EARLY, "--until", "2002-01-01", db=db)
    assert (window.returncode, window.stdout) == (0, "")
    assert window.stderr.strip() == f"no changes: vault 'notes' has no history before {T1} (its first batch)"
    since_early = invoke("changes", "--since", EARLY, db=db, check=True)  # the whole history: nothing to say
    assert since_early.stderr == "" and len(since_early.stdout.splitlines()) == 4

    read = invoke("read", "Alpha.md", "--as-of", EARLY, db=db)
    assert read.returncode == 1
    assert read.stderr.strip() == (
        f"Error: note 'Alpha.md' did not exist as of {EARLY}T00:00:00Z: vault 'notes' "
        f"has no history before {T1} (its first batch) (--as-of)"
    )


def test_before_a_retention_horizon(history: tuple[Path, Path]) -> None:
    """Before a retention purge's horizon the store refuses (as_of, until); a changes window starting there
    is listed from the horizon, and says so."""
    db, root = history
    with Vault.open(db, root=root) as vault:
        vault.purge(before="2024-06-15")
    horizon = "2024-06-15T00:00:00Z"
    with Vault.open(db, readonly=True) as vault:
        with pytest.raises(ConfigError) as refused:
            vault.search("lighthouse", as_of=T2)
        assert refused.value.argument == "as_of" and f"forgot its history before {horizon}" in str(refused.value)
        with pytest.raises(ConfigError) as until:
            vault.changes("2024-01-01", "2024-06-01")
        assert until.value.argument == "until" and f"forgot its history before {horizon}" in str(until.value)
        assert window_note(vault, "2024-01-01") == (
            f"vault 'notes' forgot its history before {horizon} (a retention purge): the changes listed start there"
        )
        assert window_note(vault, "2024-06-20") is None
        assert [r.path for r in vault.changes("2024-01-01")] == ["Gamma.md"]
    clipped = invoke("changes", "--since", "2024-01-01", db=db, check=True)
    assert clipped.stdout.split()[-1] == "Gamma.md"
    assert clipped.stderr.strip() == (
        f"note: vault 'notes' forgot its history before {horizon} (a retention purge): the changes listed start there"
    )
    refused_cli = invoke("changes", "--since", "2024-01-01", "--until", "2024-06-01", db=db)
    assert refused_cli.returncode == 1 and refused_cli.stderr.strip().endswith("or later (--until)")


@pytest.mark.anyio
async def test_mcp_tools_say_before_history(history: tuple[Path, Path]) -> None:
    db, root = history
    with Vault.open(db, readonly=True) as vault:
        async with Client(build_server(ServeConfig.of(vault))) as c:
            early = sc(await c.call_tool("search_notes", {"query": "lighthouse", "as_of": EARLY}))
            assert (early["notes"], early["before_history"], early["first_batch"]) == ([], True, T1)
            later = sc(await c.call_tool("search_notes", {"query": "lighthouse", "as_of": T2}))
            assert ([n["path"] for n in later["notes"]], "before_history" in later) == (["Beta.md"], False)

            listed = sc(await c.call_tool("list_notes", {"as_of": EARLY}))
            assert (listed["folders"], listed["before_history"], listed["first_batch"]) == ({}, True, T1)
            now = sc(await c.call_tool("list_notes", {}))
            assert (listed_paths(now), "before_history" in now) == (["Beta.md", "Gamma.md"], False)

            window = sc(await c.call_tool("list_changes", {"since": EARLY, "until": "2002-01-01"}))
            assert (window["changes"], window["before_history"], window.get("horizon")) == ([], True, None)
            whole = sc(await c.call_tool("list_changes", {"since": EARLY}))
            assert (len(whole["changes"]), whole["before_history"], whole["first_batch"]) == (4, False, T1)

            message = error_text(await c.call_tool("read_note", {"path": "Alpha.md", "as_of": EARLY}))
            assert message.endswith(
                f"vault 'notes' has no history before {T1} (its first batch). Ask about a later as_of."
            )
            wrong = error_text(await c.call_tool("read_note", {"path": "Alpha.md", "as_of": T3}))  # deleted by then
            assert "was deleted at" in wrong and "no history" not in wrong  # when, and how to read it before
    with Vault.open(db, root=root) as vault:
        vault.purge(before="2024-06-15")
    with Vault.open(db, readonly=True) as vault:
        async with Client(build_server(ServeConfig.of(vault))) as c:
            clipped = sc(await c.call_tool("list_changes", {"since": "2024-01-01"}))
            assert [r["path"] for r in clipped["changes"]] == ["Gamma.md"]
            assert clipped["horizon"] == "2024-06-15T00:00:00Z"
            inside = sc(await c.call_tool("list_changes", {"since": "2024-06-20"}))
            assert "horizon" not in inside  # null fields are left out
            refused = error_text(await c.call_tool("search_notes", {"query": "lighthouse", "as_of": T2}))
            assert "forgot its history before 2024-06-15T00:00:00Z" in refused


@pytest.mark.pg
def test_on_postgresql(tmp_path: Path) -> None:
    """The same answers from the PostgreSQL engine (its view is the SQLite one's, on its own connection)."""
    from support import pgserver

    dsn = pgserver.fresh_or_skip("beforehistory")
    root = tmp_path / "notes"
    root.mkdir()
    (root / "Alpha.md").write_text("# Alpha\n\nthe lighthouse keeper\n", encoding="utf-8")
    with Vault.open(dsn, root=root) as vault:
        vault.sync(known_at=T1)
        early, at_start = vault.search("lighthouse", as_of=EARLY), vault.search("lighthouse", as_of=T1)
        assert (early.hits, early.before_history, early.first_batch) == ([], True, T1)
        assert ([h["path"] for h in at_start.hits], at_start.before_history) == (["Alpha.md"], False)
        with pytest.raises(NoteNotFound, match=r"vault 'notes' has no history before 2024-05-01T12:00:00Z"):
            vault.read("Alpha.md", as_of=EARLY)

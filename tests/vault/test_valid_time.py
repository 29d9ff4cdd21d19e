"""The validity axis end to end: read, ls and search at (as_of, valid_at) against a brute-force oracle of
the interval overlay, and the worked example of docs/concepts.md through history, diff, changes, the CLI and MCP."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cli import invoke
from support.search_truth import fresh_keyword, overlay_oracle, same_ranking, split_export

from vaultsync import NoteNotFound
from vaultsync.embed.tokenizer import parse_query
from vaultsync.vault import Vault

PATHS = ["a.md", "b.md", "d/c.md"]
DAYS = [f"2024-03-{d:02d}" for d in range(1, 12)]
WORDS = ["budget", "open", "frozen", "plan", "東京", "risk"]


@st.composite
def revision(draw: st.DrawFn) -> str:
    """A note, often declaring a bounded validity interval (a correction for a period)."""
    fm = []
    start = draw(st.sampled_from([None, *DAYS]))
    end = draw(st.sampled_from([None, *DAYS]))
    if start:
        fm.append(f"valid_from: {start}")
    if end:
        fm.append(f"valid_to: {end}")
    body = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5)))
    serial = draw(st.integers(0, 10**6))  # keeps revisions distinct
    head = "---\n" + "\n".join(fm) + "\n---\n" if fm else ""
    return f"{head}# Note\n\n{body} {serial}\n"


op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(PATHS), revision()),
    st.tuples(st.just("delete"), st.sampled_from(PATHS), st.none()),
)


@pytest.mark.slow
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    steps=st.lists(st.lists(op, min_size=1, max_size=3), min_size=1, max_size=6),
    days=st.lists(st.sampled_from(DAYS), min_size=1, max_size=3, unique=True),
)
def test_read_ls_and_search_follow_the_overlay_oracle(tmp_path_factory, steps, days) -> None:
    base = tmp_path_factory.mktemp("v")
    root = base / "vault"
    root.mkdir()
    known: list[tuple[str, dict[str, list[str]]]] = []
    chains: dict[str, list[str]] = {}
    with Vault.open(base / "db.sqlite", root=root) as vault:
        for i, batch in enumerate(steps):
            for kind, path, content in batch:
                target = root / path
                if kind == "write":
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(content, encoding="utf-8")
                else:
                    target.unlink(missing_ok=True)
            when = dt.datetime(2024, 1, 1 + i, tzinfo=dt.UTC).isoformat()
            vault.sync(known_at=when)
            disk = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in root.rglob("*.md")}
            chains = {
                p: (chains[p] + [c] if chains[p][-1] != c else chains[p]) if p in chains else [c]
                for p, c in disk.items()
            }  # a deleted path starts a new chain when it comes back
            known.append((when, {p: list(c) for p, c in chains.items()}))
        for when, state in known:
            for day in days:
                want = overlay_oracle(state, day)
                assert {
                    r.path: vault.read(r.path, as_of=when, valid_at=day).content
                    for r in vault.ls(as_of=when, valid_at=day)
                } == want
                for path in PATHS:
                    if path not in want:
                        with pytest.raises(NoteNotFound):
                            vault.read(path, as_of=when, valid_at=day)
                header, chunks = split_export(vault.export(as_of=when, valid_at=day))
                texts: dict[str, str] = {}
                for chunk in chunks:
                    texts[chunk["path"]] = texts.get(chunk["path"], "") + chunk["text"]
                assert texts == want
                for query in ("budget", "frozen plan", "東京"):
                    got = vault.search(query, as_of=when, valid_at=day, mode="keyword", limit=100).to_json()
                    same_ranking(
                        [(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in got["hits"]],
                        fresh_keyword(header, chunks, parse_query(query).expression),
                    )
            # without valid_at, read and ls are the revisions exactly as recorded
            assert {r.path: vault.read(r.path, as_of=when).content for r in vault.ls(as_of=when)} == {
                p: c[-1] for p, c in state.items()
            }


POLICY = "---\nvalid_from: {start}\n---\n# Travel policy\n\nEconomy class. Per diem {amount} EUR.\n"
CORRECTION = (
    "---\nvalid_from: 2025-03-01\nvalid_to: 2025-04-01\n---\n# Travel policy\n\n"
    "Economy class. Per diem 45 EUR (corrected for March: the board approved 45, not 40).\n"
)


@pytest.fixture
def policy(tmp_path: Path) -> Vault:
    """The worked example of docs/concepts.md: a policy, then (learned in May) a correction for March only."""
    root = tmp_path / "vault"
    root.mkdir()
    note = root / "Travel policy.md"
    vault = Vault.open(tmp_path / "db.sqlite", root=root)
    note.write_text(POLICY.format(start="2025-01-01", amount=40), encoding="utf-8")
    vault.sync(known_at="2025-01-01")
    note.write_text(CORRECTION, encoding="utf-8")
    vault.sync(known_at="2025-05-10")
    yield vault
    vault.close()


def test_worked_example_through_every_read(policy: Vault) -> None:
    vault = policy
    march_then = vault.read("Travel policy.md", as_of="2025-04-01", valid_at="2025-03-15").content
    march_now = vault.read("Travel policy.md", valid_at="2025-03-15").content
    june_now = vault.read("Travel policy.md", valid_at="2025-06-01").content
    assert "40 EUR" in march_then and "45 EUR" in march_now and "40 EUR" in june_now
    assert "45 EUR" in vault.read("Travel policy.md").content  # without valid_at: the latest revision as recorded
    assert [r.known_at for r in vault.history("Travel policy.md", valid_at="2025-03-15")] == [
        r.known_at for r in vault.history("Travel policy.md")
    ]  # March: both revisions applied in turn
    assert len(vault.history("Travel policy.md", valid_at="2025-06-01")) == 1  # June: the correction never applied
    assert vault.changes(since="2025-02-01", valid_at="2025-06-01") == []
    assert [r.kind for r in vault.changes(since="2025-02-01", valid_at="2025-03-15")] == ["modified"]
    assert vault.diff("Travel policy.md", "2025-04-01", valid_at="2025-06-01") == ""
    assert "+Economy class. Per diem 45" in vault.diff("Travel policy.md", "2025-04-01", valid_at="2025-03-15")
    assert [r.path for r in vault.ls(valid_at="2024-12-01")] == []  # before valid_from: nothing applies
    with pytest.raises(NoteNotFound, match="is valid at"):
        vault.read("Travel policy.md", valid_at="2024-12-01")


def test_cli_valid_at(policy: Vault) -> None:
    db = Path(policy.stats().database)
    done = invoke("read", "Travel policy.md", "--valid-at", "2025-06-01", db=db, check=True)
    assert "40 EUR" in done.stdout
    assert json.loads(invoke("ls", "--valid-at", "2024-12-01", "--json", db=db, check=True).stdout) == []
    done = invoke("changes", "--since", "2025-02-01", "--valid-at", "2025-06-01", "--json", db=db, check=True)
    assert json.loads(done.stdout) == []
    done = invoke("history", "Travel policy.md", "--valid-at", "2025-06-01", "--json", db=db, check=True)
    assert len(json.loads(done.stdout)) == 1
    done = invoke("diff", "Travel policy.md", "--from", "2025-04-01", "--valid-at", "2025-03-15", db=db, check=True)
    assert "+Economy class. Per diem 45" in done.stdout
    done = invoke("read", "Travel policy.md", "--valid-at", "soon", db=db)
    assert done.returncode == 1 and done.stderr.startswith("Error: invalid --valid-at")


@pytest.mark.anyio
async def test_mcp_tools_take_valid_at(policy: Vault) -> None:
    from mcp import Client

    from vaultsync.server import ServeConfig, build_server

    async with Client(build_server(ServeConfig.of(policy)), raise_exceptions=True) as client:
        read = await client.call_tool(
            "read_note", {"path": "Travel policy.md", "valid_at": "2025-03-15", "as_of": "2025-04-01"}
        )
        assert "40 EUR" in read.structured_content["content"]
        listed = await client.call_tool("list_notes", {"valid_at": "2024-12-01"})
        assert listed.structured_content["folders"] == {}
        changes = await client.call_tool("list_changes", {"since": "2025-02-01", "valid_at": "2025-03-15"})
        assert [c["kind"] for c in changes.structured_content["changes"]] == ["modified"]
        history = await client.call_tool("note_history", {"path": "Travel policy.md", "valid_at": "2025-06-01"})
        assert len(history.structured_content["revisions"]) == 1
        diff = await client.call_tool(
            "diff_note", {"path": "Travel policy.md", "from": "2025-04-01", "valid_at": "2025-03-15"}
        )
        assert "45 EUR" in diff.structured_content["diff"]

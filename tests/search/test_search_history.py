"""Exactness on a real history: obsidian-help (English and one translation in each other script, zh, ja and ko
among them) as replayed for the history truth suite (every 16th commit, each imported at its commit time),
searched at cutoffs in 2024."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from support.help_corpus import Replayed
from support.search_truth import BruteVector, FreshKeyword, fresh_default, same_ranking, split_export

from vaultsync.embed.embedders import HashEmbedder
from vaultsync.embed.tokenizer import CJK_RUN, parse_query
from vaultsync.times import parse_time
from vaultsync.vault import Vault

pytestmark = [pytest.mark.corpus, pytest.mark.slow]

SINCE, UNTIL = "2024-01-01", "2024-06-01"


@pytest.fixture(scope="module")
def help_history(help_replayed: Replayed) -> tuple[Path, list[int]]:
    """The session's replay of the Help history (conftest.py ``help_replayed``, read-only here) and the
    knowledge times (UTC microseconds) of its batches in the first five months of 2024."""
    times = [t * 1_000_000 for t in help_replayed.commit_times]
    window = [t for t in times if parse_time(SINCE) <= t < parse_time(UNTIL)]
    assert len(window) >= 4, window
    return help_replayed.db, window


def queries_for(chunks: list[dict], rng: random.Random) -> list[str]:
    """Words from chunks of every top folder, plus two-to-four-character pieces of CJK runs in zh, ja and ko."""
    by_folder: dict[str, list[dict]] = {}
    for chunk in chunks:
        by_folder.setdefault(chunk["path"].split("/")[0], []).append(chunk)
    out = []
    for folder, items in sorted(by_folder.items()):
        words = re.findall(r"[^\W\d_]{3,}", rng.choice(items)["text"])
        if words:
            out.append(" ".join(rng.sample(words, min(2, len(words)))))
        if folder in ("zh", "ja", "ko"):
            runs = [
                r for c in rng.sample(items, min(20, len(items))) for r in CJK_RUN.findall(c["text"]) if len(r) >= 2
            ]
            for run in rng.sample(runs, min(3, len(runs))):
                start = rng.randrange(0, len(run) - 1)
                out.append(run[start : start + rng.randint(2, 4)])
    return out


def test_keyword_exact_on_real_history_all_languages(help_history: tuple[Path, list[int]]) -> None:
    db, times = help_history
    rng = random.Random(5)
    # None: the default cutoff, here the vault at the end of its history (every folder the replay keeps, as of today)
    cutoffs = [times[0], times[len(times) // 2], times[len(times) // 2] + 1, times[-1], None]
    checked_cjk = 0
    with Vault.open(db, readonly=True) as vault:
        for as_of in cutoffs:
            header, chunks = split_export(vault.export(as_of=as_of))
            assert {c["path"].split("/")[0] for c in chunks} >= {"en", "zh", "ja"}
            fresh = FreshKeyword(header, chunks)
            for query in queries_for(chunks, rng):
                expression = parse_query(query).expression
                want = fresh.search(expression, 20)
                got = vault.search(query, as_of=as_of, mode="keyword", limit=20).to_json()
                same_ranking([(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in got["hits"]], want)
                if CJK_RUN.fullmatch(query):
                    assert got["hits"], f"CJK piece {query!r} found nothing"
                    checked_cjk += 1
            fresh.close()
    assert checked_cjk >= 9


def test_vector_exact_on_real_history(help_history: tuple[Path, list[int]]) -> None:
    db, times = help_history
    # the window's first and last states; the default cutoff (today's far larger vault: 64k chunks for a
    # brute force to embed) is checked exactly by the keyword test above and in test_search_exact.py
    with Vault.open(db, readonly=True) as vault:
        for as_of in (times[1], times[-1]):
            _, chunks = split_export(vault.export(as_of=as_of))
            brute = BruteVector(chunks, HashEmbedder())
            for query in ("embed a file", "同期", "plugin settings"):
                got = vault.search(query, as_of=as_of, mode="vector", limit=20).to_json()
                same_ranking(
                    [(h["path"], h["chunk_id"], h["vector"]["score"]) for h in got["hits"]],
                    brute.search(query, 20),
                    rel=0.0,
                    abs_=1e-12,
                )


def words_in_order(query: str) -> re.Pattern[str]:
    """The query's words consecutive and in order in lowercased text, separated by anything that is no word
    character for FTS5's unicode61 (for the plain ASCII words used here: an oracle independent of ``signals``)."""
    return re.compile(r"(?<![^\W_])" + r"[\W_]+".join(re.escape(w) for w in query.lower().split()) + r"(?![^\W_])")


REMEMBERED = [
    # (a window of words a person remembers, the note of the Help vault it was taken from): issue 23's nine
    ("any of the following", "en/Obsidian Sync/Switch to Obsidian Sync.md"),
    ("Enter the name of", "en/Files and folders/Manage notes.md"),
    ("one or more of", "en/Contributing to Obsidian/Financial contributions.md"),
    ("to customize how you", "en/User interface/Workspace.md"),
    ("will appear in a new", "en/Obsidian Publish/Set up Obsidian Publish.md"),
    ("plugin using the command palette", "en/Import notes/Import CSV files.md"),
    ("apply the discount if the", "en/Licenses and payment/Refund policy.md"),
    ("Web Clipper settings to change", "en/Obsidian Web Clipper/Templates.md"),
    ("palette or ribbon icon", "en/Import notes/Import from Airtable.md"),
]


def test_remembered_words_find_their_note_first(help_replayed: Replayed) -> None:
    """Issue 23's nine windows on the Help vault at its newest state: the note holding the words together and in
    order comes first. Where several notes hold them verbatim (the same sentence in several notes: nothing in the
    words tells them apart), those notes come first, before every note that merely has the words."""
    with Vault.open(help_replayed.db, readonly=True) as vault:
        _, chunks = split_export(vault.export())
        for query, wanted in REMEMBERED:
            pattern = words_in_order(query)
            holders = {c["path"] for c in chunks if c["indexed"] and pattern.search(c["indexed_text"].lower())}
            assert wanted in holders, query
            hits = vault.search(query, limit=100).hits
            notes = list(dict.fromkeys(h["path"] for h in hits))
            assert hits[0]["path"] in holders and hits[0]["signals"]["whole"] == 1.0, query
            if len(holders) == 1:
                assert notes[0] == wanted, (query, notes[:5])
            else:  # every holder before every other note, the remembered one among them
                assert set(notes[: len(holders)]) == holders, (query, notes[: len(holders) + 2], holders)


def test_default_exact_on_real_history(help_history: tuple[Path, list[int]]) -> None:
    """The default mode (remembered windows first) at past cutoffs of the real history equals its pipeline over a
    fresh index of the visible chunks: windows of 3-6 words, stopwords included, sampled from each cutoff's chunks."""
    db, times = help_history
    rng = random.Random(23)
    with Vault.open(db, readonly=True) as vault:
        for as_of in (times[0], times[len(times) // 2], times[-1]):
            header, chunks = split_export(vault.export(as_of=as_of))
            fresh = FreshKeyword(header, chunks)
            english = [c for c in chunks if c["indexed"] and c["path"].startswith("en/")]
            queries = [q for q, _ in REMEMBERED[:3]]
            while len(queries) < 12:
                words = re.findall(r"[A-Za-z]+", rng.choice(english)["text"])
                if len(words) >= 6:
                    n = rng.randint(3, 6)
                    start = rng.randrange(len(words) - n + 1)
                    queries.append(" ".join(words[start : start + n]))
            for query in queries:
                for limit in (10, 250):
                    got = vault.search(query, as_of=as_of, limit=limit).hits
                    same_ranking(
                        [(h["path"], h["chunk_id"], h["score"]) for h in got],
                        fresh_default(header, chunks, query, limit, index=fresh),
                    )
            fresh.close()


def test_common_words_best_first_exact_on_real_history(help_history: tuple[Path, list[int]], monkeypatch) -> None:
    """Single common words (each held by a large share of the docs) and two-word queries at past cutoffs equal a
    fresh index: their docs walked best first (``cutoff.Scorer.best_first``, here from the first doc held, for up to
    two phrases, reading few enough docs to suffice or not)."""
    from vaultsync.store.search import cutoff

    db, times = help_history
    outcomes: list[bool] = []
    walk = cutoff.Scorer.best_first
    monkeypatch.setattr(
        cutoff.Scorer, "best_first", lambda self, *a: (outcomes.append(walk(self, *a)), outcomes[-1])[1]
    )
    monkeypatch.setattr(cutoff, "SHARE", 0)
    monkeypatch.setattr(cutoff, "WALKED", 2)
    queries = ["the", "to", "obsidian", "note", "link*", '"you can"', "the note", "obsidian plugin", "and a"]
    with Vault.open(db, readonly=True) as vault:
        for as_of in (times[0], times[len(times) // 2], times[-1]):
            header, chunks = split_export(vault.export(as_of=as_of))
            fresh = FreshKeyword(header, chunks)
            for first, limit in ((4, 1), (4, 10), (16, 10), (256, 25), (4, 200)):
                monkeypatch.setattr(cutoff, "FIRST", first)
                for query in queries:
                    want = fresh.search(parse_query(query).expression, limit)
                    assert want, query
                    got = vault.search(query, as_of=as_of, mode="keyword", limit=limit).hits
                    same_ranking([(h["path"], h["chunk_id"], h["score"]) for h in got], want)
            for query in ("the", "the note", "obsidian plugin"):  # default mode: the whole query's docs too
                got = vault.search(query, as_of=as_of, limit=10).hits
                same_ranking(
                    [(h["path"], h["chunk_id"], h["score"]) for h in got],
                    fresh_default(header, chunks, query, 10, index=fresh),
                )
            fresh.close()
    assert True in outcomes and False in outcomes, outcomes  # walks that sufficed, walks followed by the rest

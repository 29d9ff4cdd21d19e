"""Exactness: at every cutoff, keyword search equals a fresh FTS5 table over `export`, the default mode the same
re-ranking over that fresh table, vectors a brute force."""

from __future__ import annotations

import datetime as dt
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.embedders import FusedHash
from support.search_truth import BruteVector, FreshKeyword, fresh_default, overlay_oracle, same_ranking, split_export

from vaultsync.embed.embedders import HashEmbedder
from vaultsync.embed.tokenizer import parse_query
from vaultsync.store.search import signals
from vaultsync.vault import Vault

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "budget",
    "budget",
    "kickoff",
    "東京で会議",
    "会議室",
    "서울에서 회의",
    "e-mail",
    "C++",
    "café",
    "ﬁle",
    "Ünïcode",
    "plan",
    "plan",
    "risk",
]
PATHS = ["a.md", "b.md", "d/c.md", "d/e.md"]
DAYS = [f"2024-01-{d:02d}" for d in range(1, 20)]
QUERIES = [
    "budget",
    "alpha beta",
    "東京",
    "会議",
    "e-mail",
    "C++",
    "gam*",
    '"budget plan"',
    "서울",
    "cafe",
    "file",
    "risk OR",
    "ünicode",
    "nothing-matches-this",
    "budget plan risk",
    "gam* alpha",
    "plan plan",
    "会議 plan",
    "how do I plan my budget",
]

paragraph = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
section = st.tuples(st.sampled_from(["Plan", "Risks", "会議", "Notes"]), st.lists(paragraph, min_size=1, max_size=3))


@st.composite
def note(draw: st.DrawFn) -> str:
    lines = []
    fm = []
    if draw(st.booleans()):
        fm.append(f"tags: [{draw(st.sampled_from(['project', 'project/x', 'misc']))}]")
    if draw(st.booleans()):
        fm.append(f"aliases: [{draw(st.sampled_from(['Budget plan', '東京メモ', 'alpha']))}]")
    if draw(st.integers(0, 3)) == 0:
        fm.append(f"valid_from: {draw(st.sampled_from(DAYS))}")
    if draw(st.integers(0, 3)) == 0:
        fm.append(f"valid_to: {draw(st.sampled_from(DAYS))}")
    if fm:
        lines += ["---", *fm, "---"]
    if draw(st.booleans()):
        lines.append(f"# {draw(st.sampled_from(['Title', 'Budget', '東京']))}")
    lines.append(draw(paragraph))
    for heading, paras in draw(st.lists(section, max_size=3)):
        lines += ["", f"## {heading}", ""] + paras
    return "\n".join(lines) + "\n"


op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(PATHS), note()),
    st.tuples(st.just("delete"), st.sampled_from(PATHS), st.none()),
    st.tuples(st.just("rename"), st.sampled_from(PATHS), st.sampled_from(PATHS)),
    st.tuples(st.just("copy"), st.sampled_from(PATHS), st.sampled_from(PATHS)),
)


def apply_op(root: Path, step: tuple) -> None:
    kind, path, arg = step
    target = root / path
    if kind == "write":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(arg, encoding="utf-8")
    elif kind == "delete":
        target.unlink(missing_ok=True)
    elif target.exists() and arg != path and not (root / arg).exists():
        (root / arg).parent.mkdir(parents=True, exist_ok=True)
        if kind == "rename":
            target.rename(root / arg)
        else:
            shutil.copyfile(target, root / arg)


def disk_state(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in root.rglob("*.md")}


def check_export_model(vault: Vault, as_of: str, valid_day: str, chains: dict[str, list[str]]) -> None:
    _, chunks = split_export(vault.export(as_of=as_of, valid_at=valid_day))
    got: dict[str, str] = {}
    for chunk in chunks:
        got[chunk["path"]] = got.get(chunk["path"], "") + chunk["text"]
    assert got == overlay_oracle(chains, valid_day)


def check_cutoff(vault: Vault, as_of: str | None, valid_at: str | None) -> None:
    header, chunks = split_export(vault.export(as_of=as_of, valid_at=valid_at))
    fresh, brute = FreshKeyword(header, chunks), BruteVector(chunks, HashEmbedder())  # the cutoff's truth, built once
    try:
        for query in QUERIES:
            check_query(vault, query, as_of, valid_at, header, chunks, fresh, brute)
    finally:
        fresh.close()


def check_query(
    vault: Vault,
    query: str,
    as_of: str | None,
    valid_at: str | None,
    header: dict,
    chunks: list,
    fresh: FreshKeyword,
    brute: BruteVector,
) -> None:
    expression = parse_query(query).expression
    want = fresh.search(expression) if expression else []
    for limit in (1000, 3):
        got = vault.search(query, as_of=as_of, valid_at=valid_at, mode="keyword", limit=limit).to_json()
        assert got["match"] == expression
        same_ranking([(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in got["hits"]], want[:limit])
    for limit in (1000, 3):  # the default mode: the same pipeline over a fresh index (vectors not fused)
        got = vault.search(query, as_of=as_of, valid_at=valid_at, limit=limit).to_json()
        same_ranking(
            [(h["path"], h["chunk_id"], h["score"]) for h in got["hits"]],
            fresh_default(header, chunks, query, limit, index=fresh),
        )
    got = vault.search(query, as_of=as_of, valid_at=valid_at, mode="vector", limit=1000).to_json()
    same_ranking(
        [(h["path"], h["chunk_id"], h["vector"]["score"]) for h in got["hits"]],
        brute.search(query),
        rel=0.0,
        abs_=1e-12,
    )


@pytest.mark.slow
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    steps=st.lists(st.lists(op, min_size=1, max_size=3), min_size=1, max_size=6),
    valid_day=st.sampled_from([None, *DAYS]),
)
def test_keyword_default_and_vector_exact_at_every_cutoff(tmp_path_factory, steps, valid_day) -> None:
    replay_and_check(tmp_path_factory, steps, valid_day)


@pytest.mark.slow
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    steps=st.lists(st.lists(op, min_size=1, max_size=3), min_size=1, max_size=6),
    valid_day=st.sampled_from([None, *DAYS]),
)
def test_default_exact_with_a_small_candidate_window(tmp_path_factory, monkeypatch, steps, valid_day) -> None:
    """With 2 BM25 candidates, chunks holding a query whole are found past the window, at every cutoff."""
    monkeypatch.setattr(signals, "POOL", 2)
    replay_and_check(tmp_path_factory, steps, valid_day)


def replay_and_check(tmp_path_factory, steps: list, valid_day: str | None) -> None:
    base = tmp_path_factory.mktemp("h")
    root = base / "vault"
    root.mkdir()
    times = []
    chains: dict[str, list[str]] = {}
    with Vault.open(base / "db.sqlite", root=root) as vault:
        for i, batch in enumerate(steps):
            for step in batch:
                apply_op(root, step)
            when = dt.datetime(2024, 1, 2 + 2 * i, tzinfo=dt.UTC)
            vault.sync(known_at=when)
            times.append(when.isoformat())
            state = disk_state(root)
            chains = {
                p: (chains[p] + [c] if chains[p][-1] != c else chains[p]) if p in chains else [c]
                for p, c in state.items()
            }
            check_export_model(vault, when.isoformat(), valid_day or when.date().isoformat(), chains)
        for as_of in [None, "2024-01-01", *times]:
            check_cutoff(vault, as_of, valid_day)


def test_one_word_query_is_the_plain_fts5_phrase() -> None:
    """A bare word is one FTS5 phrase: operators are plain text, and a stray double quote is dropped
    (parse_query's documented syntax: quotes delimit phrases, so one inside a word is not text)."""
    for word, phrase in [
        ("budget", "budget"),
        ("C++", "C++"),
        ("e-mail", "e-mail"),
        ("AND", "AND"),
        ("NEAR", "NEAR"),
        ('x"y', "xy"),
        ('"budget', "budget"),
    ]:
        assert parse_query(word).expression == f'"{phrase}"', word


@pytest.mark.slow
def test_fused_default_mode_exact_at_every_cutoff(tmp_path: Path, monkeypatch) -> None:
    from vaultsync.embed import embedders

    monkeypatch.setitem(embedders.EMBEDDERS, "hash-fused", FusedHash)
    root = tmp_path / "vault"
    shutil.copytree(Path(__file__).resolve().parents[2] / "notes", root)
    times = []
    with Vault.open(tmp_path / "db.sqlite", root=root, embedder="hash-fused") as vault:
        for day, edit in [(2, None), (4, "Meetings"), (6, "Projects")]:
            if edit:  # a later batch: one folder's notes change, so older cutoffs see other text
                for note in sorted((root / edit).rglob("*.md"))[:3]:
                    note.write_text(
                        note.read_text(encoding="utf-8") + "\nlater words: sync budget review\n", encoding="utf-8"
                    )
            when = dt.datetime(2024, 1, day, tzinfo=dt.UTC).isoformat()
            vault.sync(known_at=when)
            times.append(when)
        for as_of in [None, *times]:
            header, chunks = split_export(vault.export(as_of=as_of))
            for query in [
                "sync ate my notes",
                "budget review",
                "chili",
                "kickoff decisions",
                "会議",
                "how do I review my budget",
                "what did we decide at the kickoff",
            ]:  # questions too
                for limit in (5, 60):
                    got = vault.search(query, as_of=as_of, limit=limit).hits
                    assert got and all(h["vector"] is not None or h["keyword"] is not None for h in got)
                    same_ranking(
                        [(h["path"], h["chunk_id"], h["score"]) for h in got],
                        fresh_default(header, chunks, query, limit, fused=FusedHash()),
                        rel=1e-9,
                        abs_=1e-9,
                    )


REMEMBERED = "one or more of"
HOLDS = re.compile(r"(?<!\w)one\W+or\W+more\W+of(?!\w)")
"""The remembered words in order, as FTS5 tokenizes plain ASCII words (an oracle independent of ``signals``)."""


def test_whole_query_in_order_ranks_first_at_every_cutoff(tmp_path: Path, monkeypatch) -> None:
    """A chunk holding the query's words together and in order outranks every chunk that merely has them, at
    every cutoff, even when its BM25 puts it far outside the candidate window; exact against a fresh index."""
    monkeypatch.setattr(signals, "POOL", 4)
    root = tmp_path / "vault"
    root.mkdir()
    filler = "a long paragraph about budgets and plans and risks, " * 12
    for i in range(12):  # short chunks with the words, scattered or out of order: the best BM25
        (root / f"scattered-{i:02d}.md").write_text(
            f"# Scattered {i}\n\nof more or one {'one more ' * (i % 3)}of\n", encoding="utf-8"
        )
    steps = [
        {},
        {"wanted.md": f"# Wanted\n\n{filler}then one or more of them {filler}\n"},
        {
            "wanted.md": f"# Wanted\n\n{filler}then one or two more of them {filler}\n",  # the run broken
            "later.md": f"# Later\n\nOne, or more; of: {filler}\n",
        },  # punctuation is no word: still in order
        {
            "later.md": None,
            "folder/again.md": f"{filler}\n\n## One or\n\nmore of {filler}\n",
        },  # across heading and text
    ]
    times = []
    with Vault.open(tmp_path / "db.sqlite", root=root) as vault:
        for day, step in enumerate(steps):
            for path, text in step.items():
                if text is None:
                    (root / path).unlink()
                else:
                    (root / path).parent.mkdir(parents=True, exist_ok=True)
                    (root / path).write_text(text, encoding="utf-8")
            when = dt.datetime(2024, 1, 2 + 2 * day, tzinfo=dt.UTC).isoformat()
            vault.sync(known_at=when)
            times.append(when)
        outside = 0
        for as_of in [None, *times]:
            header, chunks = split_export(vault.export(as_of=as_of))
            holders = {
                (c["path"], c["chunk_id"]) for c in chunks if c["indexed"] and HOLDS.search(c["indexed_text"].lower())
            }
            keyword = [
                (h["path"], h["chunk_id"])
                for h in vault.search(REMEMBERED, as_of=as_of, mode="keyword", limit=1000).hits
            ]
            outside += any(keyword.index(h) >= signals.POOL for h in holders)
            for limit in (3, 1000):
                got = vault.search(REMEMBERED, as_of=as_of, limit=limit).hits
                same_ranking(
                    [(h["path"], h["chunk_id"], h["score"]) for h in got],
                    fresh_default(header, chunks, REMEMBERED, limit),
                )
                order = [(h["path"], h["chunk_id"]) for h in got]
                assert set(order[: len(holders)]) == holders if limit >= len(holders) else set(order) <= holders
                assert [h["signals"]["whole"] for h in got] == [float(o in holders) for o in order]
            if as_of == times[0]:
                assert not holders
            else:
                assert {p for p, _ in holders} == {times[1]: {"wanted.md"}, times[2]: {"later.md"}}.get(
                    as_of, {"folder/again.md"}
                )
        assert outside >= 2  # the holders were outside the BM25 window: found by the phrase query

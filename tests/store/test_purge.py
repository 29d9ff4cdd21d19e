"""Purge on a real history (a slice of the Obsidian Help replay with planted secrets): no trace remains
anywhere, and every answer at every cutoff is exactly what the redacted (or shortened) history implies.

Truth comes from outside our code: the files the test itself wrote into the vault at each batch
(redacted with ``str.replace``), and a fresh FTS5 index / brute-force vectors over ``export``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.engines import own_store, sqlite_file
from support.purge_history import (
    S_ASCII,
    S_CJK,
    S_FRONT,
    S_SPAN,
    S_STASH,
    SECRETS,
    STASH,
    STASH_RENAMED,
    History,
    distinctive_terms,
    find_traces,
    latest,
    redact,
    tokens,
)
from support.search_truth import FreshKeyword, brute_vector, same_ranking, split_export

from vaultsync import NoteNotFound
from vaultsync.embed.embedders import HashEmbedder
from vaultsync.embed.tokenizer import parse_query
from vaultsync.errors import ConfigError
from vaultsync.vault import Vault

pytestmark = [pytest.mark.corpus]

NAMED = {"ascii": S_ASCII, "cjk": S_CJK, "span": S_SPAN, "frontmatter": S_FRONT, "renamed-deleted": S_STASH}
QUERIES = ["purged", "wolfheading tailfox99", "quokka ledger", "credentials", "口令", "obsidian vault", "stash"]


def needles(names: dict[str, str]) -> dict[str, list[bytes]]:
    return {name: [s.encode("utf-8")] for name, s in names.items()}


def corpus_terms(history: History) -> set[str]:
    """Index terms of the unplanted text (the planted files with every secret removed)."""
    unplanted = "\n".join(text for state in history.truth for text in state.values())
    for s in SECRETS:
        unplanted = unplanted.replace(s, " ")
    return tokens(unplanted)


def check_exact(vault: Vault, history: History, expected: list[dict[str, str] | None]) -> None:
    """At every batch time with an expectation: ls lists exactly its paths, read gives exactly its texts,
    and keyword and vector search equal a fresh index and a brute force over ``export``."""
    everything = sorted({p for state in history.truth for p in state})
    for when, want, last in zip(history.times, expected, latest(history.times)):
        if want is None or not last:
            continue
        assert [r.path for r in vault.ls(as_of=when)] == sorted(want), when
        for path in everything:
            if path in want:
                assert vault.read(path, as_of=when).content == want[path], (path, when)
            else:
                with pytest.raises(NoteNotFound):
                    vault.read(path, as_of=when)
        header, chunks = split_export(vault.export(as_of=when))
        by_note: dict[str, str] = {}
        for chunk in chunks:
            by_note[chunk["path"]] = by_note.get(chunk["path"], "") + chunk["text"]
        assert by_note == want, when
        fresh = FreshKeyword(header, chunks)  # built once, asked every query
        for query in QUERIES:
            expression = parse_query(query).expression
            got = vault.search(query, as_of=when, mode="keyword", limit=1000).to_json()
            same_ranking(
                [(h["path"], h["chunk_id"], h["keyword"]["score"]) for h in got["hits"]], fresh.search(expression)
            )
        fresh.close()
        got = vault.search(QUERIES[2], as_of=when, mode="vector", limit=1000).to_json()
        same_ranking(
            [(h["path"], h["chunk_id"], h["vector"]["score"]) for h in got["hits"]],
            brute_vector(chunks, HashEmbedder(), QUERIES[2]),
            rel=0.0,
            abs_=1e-12,
        )


def test_purged_texts_leave_no_trace_and_history_stays_exact(planted_history: History, planted_db: Path) -> None:
    history = planted_history
    terms = distinctive_terms(NAMED, corpus_terms(history))
    assert all(terms.values()), terms  # each secret has index terms the real corpus never uses
    with Vault.open(planted_db, name="vault", readonly=True) as vault:
        # the planting is what it claims: the span secret crosses a chunk boundary, the others sit in
        # frontmatter (as an alias), a title, a renamed and later deleted note, across many revisions
        when = history.times[6]
        chunks = split_export(vault.export(as_of=when))[1]
        assert not any(S_SPAN in c["text"] for c in chunks)
        assert S_SPAN in vault.read(history.planted["span"], as_of=when).content
        assert S_FRONT in vault.read(history.planted["front"], as_of=when).revision.aliases
        assert S_STASH in vault.read(STASH, as_of=when).revision.title
        kinds = [r.kind for r in vault.history(STASH_RENAMED)]
        assert kinds[0] == "created" and "renamed" in kinds and kinds[-1] == "deleted"
        planted_revisions = sum(
            1 for state in history.truth for text in state.values() if any(s in text for s in SECRETS)
        )
        assert planted_revisions >= 40
        # the detector finds every secret before the purge (it can fail)
        before = find_traces(planted_db, needles(NAMED), terms, vault, history.times)
    for name in NAMED:
        assert any(f.startswith(name) for f in before), (name, before)

    with Vault.open(planted_db, name="vault") as vault:
        result = vault.purge(texts=SECRETS).to_json()
    assert result["command"] == "text" and result["revisions_changed"] >= planted_revisions - 5
    assert result["notes"] == 6 and result["scrubbed"] and result["database_bytes_after"] > 0

    with Vault.open(planted_db, name="vault", readonly=True) as vault:
        assert find_traces(planted_db, needles(NAMED), terms, vault, history.times) == []
        assert vault.check() == []
        check_exact(vault, history, [{p: redact(t) for p, t in state.items()} for state in history.truth])
        stash = vault.read(STASH, as_of=history.times[5]).revision
        assert stash.title == "Stash [purged]" and stash.links and stash.links[0]["target"]
        front = vault.read(history.planted["front"], as_of=history.times[5]).revision
        # parsed again as if typed: `api_key: [purged]` is YAML for a one-item list
        assert front.frontmatter["api_key"] == ["purged"] and S_FRONT not in str(front.aliases)
        with sqlite_file(planted_db) as con:
            record = con.execute("SELECT command, detail, revisions_changed, notes, scrubbed_at FROM purges").fetchall()
    assert record == [("text", "5 strings", result["revisions_changed"], 6, record[0][4])] and record[0][4]


def test_purged_note_is_gone_under_every_name(planted_history: History, planted_db: Path) -> None:
    history = planted_history
    terms = distinctive_terms({"stash": S_STASH}, corpus_terms(history))
    with Vault.open(planted_db, name="vault", readonly=True) as vault:
        assert find_traces(planted_db, needles({"stash": S_STASH}), terms, vault, history.times)
    with Vault.open(planted_db, name="vault") as vault:
        result = vault.purge(note=STASH_RENAMED).to_json()  # its later name: the earlier one goes too
    assert (result["command"], result["notes"]) == ("note", 2) and result["revisions_removed"] >= 9
    with Vault.open(planted_db, name="vault", readonly=True) as vault:
        assert find_traces(planted_db, needles({"stash": S_STASH}), terms, vault, history.times) == []
        assert vault.check() == []
        for name in (STASH, STASH_RENAMED):
            with pytest.raises(NoteNotFound):
                vault.history(name)
        check_exact(
            vault,
            history,
            [{p: t for p, t in state.items() if p not in (STASH, STASH_RENAMED)} for state in history.truth],
        )


def test_retention_keeps_exactly_what_was_visible_from_the_horizon_on(
    planted_history: History, planted_db: Path
) -> None:
    history = planted_history
    k = 9
    horizon = history.times[k]
    # text only ever visible before the horizon: the early credential lines and ledger revisions
    gone = {f"credentials rev {i}": f"API credentials (rev {i}): " for i in range(2, k)}
    gone |= {f"ledger rev {i}": f"ledger rev {i}: " for i in range(3, 8)}
    with Vault.open(planted_db, name="vault", readonly=True) as vault:
        assert set(gone) == {
            f.split(" in ")[0] for f in find_traces(planted_db, needles(gone), {}, vault, history.times[:k])
        }
    with Vault.open(planted_db, name="vault") as vault:
        result = vault.purge(before=horizon).to_json()
    assert result["command"] == "before" and result["revisions_removed"] > 0
    with Vault.open(planted_db, name="vault", readonly=True) as vault:
        assert find_traces(planted_db, needles(gone), {}, vault, history.times[k:]) == []
        assert vault.check() == []
        check_exact(vault, history, [state if i >= k else None for i, state in enumerate(history.truth)])
        with pytest.raises(ConfigError, match="forgot its history before"):
            vault.read(history.planted["ascii"], as_of=history.times[k - 1])
        # the rename (visible only before the horizon) is gone; the note's history starts where retention began
        assert [r.kind for r in vault.history(STASH_RENAMED)] == ["modified", "modified", "modified", "deleted"]
        changes = vault.changes(since="2000-01-01")  # a start before the horizon means the horizon
        with own_store(planted_db) as store:
            stored_horizon = store.horizon(vault.id)
        assert changes and all(r.known_at > stored_horizon for r in changes)

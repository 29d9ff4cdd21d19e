"""Retention on a constructed history with known times (imports with ``known_at``), on both engines: every kept
moment answers exactly as before (ls, read, keyword search), a thinned-away moment answers the kept state before
it, the text only thinned-away revisions held is gone, and a dry run changes nothing.

Truth comes from outside our code: the files the test wrote into the vault before each batch, and which batches a
policy keeps, worked out here with ``datetime.isocalendar`` (not the planner's arithmetic).
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.engines import sqlite_file

from vaultsync import NoteNotFound, Vault
from vaultsync.dsn import is_dsn
from vaultsync.errors import ConfigError
from vaultsync.store import codec
from vaultsync.times import from_micros, to_micros

HOUR = 3_600_000_000
DAY = 24 * HOUR
NOW = to_micros(dt.datetime(2024, 3, 20, 12, 0, tzinfo=dt.UTC))
POLICY = "keep_all=1d hourly=2d daily=10d weekly=forever"
QUERIES = ["lighthouse", "draft", "tide keeper", "storm*"]
WORDS = ["lighthouse", "tide", "keeper", "storm", "harbour", "lantern", "gull", "reef"]


def _history(seed: int = 7) -> tuple[list[int], list[dict[str, str]]]:
    """Batch times (strictly growing, from five weeks ago to an hour ago, often several an hour) and the vault's
    files before each batch: edits, creations, deletions, renames, re-creations and reverts, every text carrying
    a token of its own (``draft-N-``) so that where each text went can be told."""
    rng = random.Random(seed)
    times, t = [], NOW - 35 * DAY
    while t < NOW - HOUR:
        times.append(t)
        t += rng.choice([7, 15, 25, 50, 90, 200, 600, 1500, 2000]) * 60_000_000
    states: list[dict[str, str]] = []
    files: dict[str, str] = {"Home.md": "# Home\n\nThe lighthouse keeper.\n"}
    made = 0
    for i in range(len(times)):
        for _ in range(rng.randint(1, 3)):
            op = rng.random()
            paths = sorted(files)
            if op < 0.45 or len(paths) < 2:
                path = rng.choice([*paths, f"Notes/n{made}.md"])
                made += path not in files
                words = " ".join(rng.choice(WORDS) for _ in range(6))
                files[path] = f"# {Path(path).stem}\n\ndraft-{i}-{rng.randrange(10**6)} {words}\n"
            elif op < 0.6 and len(paths) > 2:
                del files[rng.choice(paths[1:])]
            elif op < 0.75:
                old = rng.choice(paths[1:])
                files[f"Moved/{Path(old).name}"] = files.pop(old)
            elif op < 0.85 and states:
                earlier = rng.choice(states[-4:])
                path = rng.choice(sorted(earlier))
                files[path] = earlier[path]  # back to a text it had (or a deleted note back)
            else:
                path = rng.choice(paths)
                files[path] += f"\nappended draft-{i}-{rng.randrange(10**6)} storm\n"
        if states and files == states[-1]:  # every batch changes something
            files["Home.md"] += f"\ndraft-{i}-{rng.randrange(10**6)} gull\n"
        states.append(dict(files))
    return times, states


def _kept(times: list[int]) -> list[int]:
    """The indexes of the batches POLICY keeps at NOW, worked out by calendar: last of each bucket."""
    last: dict[tuple, int] = {}
    for i, t in enumerate(times):
        age, moment = NOW - t, from_micros(t)
        if age < DAY:
            last[("all", i)] = i
        elif age < 2 * DAY:
            last[("hour", moment.date(), moment.hour)] = i
        elif age < 10 * DAY:
            last[("day", moment.date())] = i
        else:
            last[("week", *moment.isocalendar()[:2])] = i
    return sorted({*last.values(), len(times) - 1})


def _write(root: Path, files: dict[str, str]) -> None:
    for child in root.iterdir() if root.exists() else ():
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


@pytest.fixture
def recorded(db: str, tmp_path: Path) -> Iterator[tuple[str, Path, list[int], list[dict[str, str]]]]:
    times, states = _history()
    root = tmp_path / "vault"
    root.mkdir()
    with Vault.open(db, root=root, name="v") as vault:
        for when, files in zip(times, states):
            _write(root, files)
            vault.sync(known_at=when)
        assert vault.stats().batches == len(times)  # every step changed something: one batch each
    yield db, root, times, states


def _state(vault: Vault, when: int) -> dict[str, str]:
    return {n.path: vault.read(n.path, as_of=when).content for n in vault.ls(as_of=when)}


def _searches(vault: Vault, when: int) -> list:
    """Keyword hits (path, chunk, score) of every query, and vector hits of the first."""
    keyword = [
        [
            (h["path"], h["chunk_id"], h["keyword"]["score"])
            for h in vault.search(q, as_of=when, mode="keyword").to_json()["hits"]
        ]
        for q in QUERIES
    ]
    vector = vault.search(QUERIES[0], as_of=when, mode="vector").to_json()["hits"]
    return [*keyword, [(h["path"], h["chunk_id"], round(h["vector"]["score"], 12)) for h in vector]]


def _everything(vault: Vault, times: list[int]) -> list:
    """Every answer at every batch time, and the counts: what a dry run must leave as it was."""
    return [vault.stats().to_json() | {"database_bytes": 0}] + [(_state(vault, t), _searches(vault, t)) for t in times]


@pytest.mark.slow
def test_thinning_keeps_every_kept_moment_exact_and_forgets_the_rest(recorded) -> None:
    db, root, times, states = recorded
    kept = _kept(times)
    assert 20 < len(kept) < len(times) - 20, (len(kept), len(times))  # the history has something to thin
    with Vault.open(db, root=root, name="v") as vault:
        searched = {i: _searches(vault, times[i]) for i in kept}
        before = _everything(vault, times)
        preview = vault.retention_preview(POLICY, now=NOW)
        assert _everything(vault, times) == before  # the dry run changed nothing
        assert (preview.batches, preview.batches_removed) == (len(times), len(times) - len(kept))
        assert preview.revisions_removed > 0 and preview.bytes_freed > 0 and preview.horizon is None
        stats = vault.stats(POLICY)  # stats says the same (at the current time, so more goes: it is later)
        assert stats.retention is not None and stats.retention["policy"] == POLICY
        assert stats.retention["revisions_removed"] >= preview.revisions_removed

        result = vault.purge(policy=POLICY, now=NOW)
        assert result.command == "retention" and result.revisions_removed >= preview.revisions_removed
        assert result.batches_removed >= preview.batches_removed
        assert vault.check() == []
        assert vault.stats().batches <= len(kept)
        for i, when in enumerate(times):
            earlier = [k for k in kept if k <= i]
            if not earlier:  # before the first kept moment the vault's history has not begun
                assert vault.ls(as_of=when) == []
                continue
            assert _state(vault, when) == states[earlier[-1]], (i, earlier[-1])
            if i in kept:
                assert _searches(vault, when) == searched[i], i
        # the text only thinned-away states held is gone; what a kept state shows stays
        shown = {t for k in kept for t in states[k].values()}
        gone = {t for s in states for t in s.values()} - shown
        assert gone
        stored = _stored_texts(vault, db, states)
        assert shown <= stored and not gone & stored
        # every note's history is one a watcher seeing only the kept states would have written
        for path in {p for s in states for p in s}:
            try:
                revisions = vault.history(path)
            except NoteNotFound:
                continue
            assert revisions[0].kind == "created", (path, revisions[0])
            for older, newer in zip(revisions, revisions[1:]):
                assert not (older.content_hash == newer.content_hash and older.path == newer.path), path
                assert older.known_at <= newer.known_at
                assert newer.kind != "modified" or older.path == newer.path, (path, newer)
                assert newer.kind != "renamed" or newer.renamed_from == older.path, (path, newer)
        purges = len(vault.revision_facts(0).purges)
        again = vault.purge(policy=POLICY, now=NOW)  # nothing left to thin: nothing written, no purge recorded
        assert (again.revisions_removed, again.batches_removed, len(vault.revision_facts(0).purges)) == (0, 0, purges)
        remaining = [vault.batch_info(b.batch_id) for b in vault.batches_after(0, limit=10_000)]
        assert remaining and {b["known_at"] for b in remaining} <= {times[k] for k in kept}


def _stored_texts(vault: Vault, db: str, states: list[dict[str, str]]) -> set[str]:
    """Every whole note text the store holds in any revision (read back by revision id)."""
    everything = {t for s in states for t in s.values()}
    found: set[str] = set()
    for path in {p for s in states for p in s}:
        try:
            revisions = vault.history(path)
        except NoteNotFound:
            continue
        for rev in revisions:
            content = vault.revision_facts(rev.note_id).content
            if content is not None:
                found.add(content)
    if not is_dsn(db):  # below the facade: no stored text holds a token only gone texts had
        with sqlite_file(db) as con:
            chunks = set("\n".join(codec.unpack(r[0]) for r in con.execute("SELECT body FROM texts")).split())
        kept_tokens = {w for t in found for w in _tokens(t)}
        assert kept_tokens <= chunks
        assert not {w for t in everything - found for w in _tokens(t)} - kept_tokens & chunks
    return found


def _tokens(text: str) -> set[str]:
    """The ``draft-N-M`` tokens of a text (each unique to the edit that wrote it)."""
    return {w for w in text.split() if w.startswith("draft-")}


def test_a_finite_policy_forgets_what_is_older_than_its_last_tier(recorded) -> None:
    db, root, times, states = recorded
    with Vault.open(db, root=root, name="v") as vault:
        result = vault.purge(policy="keep_all=1d daily=14d", now=NOW)
        assert result.revisions_removed > 0
        horizon = NOW - 14 * DAY
        at_horizon = max(i for i, t in enumerate(times) if t <= horizon)
        assert _state(vault, horizon) == states[at_horizon]
        with pytest.raises(ConfigError, match="forgot its history before"):
            vault.ls(as_of=horizon - HOUR)
        assert _state(vault, times[-1]) == states[-1]
        assert vault.check() == []


def test_thinning_one_vault_leaves_another_in_the_same_database(db: str, tmp_path: Path) -> None:
    times = [NOW - 3 * DAY + i * HOUR for i in range(3)]  # one day, three hours
    vaults = {}
    for name in ("a", "b"):
        root = tmp_path / name
        root.mkdir()
        vaults[name] = Vault.open(db, root=root, name=name)
        for i, when in enumerate(times):
            (root / "Note.md").write_text(f"# Note\n\n{name} draft {i}\n", encoding="utf-8")
            vaults[name].sync(known_at=when)
    try:
        b_before = [_state(vaults["b"], t) for t in times]
        result = vaults["a"].purge(policy="daily=forever", now=NOW)
        assert (result.batches_removed, result.revisions_removed) == (2, 2)
        assert [_state(vaults["a"], t) for t in times] == [{}, {}, {"Note.md": "# Note\n\na draft 2\n"}]
        assert [_state(vaults["b"], t) for t in times] == b_before and vaults["b"].stats().batches == 3
        assert vaults["a"].check() == [] and vaults["b"].check() == []
    finally:
        for vault in vaults.values():
            vault.close()

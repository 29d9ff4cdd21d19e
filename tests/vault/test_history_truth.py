"""Exact history on a real vault: as-of reads and listings agree with git's own answer, byte for byte.

The Obsidian Help history (../shared/corpora/obsidian-help.bundle) is imported two ways: replayed
commit by commit into a folder with ``vaultsync import --known-at "$COMMIT_TIME"`` (every 16th commit,
2020–2026, English and one translation of each script: conftest.REPLAY_FOLDERS), and backfilled with ``vaultsync
import --from-git`` for two
language folders (vaults that are subfolders of the repository: test_history_truth_git.py). Both
databases are built once per test run by session fixtures in conftest.py (``help_replayed``,
``help_backfilled``), the commands running in this process. Ground truth comes from
../shared/tools/replay_history.py: one
``--list-at DATE`` per date (which names the commit in force) and ``git cat-file`` of ``COMMIT:PATH``
for the bytes; a sample is cross-checked against the tool's own ``--truth`` and against the CLI
(``read --as-of``, ``ls --as-of --json``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from support.help_corpus import HelpCorpus, Replayed, replayed_path
from support.history_truth import SEED, SELECTION, Pair, Truth, check_pairs, coverage, iso, sample_dates, vaultsync

from vaultsync import Vault

pytestmark = [pytest.mark.corpus, pytest.mark.slow]


# ---------------------------------------------------------------- replay with --known-at


@pytest.fixture(scope="module")
def replayed(help_corpus: HelpCorpus, help_replayed: Replayed) -> tuple[Path, Truth, list[int]]:
    """The session's replay of every 16th commit (conftest.py ``help_replayed``), with git's answers for it."""
    return help_replayed.db, Truth(help_corpus.env, SELECTION, replayed_path), help_replayed.commit_times


def test_replayed_reads_match_git(replayed: tuple[Path, Truth, list[int]]) -> None:
    db, truth, commit_times = replayed
    rng = random.Random(SEED)
    dates = sample_dates(rng, commit_times)
    truth.load(dates)
    ever = truth.ever()
    head = set(truth.listings[iso(commit_times[-1])][1])
    gone = sorted(ever - head)
    non_ascii = sorted(p for p in ever if not p.isascii())
    with Vault.open(db, name="help", readonly=True) as vault:
        renamed = sorted(
            {p for r in vault.changes(since="2000-01-01") if r.kind == "renamed" for p in (r.path, r.renamed_from)}
        )
        pairs = []
        for date in dates:
            existing = truth.listings[date][1]
            picks = rng.sample(existing, min(2, len(existing)))
            picks += [rng.choice(p) for p in (existing, gone, non_ascii, renamed, sorted(ever)) if p]
            pairs += [Pair("help", path, date, path) for path in dict.fromkeys(picks)]
        wrong = check_pairs(truth, {"help": vault}, pairs)
        exists = [p.path in set(truth.listings[p.date][1]) for p in pairs]
        seen = coverage(pairs, exists, head)
        print(f"{len(dates)} dates, coverage {seen}")
        assert not wrong, f"{len(wrong)} of {len(pairs)} reads differ from git:\n" + "\n".join(wrong[:20])
        assert seen["pairs"] >= 500 and seen["existing"] >= 200 and seen["absent"] >= 100, seen
        assert seen["non_ascii"] >= 50 and seen["gone_by_head"] >= 100 and seen["years"] == 7, seen

        # ls as of every sampled date lists exactly the notes git had then
        for date in dates:
            listed = [r.path for r in vault.ls(as_of=date)]
            assert listed == sorted(truth.listings[date][1]), f"ls as of {date} differs from --list-at"


def test_replayed_cli_matches_truth_tool(replayed: tuple[Path, Truth, list[int]]) -> None:
    """A sample through the command line against replay_history.py --truth / --list-at themselves."""
    db, truth, commit_times = replayed
    rng = random.Random(SEED + 1)
    dates = rng.sample(sample_dates(rng, commit_times), 20)
    truth.load(dates)
    ever = sorted(truth.ever())
    for index, date in enumerate(dates):
        existing = truth.listings[date][1]
        path = rng.choice(existing) if existing and index % 3 else rng.choice(ever)
        told = truth.tool("--truth", date, path)
        read = vaultsync(db, "read", path, "--as-of", date)
        assert (read.returncode, read.stdout_bytes) == (told.returncode, told.stdout), (path, date, read.stderr)
        if read.returncode:
            assert read.stderr.startswith("Error: ") and "Traceback" not in read.stderr
        # the batched truth used for the bulk agrees with the tool's own --truth
        assert truth.contents([(truth.listings[date][0], path)])[0] == (told.stdout if told.returncode == 0 else None)
    for date in dates[:4]:
        listed = vaultsync(db, "ls", "--as-of", date, "--json")
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)
        told = truth.tool("--list-at", date).stdout.decode().split("\n")
        assert [r["path"] for r in rows] == sorted(p for p in told if p and truth.keep(p))
        assert all({"path", "known_at", "content_hash", "size"} <= set(r) for r in rows)

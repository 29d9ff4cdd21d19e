"""Exact history of ``import --from-git``: as-of reads and listings agree with git's own answer, byte for byte.

Two language folders of the Obsidian Help bundle are backfilled with ``vaultsync import --from-git``, each its
own vault (a subfolder of the repository), once per test run (conftest.py ``help_backfilled``); the checks are
those of test_history_truth.py, whose helpers this module uses. A module of its own so that pytest-xdist runs
it beside the replay's (the two corpus databases are built on two workers at once).
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
from support.help_corpus import Backfilled, HelpCorpus, copy_db
from support.history_truth import GIT_VAULTS, SEED, Pair, Truth, check_pairs, coverage, sample_dates, vaultsync

from vaultsync import Vault

pytestmark = [pytest.mark.corpus, pytest.mark.slow]


# ---------------------------------------------------------------- import --from-git


@pytest.fixture(scope="module")
def backfilled(help_corpus: HelpCorpus, help_backfilled: Backfilled) -> tuple[Path, Path, Truth]:
    """The session's --from-git backfill of two language folders (conftest.py ``help_backfilled``)."""
    return help_backfilled.db, help_backfilled.clone, Truth(help_corpus.env, [])


def test_from_git_reads_match_git(backfilled: tuple[Path, Path, Truth]) -> None:
    db, clone, truth = backfilled
    log = subprocess.run(
        ["git", "-C", str(clone), "log", "--first-parent", "--format=%ct", "HEAD", "--", *GIT_VAULTS],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    commit_times = sorted(int(t) for t in log.split())
    rng = random.Random(SEED + 2)
    dates = sample_dates(rng, commit_times, extra=40)
    truth.load(dates)
    ever = truth.ever()
    head = set(truth.list_at("2100-01-01")[1])
    vaults = {name: Vault.open(db, name=name, readonly=True) for name in GIT_VAULTS}
    try:
        pairs = []
        for date in dates:
            for name in GIT_VAULTS:
                prefix = name + "/"
                existing = [p for p in truth.listings[date][1] if p.startswith(prefix)]
                pool = sorted(p for p in ever if p.startswith(prefix))
                gone = [p for p in pool if p not in head]
                picks = rng.sample(existing, min(2, len(existing)))
                picks += [rng.choice(p) for p in (pool, gone) if p]
                pairs += [Pair(name, p[len(prefix) :], date, p) for p in dict.fromkeys(picks)]
        wrong = check_pairs(truth, vaults, pairs)
        exists = [p.repo_path in set(truth.listings[p.date][1]) for p in pairs]
        seen = coverage(pairs, exists, head)
        print(f"{len(dates)} dates, coverage {seen}")
        assert not wrong, f"{len(wrong)} of {len(pairs)} reads differ from git:\n" + "\n".join(wrong[:20])
        assert seen["pairs"] >= 500 and seen["existing"] >= 150 and seen["absent"] >= 100, seen
        assert seen["non_ascii"] >= 50 and seen["gone_by_head"] >= 50, seen

        for date in dates:
            for name, vault in vaults.items():
                prefix = name + "/"
                want = sorted(p[len(prefix) :] for p in truth.listings[date][1] if p.startswith(prefix))
                assert [r.path for r in vault.ls(as_of=date)] == want, f"{name}: ls as of {date} differs"
    finally:
        for vault in vaults.values():
            vault.close()


def test_second_from_git_imports_nothing(backfilled: tuple[Path, Path, Truth], tmp_path: Path) -> None:
    shared, clone, _ = backfilled
    db = copy_db(shared, tmp_path / "git.db")  # this test opens the database for writing
    for name in GIT_VAULTS:
        before = json.loads(vaultsync(db, "--vault", name, "stats", "--json").stdout)
        again = vaultsync(db, "import", str(clone / name), "--from-git", "--json")
        assert again.returncode == 0, again.stderr
        result = json.loads(again.stdout)
        assert result["commits"] == 0 and result["already_imported"] > 1000 and result["batch_id"] is None
        after = json.loads(vaultsync(db, "--vault", name, "stats", "--json").stdout)
        assert (after["batches"], after["revisions"]) == (before["batches"], before["revisions"])
    check = vaultsync(db, "--vault", "zh", "check")
    assert check.returncode == 0, check.stderr


def test_from_git_cli_matches_truth_tool(backfilled: tuple[Path, Path, Truth]) -> None:
    """A sample of the backfilled vaults through the command line against replay_history.py --truth."""
    db, clone, truth = backfilled
    rng = random.Random(SEED + 3)
    log = subprocess.run(
        ["git", "-C", str(clone), "log", "--first-parent", "--format=%ct", "HEAD", "--", "zh"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    dates = sample_dates(rng, sorted(int(t) for t in log.split()))
    ever = sorted(truth.ever())
    for date in rng.sample(dates, 12):
        name = rng.choice(GIT_VAULTS)
        existing = [p for p in truth.list_at(date)[1] if p.startswith(name + "/")]
        repo_path = (
            rng.choice(existing)
            if existing and rng.random() < 0.7
            else rng.choice([p for p in ever if p.startswith(name + "/")])
        )
        told = truth.tool("--truth", date, repo_path)
        read = vaultsync(db, "--vault", name, "read", repo_path[len(name) + 1 :], "--as-of", date)
        assert (read.returncode, read.stdout_bytes) == (told.returncode, told.stdout), (repo_path, date, read.stderr)
    date = rng.choice(dates)
    listed = vaultsync(db, "--vault", "zh", "ls", "--as-of", date, "--json")
    want = sorted(p[3:] for p in truth.tool("--list-at", date).stdout.decode().split("\n") if p.startswith("zh/"))
    assert [r["path"] for r in json.loads(listed.stdout)] == want

"""Restore against git on the Obsidian Help history: 50 random notes put back as they were at 50 random
moments (some deleted since, some renamed since) hold exactly git's bytes of that moment.

Reuses the session's replay (conftest.py ``help_replayed``) on a private copy of its database and of
its vault folder; ground truth is ``replay_history.py --list-at`` plus ``git cat-file``.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from support.help_corpus import HelpCorpus, Replayed, copy_db, replayed_path
from support.history_truth import SELECTION, Truth, iso

from vaultsync import Vault
from vaultsync.vault import restore

pytestmark = [pytest.mark.corpus, pytest.mark.slow]

SEED = 20261201


def test_restore_50_notes_to_50_moments_matches_git(
    help_corpus: HelpCorpus, help_replayed: Replayed, tmp_path: Path
) -> None:
    db = copy_db(help_replayed.db, tmp_path / "restore.db")
    root = tmp_path / "help"
    shutil.copytree(help_replayed.root, root, symlinks=True)
    truth = Truth(help_corpus.env, SELECTION, replayed_path)
    rng = random.Random(SEED)
    times = help_replayed.commit_times
    dates = [iso(rng.randrange(times[0], times[-1])) for _ in range(90)]
    truth.load(dates)
    vault = Vault.open(db, name="help", readonly=False)
    vault.root = root  # the copy, not the session's folder
    try:
        assert vault.sync(source="watch").changed == 0, "the folder is as the replay last recorded it"
        head = {r.path for r in vault.ls()}
        renames = [(r.renamed_from, r.known_at) for r in vault.changes(since="2000-01-01") if r.kind == "renamed"]
        done, kinds = 0, {"renamed_since": 0, "deleted_since": 0, "other": 0}
        moved_cases: list[tuple[str, str, str, str]] = []
        for date in dates:
            if done == 50:
                break
            commit, existing = truth.listings[date]
            if not existing:
                continue
            moved = [p for p, when in renames if p in existing and when > _micros(date)]
            gone = [p for p in existing if p not in head and p not in moved]
            pool = (
                moved
                if kinds["renamed_since"] < 15 and moved
                else gone
                if kinds["deleted_since"] < 15 and gone
                else existing
            )
            path = rng.choice(pool)
            step = restore.plan_note(vault, path, as_of=date, follow=True)  # a note renamed since: where it lives
            kind = "renamed_since" if step.path != path else "deleted_since" if path not in head else "other"
            before = len(vault.history(step.path))
            result = restore.apply(vault, [step], source="restore", detail=f"restore of {step.origin}")
            want = truth.contents([(commit, path)])[0]
            assert want is not None
            assert (root / step.path).read_bytes() == want, f"{path} as of {date} (written at {step.path})"
            if step.changes:
                assert result.summary is not None and result.summary.batch_id is not None
                info = vault.batch_info(result.summary.batch_id)
                assert (
                    info is not None
                    and info["source"] == "restore"
                    and info["detail"].startswith("restore of revision")
                )
                history = vault.history(step.path)
                assert len(history) == before + 1 and history[-1].batch_id == result.summary.batch_id
            again = restore.apply(
                vault, [restore.plan_note(vault, path, as_of=date, follow=True)], source="restore", detail="again"
            )
            assert again.summary is None and again.steps[0].action == "unchanged", "a second restore changes nothing"
            kinds[kind] += 1
            if kind == "renamed_since":
                moved_cases.append((path, date, step.path, step.text or ""))
            done += 1
        assert done == 50, (done, kinds)
        assert kinds["renamed_since"] >= 5 and kinds["deleted_since"] >= 5, kinds
        assert vault.check() == []
        for old, date, new, text in moved_cases:  # found under its old name and its new name alike
            by_new = restore.plan_note(vault, new, as_of=date)
            assert (by_new.path, by_new.text) == (new, text), f"{old} -> {new} as of {date}"
    finally:
        vault.close()
    print(kinds)


def _micros(date: str) -> int:
    from vaultsync.times import parse_time

    return parse_time(date, "date")

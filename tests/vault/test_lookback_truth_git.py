"""``checkout`` and ``blame`` of the backfilled Help history against git's own answers.

The session's ``import --from-git`` backfill of two language folders (conftest.py ``help_backfilled``, each folder
its own vault) is read back: a checkout of the vault as of a commit's time holds exactly the notes of
``git archive`` of that commit, byte for byte; ``blame`` of a note gives, line by line, the commit that
``git blame --first-parent`` names (each git batch records its commit's hash as its detail) at that commit's time.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import tarfile
from pathlib import Path

import pytest
from support.help_corpus import Backfilled
from support.history_truth import GIT_VAULTS, SEED, iso

from vaultsync import Vault
from vaultsync.disk.paths import is_note_path, nfc
from vaultsync.vault.lookback import blame, checkout, lineage

pytestmark = [pytest.mark.corpus]

DATES = 10
NOTES = 20


def _git(clone: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(clone), *args], capture_output=True, check=True).stdout


def clean_commits(clone: Path) -> list[tuple[str, int]]:
    """First-parent commits (hash, unix time) later than every earlier commit and earlier than every later one: as of
    that time, the vault is exactly that commit's tree (no batch stamped after its commit's time hides behind it)."""
    log = [
        line.split()
        for line in _git(clone, "log", "--first-parent", "--reverse", "--format=%H %ct").decode().split("\n")
        if line
    ]
    times = [int(t) for _, t in log]
    later_min = [0] * len(times)
    low = 2**62
    for i in range(len(times) - 1, -1, -1):
        later_min[i] = low
        low = min(low, times[i])
    clean, high = [], 0
    for i, (sha, _) in enumerate(log):
        if times[i] > high and times[i] < later_min[i]:  # strictly: a batch sharing a time may be stamped later
            clean.append((sha, times[i]))
        high = max(high, times[i])
    return clean


def archived_notes(clone: Path, commit: str, folder: str) -> dict[str, bytes]:
    """The notes (as vaultsync counts them: ``is_note_path``) of ``folder`` in ``git archive`` of ``commit``, by
    vault-relative NFC path."""
    out: dict[str, bytes] = {}
    if not _git(clone, "ls-tree", commit, "--", folder):
        return out  # no such folder yet
    with tarfile.open(fileobj=io.BytesIO(_git(clone, "archive", commit, "--", folder + "/"))) as tar:
        for member in tar.getmembers():
            rel = nfc(member.name[len(folder) + 1 :])
            if member.isreg() and is_note_path(rel):
                data = tar.extractfile(member)
                assert data is not None
                out[rel] = data.read()
    return out


def folder_files(top: Path) -> dict[str, bytes]:
    found = {}
    for where, _, files in os.walk(top):
        for name in files:
            path = Path(where) / name
            found[path.relative_to(top).as_posix()] = path.read_bytes()
    return found


def test_checkout_matches_git_archive(help_backfilled: Backfilled, tmp_path: Path) -> None:
    clone = help_backfilled.clone
    touching = set(_git(clone, "log", "--first-parent", "--format=%H", "--", *GIT_VAULTS).decode().split())
    clean = [(sha, t) for sha, t in clean_commits(clone) if sha in touching]
    rng = random.Random(SEED + 11)
    picked = sorted(rng.sample(clean, DATES), key=lambda c: c[1])
    umask = os.umask(0)
    os.umask(umask)
    checked = 0
    for number, (sha, seconds) in enumerate(picked):
        for name in GIT_VAULTS:
            want = archived_notes(clone, sha, name)
            with Vault.open(help_backfilled.db, name=name, readonly=True) as vault:
                if not want and vault.before_history(iso(seconds)):
                    continue  # this folder's history starts later (Korean: 2024)
                to = tmp_path / f"{number}-{name}"
                done = checkout(vault, to, as_of=iso(seconds))
            got = folder_files(to)
            assert sorted(got) == sorted(want), f"{name} as of {iso(seconds)} ({sha}): other notes than git's"
            wrong = [p for p in want if got[p] != want[p]]
            assert not wrong, (
                f"{name} as of {iso(seconds)} ({sha}): {len(wrong)} notes differ from git, e.g. {wrong[:3]}"
            )
            assert done.notes == len(want) and done.bytes == sum(map(len, want.values()))
            modes = {(to / p).stat().st_mode & 0o777 for p in got}
            assert modes <= {0o666 & ~umask}, modes
            checked += len(got)
    print(f"checkout: {DATES} dates, {checked} notes byte-equal to git archive")
    assert checked >= 500, checked


def git_blame(clone: Path, repo_path: str) -> list[tuple[str, int, str]]:
    """``git blame --first-parent`` of the note at HEAD: (commit, committer time, line text) per line."""
    out = _git(clone, "blame", "--first-parent", "--line-porcelain", "HEAD", "--", repo_path)
    lines, sha, when = [], "", 0
    for raw in out.split(b"\n"):
        if raw.startswith(b"\t"):
            lines.append((sha, when, raw[1:].decode("utf-8").rstrip("\r")))
        elif raw.startswith(b"committer-time "):
            when = int(raw.split()[1])
        elif raw and len(raw.split()[0]) == 40 and raw.split()[0].isalnum():
            sha = raw.split()[0].decode()
    return lines


def test_blame_matches_git_blame(help_backfilled: Backfilled) -> None:
    """Twenty notes with three revisions or more (a third of them renamed on the way), line by line.

    Two things make git blame differ where both are right, so they are counted, not failed on: git follows a
    rename whose text also changed (a similarity rename, ``R053``..``R095`` in ``git log --follow``), while the
    store records a rename only when the text moved unchanged, so the note's history starts at that commit and
    its older lines are blamed on it; and where several matchings of lines are equally short (blank lines between
    rewritten paragraphs), git's diff heuristics and difflib may pick different ones."""
    clone = help_backfilled.clone
    listed = _git(clone, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *GIT_VAULTS).decode().split("\0")
    raw_paths = {nfc(p): p for p in listed if p}
    rng = random.Random(SEED + 12)
    notes = lines = comparable = same = same_time = before_start = 0
    differing: list[str] = []
    for name in GIT_VAULTS:
        with Vault.open(help_backfilled.db, name=name, readonly=True) as vault:
            histories = {r.path: vault.history(r.path) for r in vault.ls() if r.size}
            worked = sorted(p for p, h in histories.items() if len(h) >= 3)
            renamed = [p for p in worked if any(r.kind == "renamed" for r in histories[p])]
            picked = rng.sample(renamed, min(len(renamed), NOTES // 6))
            picked += rng.sample(sorted(set(worked) - set(picked)), NOTES // len(GIT_VAULTS) - len(picked))
            for path in picked:
                ours = blame(vault, path)
                theirs = git_blame(clone, raw_paths[f"{name}/{path}"])
                assert [b.text for b in ours] == [t for _, _, t in theirs], f"{path}: other lines than git's"
                start = lineage(vault, vault.read(path).revision)[0]
                wrong = 0
                for b, (sha, seconds, _) in zip(ours, theirs):
                    if seconds * 1_000_000 < start.known_at:  # before the note's history in the store starts
                        before_start += 1
                        continue
                    comparable += 1
                    agree = vault.batch_info(b.origin.batch_id)["detail"] == sha
                    same += agree
                    if agree:  # stamped at its commit's time (later only for a commit older than the one before)
                        assert b.origin.known_at >= seconds * 1_000_000, (path, b.number)
                        same_time += b.origin.known_at // 1_000_000 == seconds
                    wrong += not agree
                if wrong:
                    differing.append(f"{name}/{path}: {wrong} of {len(ours)} lines")
                notes, lines = notes + 1, lines + len(ours)
    print(
        f"blame of {notes} notes, {lines} lines: {before_start} from before the store's start of the note (a git "
        f"similarity rename); of the other {comparable}, {same} name git's commit, {same_time} its time (to the second)"
    )
    print("\n".join(differing))
    assert notes == NOTES and lines >= 1000 and comparable >= 0.9 * lines
    assert same_time >= 0.99 * same, "a line's time is its commit's time"
    assert same >= 0.97 * comparable, f"{comparable - same} of {comparable} lines name another commit than git blame"

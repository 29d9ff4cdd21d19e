"""A retention policy on a prefix of the Obsidian Help history: database size before and after, and every kept
moment still byte-exact against git.

The Help bundle (../shared/corpora/obsidian-help.bundle, read at run time, never copied) is cloned, reset to its
``COMMITS``-th first-parent commit and imported with ``import --from-git`` (one batch a commit, each stamped with
its commit's time, its hash as the batch's detail). Then ``SAVES`` saves over the next three days, each a line
appended to one of 5 notes and recorded as its own batch (what a watcher records of a person at work: git
commits are much coarser). The database is vacuumed and its WAL truncated (the size "before"), a dry run says
what ``POLICY`` would free (its estimate is recorded beside the bytes the purge really frees), then
``Vault.purge(policy=POLICY, now=...)`` thins it as of the last save (the purge vacuums and truncates the WAL
itself: the size "after"), and once more a day later (the steady state).

Checked afterwards: for every batch that remains, the vault as of its time (``ls`` and ``read`` of every note) is
byte for byte the notes of ``git archive`` of its commit (for a save: of the last commit, with the saves up to
then); for a sample of thinned-away batches, the vault as of their time is the kept state before them. Quick: the
sample vault as a git history of two commits, and 40 saves.
"""

from __future__ import annotations

import io
import random
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import apsw

try:  # imported by the harness, or run as a script
    from benchmarks.harness import flatten
    from benchmarks.inputs import bench_work, clone, corpus, git_vault, workdir
except ImportError:
    from harness import flatten
    from inputs import bench_work, clone, corpus, git_vault, workdir

from vaultsync import Vault
from vaultsync.disk.paths import is_note_path, nfc
from vaultsync.retention import parse_policy

COMMITS = 400
SAVES = 430
"""Three days of saves after the last commit, one every 10 minutes on average."""
QUICK_SAVES = 40
FOCUS = 5
"""How many notes the saves go to (a working day's few notes, saved again and again)."""
POLICY = "keep_all=1d hourly=7d daily=30d weekly=forever"
THINNED_SAMPLE = 25
MB = 2**20


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def _notes_of(repo: Path, commit: str) -> dict[str, bytes]:
    """The notes (``is_note_path``) of ``git archive`` of ``commit``, by NFC path."""
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(_git(repo, "archive", commit))) as tar:
        for member in tar.getmembers():
            rel = nfc(member.name)
            if member.isreg() and is_note_path(rel):
                data = tar.extractfile(member)
                assert data is not None
                out[rel] = data.read()
    return out


def _vault_at(vault: Vault, when: int) -> dict[str, bytes]:
    return {n.path: vault.read(n.path, as_of=when).content.encode("utf-8") for n in vault.ls(as_of=when)}


def _compact_size(db: Path) -> int:
    con = apsw.Connection(str(db))
    con.execute("VACUUM")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return sum(Path(str(db) + s).stat().st_size for s in ("", "-wal") if Path(str(db) + s).exists())


def _batches(vault: Vault) -> list[dict[str, Any]]:
    found = [vault.batch_info(b.batch_id) for b in vault.batches_after(0, limit=1_000_000)]
    return [b for b in found if b is not None]


def _edit_session(vault: Vault, repo: Path, start: int, count: int) -> list[tuple[int, str, bytes]]:
    """``count`` saves after ``start``, one every 5 to 15 minutes, each appending a line to one of FOCUS notes (a
    person working on a few notes for days, as a watcher records it): (time, path, the note's new bytes)."""
    rng = random.Random(11)
    notes = sorted(n.path for n in vault.ls())
    focus = rng.sample(notes, min(FOCUS, len(notes)))
    edits, when = [], start
    for i in range(count):
        when += rng.randint(5, 15) * 60_000_000
        path = rng.choice(focus)
        target = repo / path
        data = target.read_bytes() + f"\nSaved draft {i}: {' '.join(rng.sample(notes, 2))}\n".encode()
        target.write_bytes(data)
        vault.sync(known_at=when)
        edits.append((when, path, data))
    return edits


def help_prefix(commits: int, work: Path) -> Path:
    """A clone of the Help bundle reset to its ``commits``-th first-parent commit."""
    repo = clone("obsidian-help.bundle", work / "help")
    first_parent = _git(repo, "rev-list", "--first-parent", "--reverse", "origin/HEAD").decode().split()
    _git(repo, "reset", "-q", "--hard", first_parent[min(commits, len(first_parent)) - 1])
    return repo


def measure(repo: Path, edits: int, work: Path) -> dict[str, Any]:
    """Import ``repo``'s git history, add ``edits`` saves, thin by POLICY, check every kept moment."""
    commits = len(_git(repo, "rev-list", "--first-parent", "HEAD").decode().split())
    last_commit = _git(repo, "rev-parse", "HEAD").decode().strip()
    db = work / "retention.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "vaultsync", "--db", str(db), "import", str(repo), "--from-git", "--json"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    import_s = time.perf_counter() - started
    size_git = _compact_size(db)
    with Vault.open(db, root=repo) as vault:
        git_end = _batches(vault)[-1]["known_at"]
        session = _edit_session(vault, repo, git_end, edits)
    size_before = _compact_size(db)
    base = _notes_of(repo, last_commit)

    def truth(batch: dict[str, Any]) -> dict[str, bytes]:
        """What the vault held at a batch: its commit's tree, or the last commit's with the saves up to then."""
        if batch["known_at"] <= git_end:
            return _notes_of(repo, batch["detail"])
        return base | {path: data for when, path, data in session if when <= batch["known_at"]}

    policy = parse_policy(POLICY)
    with Vault.open(db, root=repo) as vault:
        before = _batches(vault)
        now = before[-1]["known_at"]
        revisions_before = vault.stats().revisions
        started = time.perf_counter()
        preview = vault.retention_preview(policy, now=now)
        preview_s = time.perf_counter() - started
        started = time.perf_counter()
        result = vault.purge(policy=policy, now=now)
        purge_s = time.perf_counter() - started
        after = _batches(vault)
        revisions_after = vault.stats().revisions
        problems = vault.check()
        # every kept moment against git (a batch sharing its time with a later one is that one's moment)
        kept_checked = kept_same = 0
        for batch, following in zip(after, [*after[1:], None]):
            if following is not None and following["known_at"] == batch["known_at"]:
                continue
            kept_checked += 1
            kept_same += _vault_at(vault, batch["known_at"]) == truth(batch)
        # a sample of thinned-away moments answers the kept state before them
        kept_times = {b["known_at"] for b in after}
        thinned = [b for b in before if b["known_at"] not in kept_times]
        sample = random.Random(5).sample(thinned, min(THINNED_SAMPLE, len(thinned)))
        thinned_same = 0
        for batch in sample:
            earlier = [b for b in after if b["known_at"] <= batch["known_at"]]
            thinned_same += _vault_at(vault, batch["known_at"]) == (truth(earlier[-1]) if earlier else {})
        # the next day's application: what an hourly watcher meets once the first thinning is done
        started = time.perf_counter()
        next_day = vault.purge(policy=policy, now=now + 86_400_000_000)
        next_day_s = time.perf_counter() - started
    return {
        "commits": commits,
        "saves": edits,
        "policy": POLICY,
        "history_days": round((now - before[0]["known_at"]) / 86_400_000_000, 1),
        "import_s": round(import_s, 1),
        "batches": {"before": len(before), "after": len(after)},
        "revisions": {"before": revisions_before, "after": revisions_after},
        "database_mb": {
            "git_history": round(size_git / MB, 2),
            "with_saves": round(size_before / MB, 2),
            "after": round(result.database_bytes_after / MB, 2),
        },
        "size_ratio": round(result.database_bytes_after / size_before, 3),
        "dry_run": {
            "batches_removed": preview.batches_removed,
            "revisions_removed": preview.revisions_removed,
            "texts_freed": preview.texts_freed,
            "mb_freed_predicted": round(preview.bytes_freed / MB, 2),
            "mb_freed_actual": round((size_before - result.database_bytes_after) / MB, 2),
            "predicted_over_actual": round(preview.bytes_freed / max(size_before - result.database_bytes_after, 1), 3),
            "seconds": round(preview_s, 2),
        },
        "purge": {
            "revisions_removed": result.revisions_removed,
            "revisions_changed": result.revisions_changed,
            "batches_removed": result.batches_removed,
            "seconds": round(purge_s, 2),
            "scrubbed": result.scrubbed,
        },
        "next_day": {
            "batches_removed": next_day.batches_removed,
            "revisions_removed": next_day.revisions_removed,
            "seconds": round(next_day_s, 2),
        },
        "check_problems": len(problems),
        "kept_moments_byte_exact": f"{kept_same}/{kept_checked}",
        "thinned_moments_answer_previous_kept": f"{thinned_same}/{len(sample)}",
    }


def run(quick: bool) -> dict[str, Any]:
    if quick:  # the sample vault as a git history of two commits
        with workdir("retention") as work:
            return flatten(measure(git_vault(work / "vault"), QUICK_SAVES, work))
    corpus("obsidian-help.bundle")
    work = bench_work("retention")
    return flatten(measure(help_prefix(COMMITS, work), SAVES, work))


if __name__ == "__main__":
    import json

    print(json.dumps(run("--quick" in sys.argv), indent=1))

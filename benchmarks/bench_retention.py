"""A retention policy on a prefix of the Obsidian Help history: database size before and after, and every kept
moment still byte-exact against git.

The Help bundle (../shared/corpora/obsidian-help.bundle, read at run time, never copied) is cloned, reset to its
``COMMITS``-th first-parent commit and imported with ``import --from-git`` (one batch a commit, each stamped with
its commit's time, its hash as the batch's detail). The database is vacuumed and its WAL truncated (the size
"before"), a dry run says what ``POLICY`` would free, then ``Vault.purge(policy=POLICY, now=...)`` thins it as of
the last commit's time (the purge vacuums and truncates the WAL itself: the size "after").

Checked against git afterwards: for every batch that remains, the vault as of its time (``ls`` and ``read`` of
every note) is byte for byte the notes of ``git archive`` of its commit; for a sample of thinned-away batches, the
vault as of their time is the tree of the kept commit before them. Quick: the first 60 commits.
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
    from benchmarks.inputs import bench_work, clone, corpus
except ImportError:
    from inputs import bench_work, clone, corpus

from vaultsync import Vault
from vaultsync.disk.paths import is_note_path, nfc
from vaultsync.retention import parse_policy

COMMITS = 400
QUICK_COMMITS = 60
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


def measure(commits: int, work: Path) -> dict[str, Any]:
    repo = clone("obsidian-help.bundle", work / "help")
    first_parent = _git(repo, "rev-list", "--first-parent", "--reverse", "origin/HEAD").decode().split()
    _git(repo, "reset", "-q", "--hard", first_parent[min(commits, len(first_parent)) - 1])
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
    size_before = _compact_size(db)
    policy = parse_policy(POLICY)
    with Vault.open(db, root=repo) as vault:
        before = _batches(vault)
        now = before[-1]["known_at"]
        revisions_before = vault.stats().revisions
        preview = vault.retention_preview(policy, now=now)
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
            kept_same += _vault_at(vault, batch["known_at"]) == _notes_of(repo, batch["detail"])
        # a sample of thinned-away moments answers the kept state before them
        kept_times = [b["known_at"] for b in after]
        thinned = [b for b in before if b["known_at"] not in set(kept_times)]
        sample = random.Random(5).sample(thinned, min(THINNED_SAMPLE, len(thinned)))
        thinned_same = 0
        for batch in sample:
            earlier = [b for b in after if b["known_at"] <= batch["known_at"]]
            want = _notes_of(repo, earlier[-1]["detail"]) if earlier else {}
            thinned_same += _vault_at(vault, batch["known_at"]) == want
    return {
        "commits": commits,
        "policy": POLICY,
        "history": {
            "first": before[0]["known_at"],
            "last": now,
            "days": round((now - before[0]["known_at"]) / 86_400_000_000, 1),
        },
        "import_s": round(import_s, 1),
        "batches": {"before": len(before), "after": len(after)},
        "revisions": {"before": revisions_before, "after": revisions_after},
        "database_mb": {"before": round(size_before / MB, 2), "after": round(result.database_bytes_after / MB, 2)},
        "size_ratio": round(result.database_bytes_after / size_before, 3),
        "dry_run": {
            "batches_removed": preview.batches_removed,
            "revisions_removed": preview.revisions_removed,
            "texts_freed": preview.texts_freed,
            "mb_freed_at_least": round(preview.bytes_freed / MB, 2),
        },
        "purge": {
            "revisions_removed": result.revisions_removed,
            "revisions_changed": result.revisions_changed,
            "batches_removed": result.batches_removed,
            "seconds": round(purge_s, 2),
            "scrubbed": result.scrubbed,
        },
        "check_problems": len(problems),
        "kept_moments_byte_exact": f"{kept_same}/{kept_checked}",
        "thinned_moments_answer_previous_kept": f"{thinned_same}/{len(sample)}",
    }


def run(quick: bool) -> dict[str, Any]:
    corpus("obsidian-help.bundle")
    return measure(QUICK_COMMITS if quick else COMMITS, bench_work("retention"))


if __name__ == "__main__":
    import json

    print(json.dumps(run("--quick" in sys.argv), indent=1))

"""The watcher applies a configured retention policy by itself (a real watchdog observer, a real SQLite file):
while idle, at its interval, in one log line; without a policy it keeps every revision."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from support.watch_helpers import no_thread_leaks, wait_until  # noqa: F401  (fixtures)

from vaultsync import Vault
from vaultsync.live.watcher import Watcher
from vaultsync.retention import parse_policy
from vaultsync.times import now_micros

FAST = {"step_ms": 50, "debounce_ms": 500}
HOUR = 3_600_000_000


def _three_drafts(vault: Vault, vault_dir: Path) -> list[int]:
    """Three batches within one hour three days ago, each a new draft of Inbox.md; their times."""
    start = (now_micros() - 3 * 24 * HOUR) // (24 * HOUR) * (24 * HOUR) + 9 * HOUR  # 09:00 UTC, three days ago
    times = [start + i * 600_000_000 for i in range(3)]
    for i, when in enumerate(times):
        (vault_dir / "Inbox.md").write_text(f"# Inbox\n\ndraft {['one', 'two', 'three'][i]}\n", encoding="utf-8")
        vault.sync(known_at=when)
    return times


def test_the_watcher_thins_history_by_its_policy_while_idle(
    db_path: Path, vault_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Vault.open(db_path, root=vault_dir) as vault:
        times = _three_drafts(vault, vault_dir)
        batches = vault.stats().batches
        with Watcher(vault, **FAST, retention_every_s=0.2) as watcher:  # no policy: history is kept
            (vault_dir / "Later.md").write_text("# Later\n", encoding="utf-8")
            wait_until(lambda: watcher.batches >= 1)
        assert watcher.retainer.applied == 0 and vault.stats().batches == batches + 1
        assert vault.read("Inbox.md", as_of=times[0]).content.endswith("draft one\n")

        policy = parse_policy("keep_all=1d daily=forever")
        caplog.set_level(logging.INFO, logger="vaultsync.live.watcher")
        with Watcher(vault, **FAST, retention=policy, retention_every_s=0.2) as watcher:
            wait_until(lambda: watcher.retainer.applied >= 1)
            (vault_dir / "Inbox.md").write_text("# Inbox\n\ndraft four\n", encoding="utf-8")
            wait_until(lambda: watcher.batches >= 1)  # recording goes on; the recent batch is kept
        said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("retention")]
        assert said and said[0].startswith("retention (keep_all=1d daily=forever): ")
        assert "batches and" in said[0] and "database" in said[0] and len(said[0].splitlines()) == 1
        # the day's last state stays exact; the two drafts before it in that day are gone with their text
        assert vault.read("Inbox.md", as_of=times[2]).content.endswith("draft three\n")
        assert vault.ls(as_of=times[1]) == []  # the vault's history now begins at the day's kept state
        texts = [r.content_hash for r in vault.history("Inbox.md")]
        assert len(texts) == 2 and vault.read("Inbox.md").content.endswith("draft four\n")
        assert vault.check() == []

"""The change feed tells every batch once, even after a purge removed the last batches it told."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from vaultsync import Vault
from vaultsync.server.feed import ChangeFeed


def test_a_batch_after_a_purge_of_the_last_batches_is_still_told(db_path: Path, vault_dir: Path) -> None:
    told: list[tuple[int, tuple[str, ...]]] = []
    with Vault.open(db_path, root=vault_dir) as vault:
        vault.sync(known_at="2024-01-01")

        @contextlib.contextmanager
        def reading() -> Iterator[Vault]:
            yield vault

        follower = ChangeFeed(reading, lambda news: told.extend((n.batch_id, n.paths) for n in news))
        follower.start()
        (vault_dir / "Scratch.md").write_text("# Scratch\n\nsomething pasted by mistake\n", encoding="utf-8")
        vault.sync(known_at="2024-01-02")
        follower.catch_up()
        assert [paths for _, paths in told] == [("Scratch.md",)]
        (vault_dir / "Scratch.md").unlink()
        vault.purge(note="Scratch.md")  # its only batch is left empty and removed
        follower.catch_up()
        (vault_dir / "Later.md").write_text("# Later\n", encoding="utf-8")
        summary = vault.sync(known_at="2024-01-03")
        follower.catch_up()
    assert told[-1] == (summary.batch_id, ("Later.md",)), told

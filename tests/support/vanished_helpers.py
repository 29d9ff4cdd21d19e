"""A vault of many small notes and a real ``vaultsync watch`` on it, for the vanished-vault tests
(tests/live/test_vanished_vault.py, test_vault_swap.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from support.watch_helpers import WatchProcess, wait_until
from vaultsync import Vault

READY = "watching "


def make_vault(root: Path, notes: int, folders: int = 4) -> list[str]:
    paths = []
    for i in range(notes):
        rel = f"F{i % folders}/Note {i:04d}.md"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# Note {i}\n\nbody of note {i}\n", encoding="utf-8")
        paths.append(rel)
    return paths


def live(db: Path) -> list[str]:
    with Vault.open(db, name="vault", readonly=True) as vault:
        return [r.path for r in vault.ls()]


def deletions(db: Path) -> int:
    with Vault.open(db, name="vault", readonly=True) as vault:
        return sum(r.kind == "deleted" for r in vault.changes(0))


def said(proc: WatchProcess, text: str) -> int:
    return sum(text in line for line in proc.lines)


def resumes(proc: WatchProcess, root: Path, db: Path) -> None:
    """The watcher says the vault is back, and a note written then is recorded."""
    proc.wait_for("is back; recording again")
    (root / "New.md").write_text("# New\n", encoding="utf-8")
    wait_until(lambda: "New.md" in live(db), what="recording to resume")


@contextlib.contextmanager
def watching(
    db: Path,
    root: Path,
    *args: str,
    prefix: list[str] | None = None,
    env: dict[str, str] | None = None,
    undo: Callable[[], None] = lambda: None,
) -> Iterator[WatchProcess]:
    """A real ``vaultsync watch`` once it is watching; after the block it must stop cleanly on SIGTERM.
    ``undo`` (put the folder's modes back, say) runs before the process is killed on a failure."""
    proc = WatchProcess(db, root, *args, prefix=prefix or [], env=env)
    try:
        proc.wait_for(READY)
        yield proc
        proc.proc.terminate()
        assert proc.finish() == 0
    finally:
        undo()
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.finish()

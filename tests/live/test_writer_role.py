"""The writer role (``vaultsync.live.writer_role.WriterRole``): two processes' parts in one vault, played by two
``Vault`` objects on the same database (each holds its own file description of the writer lock, and
``flock`` refuses one while the other holds it, exactly as between two processes)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from vaultsync import Vault
from vaultsync.errors import LockedError
from vaultsync.live import handoff
from vaultsync.live.writer_role import WriterRole


@pytest.fixture
def two(db_path: Path, vault_dir: Path):
    with Vault.open(db_path, root=vault_dir) as first, Vault.open(db_path, root=vault_dir) as second:
        first.sync()
        yield first, second


def test_stand_by_then_take_over_when_the_holder_stops(two) -> None:
    first, second = two
    watching, standing = WriterRole(first), WriterRole(second)
    assert watching.stand_by() and watching.role == "watcher"
    assert not standing.stand_by()
    assert (standing.role, standing.standby) == ("reader", True)
    line = standing.describe_standby()
    assert (
        line is not None
        and line.startswith("vault 'vault' is being watched by pid ")
        and "serving it as a reader" in line
    )
    assert standing.holder() is not None and standing.holder()["watching"] is True
    standing.back_off(0)
    assert not standing.take_over()  # the holder still holds it
    watching.stop()
    assert watching.role == "reader" and not watching.standby
    assert not standing.take_over()  # tried a moment ago: not again before TAKE_OVER_EVERY_S
    standing.back_off(0)
    assert standing.take_over() and standing.role == "watcher"
    assert set(standing.status()) == {"role", "standby", "took_over_at"}
    assert watching.holder()["watching"] is True


def test_wait_returns_when_stopped_or_once_the_holder_stops(two) -> None:
    first, second = two
    holding, waiting = WriterRole(first), WriterRole(second)
    assert holding.take()
    said: list[str] = []
    stop = threading.Event()
    stop.set()
    assert not waiting.wait(stop, say=said.append, every_s=0.01)
    assert said == [f"vault 'vault' is being watched by {second.lock.holder()}; waiting to take over when it stops"]
    releaser = threading.Timer(0.2, holding.release)
    releaser.start()
    try:
        assert waiting.wait(threading.Event(), say=said.append, every_s=0.01)
    finally:
        releaser.join()
    assert said[-1] == "the other watcher stopped; taking over vault 'vault'" and waiting.holding


def test_a_write_waits_for_the_watching_holder_then_takes_over(
    two, vault_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another process watches, a write asks it to write and record the note (``live.handoff``); it
    never answers here (no desk), so the write fails in one line, nothing written; once that process
    stops, the write waiting for it does it itself."""
    first, second = two
    monkeypatch.setattr(handoff, "WAIT_FOR_WRITER_S", 0.3)
    told: list[int | None] = []
    watching, writing = WriterRole(first), WriterRole(second, on_batch=lambda s: told.append(s.batch_id))
    assert watching.take()
    with pytest.raises(LockedError) as refused:
        writing.write("Ideas/Kite.md", "# Kite\n", append=False)
    assert str(refused.value) == (
        f"vault 'vault' is being written by another process watching the vault, since "
        f"{second.lock.holder_info()['started']}, which did not take the request within 0.3 s; nothing was written"
    )
    assert not (vault_dir / "Ideas" / "Kite.md").exists() and told == []
    monkeypatch.setattr(handoff, "WAIT_FOR_WRITER_S", 60.0)
    stopper = threading.Timer(0.5, watching.release)  # the holder stops while the write waits for it
    stopper.start()
    try:
        note = writing.write("Ideas/Kite.md", "# Kite\nFly it.", append=False)
    finally:
        stopper.join()
    assert note.content == "# Kite\nFly it." and note.revision.kind == "created"
    assert told == [note.revision.batch_id]
    assert second.read("Ideas/Kite.md").content == "# Kite\nFly it."
    assert second.requests().waiting() == []

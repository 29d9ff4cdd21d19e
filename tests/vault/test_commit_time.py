"""A batch is known from the moment it becomes visible: its ``known_at`` is taken as it commits, on both engines.

A batch whose writing takes a while (here: a progress callback that waits inside the batch's transaction, as
parsing a large burst does) is stamped when its writing is over, not when it began; a reader polling ``ls``
meanwhile sees, at every poll, exactly what ``ls --as-of`` that moment answers afterwards; and batch times
strictly grow even when the clock reads earlier than the last batch (stepped back, or a ``--known-at`` ahead
of it) or does not move between two batches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.changes import change

from vaultsync import Vault, times
from vaultsync.errors import StoreError
from vaultsync.store import Store
from vaultsync.times import now_micros

SLOW_S = 0.05
"""How long the writer waits after each note it writes, inside the batch's transaction."""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "first.md").write_text("# First\n", encoding="utf-8")
    return folder


@pytest.fixture
def vault(db: str, root: Path) -> Iterator[Vault]:
    with Vault.open(db, root=root, name="v") as opened:
        opened.sync()
        yield opened


def _burst(root: Path, count: int) -> None:
    for i in range(count):
        (root / f"burst-{i:02d}.md").write_text(f"# Burst {i}\n\nnote {i} of the burst\n", encoding="utf-8")


def _slowly(done: int, total: int) -> None:
    time.sleep(SLOW_S)


def test_a_slow_batch_is_stamped_when_its_writing_is_over(vault: Vault, root: Path) -> None:
    _burst(root, 8)
    began = now_micros()
    summary = vault.sync(progress=_slowly)
    ended = now_micros()
    assert summary.batch_id is not None and summary.known_at is not None
    assert began + 8 * SLOW_S * 1_000_000 <= summary.known_at <= ended
    # every way the batch's time is told agrees with the summary
    assert [r.known_at for r in vault.history("burst-00.md")] == [summary.known_at]
    assert {r.known_at for r in vault.changes(began)} == {summary.known_at}
    assert {r.path for r in vault.ls(summary.known_at - 1)} == {"first.md"}
    assert len(vault.ls(summary.known_at)) == 9


def test_a_reader_polling_during_a_burst_sees_what_as_of_answers_afterwards(db: str, vault: Vault, root: Path) -> None:
    _burst(root, 10)
    seen: list[tuple[int, int, list[str]]] = []
    """(the clock before a read, after it, what it listed): a batch that commits during a read is seen or not"""
    began: list[int] = []
    finished = threading.Event()

    def poll() -> None:
        with Vault.open(db, name="v", readonly=True) as reader:
            for _ in range(2000):  # bounded: about 10 s at most
                at = now_micros()
                listed = [r.path for r in reader.ls()]
                seen.append((at, now_micros(), listed))
                if finished.is_set() and len(seen) > 3:
                    at = now_micros()
                    listed = [r.path for r in reader.ls()]
                    seen.append((at, now_micros(), listed))
                    return
                time.sleep(0.005)

    def progress(done: int, total: int) -> None:
        began.append(now_micros())
        time.sleep(SLOW_S)

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        summary = vault.sync(progress=progress)
    finally:
        finished.set()
        reader.join(timeout=30)
    returned = now_micros()
    assert began and summary.known_at is not None
    during = [at for at, _, _ in seen if began[0] <= at < returned]
    assert len(during) >= 10, "the reader polled while the batch was being written"
    assert any(len(paths) == 11 for _, _, paths in seen), "and after it became visible"
    before, after = [r.path for r in vault.ls(summary.known_at - 1)], [r.path for r in vault.ls(summary.known_at)]
    for at, then, paths in seen:
        answers = ([r.path for r in vault.ls(at)], [r.path for r in vault.ls(then)])
        if summary.known_at <= then and at <= returned:
            # the documented window (Concepts, "When a batch is known"): a read whose clock reading falls between
            # the stamp and the end of the commit may see the state before or after the batch
            answers += (before, after)
        assert paths in answers, f"as of {times.format_time(at)} .. {times.format_time(then)}"


def test_batch_times_strictly_grow_whatever_the_clock_does(
    vault: Vault, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ahead = now_micros() + 3_600_000_000  # a batch asserted an hour ahead: the clock now reads earlier than it
    (root / "a.md").write_text("# A\n", encoding="utf-8")
    asserted = vault.sync(known_at=ahead)
    assert asserted.known_at == ahead
    stamps = [ahead]
    for i in range(2):
        (root / "a.md").write_text(f"# A\n\n{i}\n", encoding="utf-8")
        stamps.append(vault.sync().known_at)  # type: ignore[arg-type]
    frozen = now_micros() + 7_200_000_000
    monkeypatch.setattr(times, "now_micros", lambda: frozen)  # a clock that does not move between batches
    for i in range(2):
        (root / "a.md").write_text(f"# A\n\nfrozen {i}\n", encoding="utf-8")
        stamps.append(vault.sync().known_at)  # type: ignore[arg-type]
    monkeypatch.setattr(times, "now_micros", lambda: frozen - 60_000_000)  # stepped back a minute
    (root / "a.md").write_text("# A\n\nstepped back\n", encoding="utf-8")
    stamps.append(vault.sync().known_at)  # type: ignore[arg-type]
    assert stamps[1:3] == [ahead + 1, ahead + 2]
    assert stamps[3:] == [frozen, frozen + 1, frozen + 2]
    assert [r.known_at for r in vault.history("a.md")] == stamps
    # an asserted time equal to the last batch's is still taken as it is (a trusted historical load)
    (root / "a.md").write_text("# A\n\nasserted again\n", encoding="utf-8")
    assert vault.sync(known_at=frozen + 2).known_at == frozen + 2


def test_sqlite_checks_foreign_keys_again_after_a_batch_and_inside_an_outer_transaction(tmp_path: Path) -> None:
    """The SQLite engine writes a batch's own row last, its foreign keys unchecked in that transaction only; a batch
    nested in another transaction has them checked at the outer commit."""
    store = Store(tmp_path / "db.sqlite")
    try:
        vid = store.ensure_vault("v", tmp_path)
        with store.batch(vid) as first:
            first.add_revision(*change("a.md", "# A\n"))
        assert store.db.one("PRAGMA foreign_keys") == (1,)
        with pytest.raises(RuntimeError), store.batch(vid) as failed:
            failed.add_revision(*change("b.md", "# B\n"))
            raise RuntimeError("stop")
        assert store.db.one("PRAGMA foreign_keys") == (1,)
        with store.db.atomic(), store.batch(vid) as nested:
            nested.add_revision(*change("c.md", "# C\n"))
        assert nested.batch_id == first.batch_id + 1 and nested.known_at > first.known_at  # type: ignore[operator]
        assert store.last_batch(vid) == (nested.known_at, "import") and sorted(store.live_state(vid)) == [
            "a.md",
            "c.md",
        ]
        with pytest.raises(StoreError, match="FOREIGN KEY"), store.db.atomic() as con:
            con.execute("INSERT INTO note_ends (note_id, batch_id) VALUES (1, 999)")
    finally:
        store.close()

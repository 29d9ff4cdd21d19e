"""One writer per vault on PostgreSQL, across processes: a writer SIGKILLed in the middle of a batch leaves
nothing of it, its advisory lock goes with its session, and a second writer takes over at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from vaultsync import Vault
from vaultsync.errors import StoreError, VaultsyncError
from vaultsync.store import open_store

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")

WRITER = textwrap.dedent("""
    import hashlib, sys, time
    from vaultsync.parsers import parse_note
    from vaultsync.store import open_store
    from vaultsync.store.contract import Change

    store = open_store(sys.argv[1])
    vid = store.ensure_vault("v", sys.argv[2])
    lock = store.writer_lock("v")
    lock.acquire("vaultsync watch (killed mid-batch)")
    with store.batch(vid, known_at=2_000) as batch:
        for i in range(300):
            text = f"# Note {i}\\n\\nwritten by the writer that will be killed\\n"
            data = text.encode()
            batch.add_revision(Change(f"n{i:03}.md", "created", text, hashlib.sha256(data).hexdigest(), len(data),
                                      None, None, None), parse_note(text, f"n{i:03}.md"))
            if i == 299:
                print("writing", flush=True)
                time.sleep(600)
""")


@pytest.fixture
def dsn(tmp_path: Path) -> str:
    return pgserver.fresh_or_skip("writer")


def test_a_writer_killed_mid_batch_leaves_nothing_and_another_takes_over(dsn: str, tmp_path: Path) -> None:
    from support.changes import change

    store = open_store(dsn)
    try:
        vid = store.ensure_vault("v", tmp_path)
        with store.batch(vid, known_at=1_000) as first:
            first.add_revision(*change("before.md", "# Before\n\nalready there\n"))
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, dsn, str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
            mine = store.writer_lock("v")
            assert not mine.try_acquire()
            assert "killed mid-batch" in (mine.holder() or "")
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        deadline = time.monotonic() + 30  # the server ends the dead client's session when it reads its socket's end
        while not mine.try_acquire():
            assert time.monotonic() < deadline, "the killed writer's advisory lock was never released"
            time.sleep(0.05)
        try:
            assert list(store.live_state(vid)) == ["before.md"]  # nothing of the killed batch
            assert store.last_batch(vid) == (1_000, "import")
            with store.batch(vid, known_at=3_000, source="watch") as second:
                second.add_revision(*change("after.md", "# After\n\nthe second writer\n"))
            assert sorted(store.live_state(vid)) == ["after.md", "before.md"]
            assert store.last_batch_id(vid) == second.batch_id
            with store.view(vid, "v") as view:
                assert view.check() == []
        finally:
            mine.release()
    finally:
        store.close()


def test_batches_of_one_vault_are_serialized_by_its_head_row(dsn: str, tmp_path: Path) -> None:
    """Two engines writing the same vault without the advisory lock: the second batch waits for the first
    (the head row), then sees its time, so known_at and batch order never disagree."""
    import threading

    from support.changes import change

    one, two = open_store(dsn), open_store(dsn)
    try:
        vid = one.ensure_vault("v", tmp_path)
        entered, release, failure = threading.Event(), threading.Event(), []

        def slow() -> None:
            with one.batch(vid, known_at=5_000) as batch:
                batch.add_revision(*change("a.md", "# A\n"))
                entered.set()
                release.wait(30)

        writer = threading.Thread(target=slow)
        writer.start()
        assert entered.wait(30)
        later = threading.Thread(target=lambda: failure.append(_try_batch(two, vid, 4_000)))
        later.start()
        time.sleep(0.3)
        assert later.is_alive()  # waiting on the head row, not writing beside the first batch
        release.set()
        writer.join(30)
        later.join(30)
        assert failure and "earlier than the vault's last batch" in failure[0]
        assert one.last_batch(vid) == (5_000, "import")
    finally:
        one.close()
        two.close()


def _try_batch(store: object, vid: int, known_at: int) -> str:
    from support.changes import change

    try:
        with store.batch(vid, known_at=known_at) as batch:  # type: ignore[attr-defined]
            batch.add_revision(*change("b.md", "# B\n"))
    except VaultsyncError as exc:  # ConfigError: refused once the first batch committed
        return str(exc)
    return "written"


def test_readers_learn_of_committed_batches_through_listen_and_catch_up_after_a_reconnect(
    dsn: str, tmp_path: Path
) -> None:
    import threading

    from support.changes import change

    writer, reader = open_store(dsn), open_store(dsn, readonly=True)
    try:
        vid = writer.ensure_vault("v", tmp_path)
        listener = reader.listen(vid, reader.last_batch_id(vid))
        assert listener.wait(0.2) == []  # nothing yet: waited, found nothing
        with pytest.raises(RuntimeError):
            with writer.batch(vid, known_at=10) as batch:
                batch.add_revision(*change("rolled-back.md", "# R\n"))
                raise RuntimeError("roll back")
        assert listener.wait(0.3) == []  # a batch that rolled back announced nothing

        def later() -> None:
            time.sleep(0.3)
            with writer.batch(vid, known_at=20) as batch:
                batch.add_revision(*change("a.md", "# A\n"))

        thread = threading.Thread(target=later)
        thread.start()
        started = time.monotonic()
        news = listener.wait(30)
        thread.join()
        assert [n.paths for n in news] == [("a.md",)] and time.monotonic() - started < 20
        listener.drop_session()  # the connection is lost; a batch lands meanwhile, its notification with it
        with writer.batch(vid, known_at=30) as batch:
            batch.add_revision(*change("b.md", "# B\n"))
        assert [n.paths for n in listener.wait(5)] == [("b.md",)]  # caught up from the batch log
        listener.wait(0.1)
        assert listener.reconnects == 1
        listener.close()
    finally:
        writer.close()
        reader.close()


def test_batches_written_without_the_index_are_refused_by_search_until_reindexed(dsn: str, tmp_path: Path) -> None:
    from support.changes import change

    bare = open_store(dsn, search=False)  # as the hardened audit log's writer opens the store
    try:
        vid = bare.ensure_vault("v", tmp_path)
        with bare.batch(vid, known_at=10) as batch:
            batch.add_revision(*change("a.md", "# A\n\nharbour\n"))
    finally:
        bare.close()
    store = open_store(dsn)
    try:
        with store.view(vid, "v") as view, pytest.raises(StoreError, match="1 batches behind: reindex"):
            view.search("harbour", mode="keyword")
        assert store.reindex(vid) == 1
        with store.view(vid, "v") as view:
            assert [h["path"] for h in view.search("harbour", mode="keyword")["hits"]] == ["a.md"]
    finally:
        store.close()


def test_a_wait_ends_when_a_batch_commits_a_writer_lets_go_or_the_session_is_lost(dsn: str, tmp_path: Path) -> None:
    """``wakeup().wait`` (what the server's change feed and ``watch --wait`` wait on between polls) ends with
    True on a committed batch's NOTIFY, on a writer giving its lock up, and at once after its session was
    lost (what was announced meanwhile is gone); False when nothing happened or the batch rolled back.
    On SQLite it always waits its time out."""
    import threading

    from support.changes import change

    writer, reader = open_store(dsn), open_store(dsn, readonly=True)
    wakeup = reader.wakeup()
    try:
        vid = writer.ensure_vault("v", tmp_path)
        assert wakeup.wait(0.2) is False
        with pytest.raises(RuntimeError):
            with writer.batch(vid, known_at=10) as batch:
                batch.add_revision(*change("rolled-back.md", "# R\n"))
                raise RuntimeError("roll back")
        assert wakeup.wait(0.3) is False

        def later(act: Any) -> threading.Thread:
            def run() -> None:
                time.sleep(0.3)
                act()

            thread = threading.Thread(target=run)
            thread.start()
            return thread

        def commit() -> None:
            with writer.batch(vid, known_at=20) as batch:
                batch.add_revision(*change("a.md", "# A\n"))

        thread = later(commit)
        assert wakeup.wait(600) is True  # the notification ended it, not the time
        thread.join()
        lock = writer.writer_lock("v")
        lock.acquire("vaultsync watch (test)")
        thread = later(lock.release)
        assert wakeup.wait(600, threading.Event()) is True
        thread.join()
        assert wakeup.reconnects == 0
        wakeup.drop_session()  # the session is lost
        assert wakeup.wait(600) is True and wakeup.reconnects == 1
    finally:
        wakeup.close()
        writer.close()
        reader.close()
    lite = open_store(tmp_path / "lite.db")
    try:
        assert lite.wakeup().wait(0.05, threading.Event()) is False  # SQLite announces nothing
    finally:
        lite.close()


def test_watch_wait_takes_over_when_the_writer_lets_go(dsn: str, tmp_path: Path) -> None:
    """``watch --wait``'s wait (``WriterRole.wait``) on PostgreSQL takes the lock over as soon as the watcher
    gives it up, told by NOTIFY: with an hour between its tries, only the notification can end it."""
    import threading

    from vaultsync.live.writer_role import WriterRole

    (tmp_path / "vault").mkdir()
    first = Vault.open(dsn, root=tmp_path / "vault", name="v")
    second = Vault.open(dsn, root=tmp_path / "vault", name="v")
    try:
        holder, waiter = WriterRole(first), WriterRole(second)
        assert holder.take() and not waiter.take()
        got: list[bool] = []
        stop = threading.Event()
        thread = threading.Thread(target=lambda: got.append(waiter.wait(stop, say=lambda _: None, every_s=3600)))
        thread.start()
        time.sleep(0.5)
        assert not got  # still waiting
        holder.release()
        thread.join(300)
        stop.set()
        assert got == [True] and waiter.holding
    finally:
        second.close()
        first.close()

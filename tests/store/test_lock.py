"""The writer lock's contract, on every lock path this machine can run: fcntl, and with fcntl taken away the
pidfile path (``capabilities.current().lock``; Windows' msvcrt path cannot run on Linux)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.capabilities import weaker

from vaultsync.disk import capabilities
from vaultsync.errors import LockedError
from vaultsync.store.lock import WriterLock

HOLD = """
import sys, time
from vaultsync.store.lock import WriterLock
lock = WriterLock(sys.argv[1], "vault")
lock.acquire(command="vaultsync holder-for-test")
print("ready", flush=True)
time.sleep(120)
"""

RACE = """
import sys
from vaultsync.store.lock import WriterLock
lock = WriterLock(sys.argv[1], "vault")
print("ready", flush=True)
sys.stdin.readline()  # "go": every racer is imported and waiting
print("won" if lock.try_acquire(command="racer") else "lost", flush=True)
sys.stdin.read()  # held (or not) until every racer has tried: the end of input
"""


def hold(db: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, db], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.capabilities_off("no-fcntl")
def test_a_held_lock_names_its_holder_and_a_killed_holder_frees_it(tmp_path: Path, capability_profile: str) -> None:
    db = str(tmp_path / "vaultsync.db")
    proc = hold(db)
    try:
        lock = WriterLock(db, "vault")
        assert not lock.try_acquire()
        with pytest.raises(LockedError, match=rf"pid {proc.pid} \(vaultsync holder-for-test, since 20"):
            lock.acquire()
        assert lock.holder_info()["pid"] == proc.pid
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # fcntl: the OS let go when the holder died; pidfile: the file is still there, and its pid is gone
    assert Path(f"{db}.vault.lock").exists()
    assert lock.holder() is None
    assert lock.try_acquire()
    lock.release()


@pytest.mark.capabilities_off("no-fcntl")
def test_what_decides_is_the_lock_not_a_pid_in_a_file(tmp_path: Path, capability_profile: str) -> None:
    """A lock file naming a live process that holds nothing (a crashed holder whose pid was reused)."""
    db = str(tmp_path / "vaultsync.db")
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        Path(f"{db}.vault.lock").write_text(
            json.dumps({"pid": stranger.pid, "command": "vaultsync watch", "started": "2026-01-01T00:00:00+0000"})
        )
        lock = WriterLock(db, "vault")
        if weaker(capability_profile, "a dead holder's lock is released by the OS"):
            assert capabilities.current().lock == "pidfile"
            with pytest.raises(LockedError, match=f"pid {stranger.pid}"):
                lock.acquire()  # the pidfile path cannot tell a reused pid from the holder
        else:
            assert lock.try_acquire()
            lock.release()
    finally:
        stranger.kill()
        stranger.wait()
    assert lock.try_acquire(), "free once that pid is gone"
    lock.release()


@pytest.mark.capabilities_off("no-fcntl")
@pytest.mark.slow
def test_many_processes_racing_for_a_stale_lock_leave_one_holder(tmp_path: Path, capability_profile: str) -> None:
    db = str(tmp_path / "vaultsync.db")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    Path(f"{db}.vault.lock").write_text(json.dumps({"pid": dead.pid, "command": "crashed", "started": "x"}))
    racers = [
        subprocess.Popen([sys.executable, "-c", RACE, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    try:
        assert [proc.stdout.readline().strip() for proc in racers if proc.stdout] == ["ready"] * 6
        for proc in racers:  # all at once: each is blocked reading its input
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outcomes = [proc.stdout.readline().strip() for proc in racers if proc.stdout is not None]
    finally:
        for proc in racers:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=60)
    assert sorted(outcomes) == ["lost"] * 5 + ["won"]


@pytest.mark.capabilities_off("no-fcntl")
def test_release_lets_the_next_writer_in(tmp_path: Path, capability_profile: str) -> None:
    db = str(tmp_path / "vaultsync.db")
    first, second = WriterLock(db, "vault"), WriterLock(db, "vault")
    first.acquire(command="first", watching=True)
    assert not second.try_acquire()
    first.release()
    assert second.try_acquire(command="second")
    assert second.held and not first.held
    second.release()


@pytest.mark.capabilities_off("no-fcntl")
def test_a_take_over_left_by_a_dead_process_does_not_keep_the_lock(tmp_path: Path, capability_profile: str) -> None:
    db = str(tmp_path / "vaultsync.db")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = json.dumps({"pid": dead.pid, "command": "crashed", "started": "x"})
    Path(f"{db}.vault.lock").write_text(stale)
    Path(f"{db}.vault.lock.takeover").write_text(stale)
    lock = WriterLock(db, "vault")
    assert lock.try_acquire(command="next")
    assert json.loads(Path(f"{db}.vault.lock").read_text())["pid"] != dead.pid
    lock.release()
    if capabilities.current().lock == "pidfile":
        assert not Path(f"{db}.vault.lock.takeover").exists(), "the dead process's take-over file was removed"
        assert not Path(f"{db}.vault.lock").exists()

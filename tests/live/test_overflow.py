"""A watcher whose observer lost events rescans at once, not at the next periodic reconcile (5 minutes).

The inotify case runs for real: a writer process queues far more events than
``fs.inotify.max_queued_events`` while this process holds the GIL (a long ``list.sort``), so watchdog's
reader thread cannot drain the queue and the kernel overflows it. The Windows and FSEvents signals are
checked on their own pieces (those observers cannot run on Linux).
"""

from __future__ import annotations

import importlib.util
import logging
import random
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from support.watch_helpers import no_thread_leaks, wait_until  # noqa: F401  (fixture)

from vaultsync import Vault
from vaultsync.live import overflow
from vaultsync.live.watcher import Watcher

WRITER = """
import sys
root, notes, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def flood():
    for r in range(rounds):
        for i in range(notes):
            with open(f"{root}/n{i:02}.md", "a") as handle:
                handle.write(f"- round {r}\\n")

sys.stdin.readline()
flood()
for i in range(notes):  # created while the queue is full: no event for these ever arrives
    with open(f"{root}/late{i:02}.md", "w") as handle:
        handle.write(f"# late {i}\\n")
flood()
print("done", flush=True)
"""


def _source(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).read_text(encoding="utf-8")


def test_watchdog_still_signals_lost_events_where_we_listen() -> None:
    """Tripwires on watchdog's source: if an upgrade changes how it says so, this fails (not the users' watcher)."""
    inotify = _source("watchdog.observers.inotify_c")
    assert f'logger.warning("{overflow.INOTIFY_OVERFLOW}")' in inotify and "getLogger(__name__)" in inotify
    winapi = _source("watchdog.observers.winapi")  # read, not imported: it needs Windows
    assert "self._buf_queue.put((buf, self._extended))" in winapi
    assert 'self._buf_queue.put((b"", self._extended))  # indicates that this thread has started' in winapi
    assert "if not buf:\n                continue" in winapi
    fsevents = _source("watchdog.observers.fsevents")
    assert "def queue_events(self, timeout: Seconds, events: list[_fsevents.NativeEvent])" in fsevents
    assert "must_scan_subdirs" not in fsevents, "watchdog handles the rescan flag itself now: revisit overflow.py"


def test_windows_empty_buffers_after_the_first_are_overflows() -> None:
    calls: list[int] = []
    q = overflow.EmptyBufferQueue(lambda: calls.append(1))
    q.put((b"", True))  # the reader thread started
    q.put((b"\x01\x02", True))
    assert calls == []
    q.put((b"", True))  # ReadDirectoryChangesW returned 0 bytes: its buffer overflowed
    q.put((b"", False))
    assert calls == [1, 1] and q.qsize() == 4, "every buffer still reaches watchdog"


def test_fsevents_rescan_flags_are_dropped_events() -> None:
    def event(**flags: bool) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            **{**dict.fromkeys(("must_scan_subdirs", "is_user_dropped", "is_kernel_dropped"), False), **flags}
        )

    assert not overflow.dropped([event(), event()])
    for flag in ("must_scan_subdirs", "is_user_dropped", "is_kernel_dropped"):
        assert overflow.dropped([event(), event(**{flag: True})])


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/sys/fs/inotify/max_queued_events").exists(), reason="needs inotify")
def test_a_real_inotify_overflow_rescans_at_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    queued = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    root = tmp_path / "vault"
    root.mkdir()
    notes = 40
    for i in range(notes):
        (root / f"n{i:02}.md").write_text(f"# {i}\n", encoding="utf-8")
    rounds = max(100, queued // notes)  # each append is at least 3 events (open, modify, close): 3 queues full
    caplog.set_level(logging.INFO, logger="vaultsync")
    with (
        Vault.open(tmp_path / "db", root=root) as vault,
        Watcher(vault, step_ms=100, debounce_ms=1000, reconcile_s=3600) as watcher,
    ):
        assert watcher.observer_kind == "inotify"
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), str(notes), str(rounds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert writer.stdin is not None and writer.stdout is not None
        big = [random.random() for _ in range(2_000_000)]
        writer.stdin.write("go\n")
        writer.stdin.flush()
        deadline = time.monotonic() + 120
        while writer.poll() is None and time.monotonic() < deadline:
            sorted(big)  # holds the GIL for a while: watchdog's reader cannot read, the kernel queue fills
        assert writer.stdout.readline().strip() == "done"
        writer.wait()

        def overflowed() -> bool:  # logged once watchdog's reader reads the queue again
            return any(
                r.name == overflow.INOTIFY_LOGGER and r.getMessage() == overflow.INOTIFY_OVERFLOW
                for r in caplog.records
            )

        wait_until(overflowed, timeout=30, what="the kernel queue to overflow (the test could not provoke it)")
        expected = {path.name: path.read_text(encoding="utf-8") for path in root.iterdir()}
        assert len(expected) == 2 * notes

        def recorded() -> bool:
            listed = {r.path for r in vault.ls()}
            return listed == set(expected) and all(vault.read(p).content == text for p, text in expected.items())

        wait_until(
            recorded, timeout=60, what="the late notes and every last append recorded (reconcile is an hour away)"
        )
        wait_until(
            lambda: any(
                r.getMessage().startswith("rescan ") for r in caplog.records if r.name == "vaultsync.live.watcher"
            ),
            timeout=10,
            what="the rescan's log line",
        )
        assert any("lost events" in r.getMessage() for r in caplog.records if r.name == "vaultsync.live.events")

"""Shared pieces for the watcher tests: a no-thread-leak guard, polling waits, a held debouncer clock, a live CLI
process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


@pytest.fixture(autouse=True)
def no_thread_leaks() -> object:
    """Every thread a watcher test starts (observer, debouncer, readers) is stopped and joined."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before]
    for thread in leaked:
        thread.join(timeout=5)
    alive = [t.name for t in leaked if t.is_alive()]
    assert not alive, f"threads left running: {alive}"


def wait_until(predicate: Callable[[], T], timeout: float = 45.0, what: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


class HeldClock:
    """The debouncer's clock: real time, except while the test holds it (then no quiet period or maximum
    wait can pass, however slow the machine). Patched in as the ``time`` module of ``vaultsync.live.debounce``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: float | None = None
        self._offset = 0.0

    def monotonic(self) -> float:
        with self._lock:
            return self._held if self._held is not None else time.monotonic() + self._offset

    def hold(self) -> None:
        now = self.monotonic()
        with self._lock:
            self._held = now

    def release(self) -> None:
        """Time goes on from where it was held."""
        with self._lock:
            if self._held is not None:
                self._offset, self._held = self._held - time.monotonic(), None


@pytest.fixture
def debounce_clock(monkeypatch: pytest.MonkeyPatch) -> HeldClock:
    from vaultsync.live import debounce

    clock = HeldClock()
    monkeypatch.setattr(debounce, "time", clock)
    return clock


def atomic_write(path: Path, text: str) -> None:
    """What careful editors do: write a dot-temp file, fsync, rename over the note."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class WatchProcess:
    """``vaultsync watch`` in a real subprocess, its stderr collected line by line."""

    def __init__(
        self,
        db: Path,
        vault: Path,
        *args: str,
        prefix: list[str] | None = None,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """``command`` replaces the whole command line (the database then comes from $VAULTSYNC_DB);
        ``env`` adds to the environment."""
        if command is None:
            command = [*(prefix or []), sys.executable, "-m", "vaultsync", "--db", str(db), "watch", str(vault), *args]
        env = {**os.environ, "VAULTSYNC_DB": str(db), **(env or {})}
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []
        self.stdout = ""
        self._reader = threading.Thread(target=self._read, name="stderr-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = 90.0) -> str:
        def found() -> str | None:
            if self.proc.poll() is not None and not any(text in line for line in self.lines):
                time.sleep(0.2)
                raise AssertionError(f"vaultsync watch exited ({self.proc.returncode}) before {text!r}:\n{self.stderr}")
            return next((line for line in self.lines if text in line), None)

        return wait_until(found, timeout, f"{text!r} on stderr of vaultsync watch")

    def finish(self, timeout: float = 30.0) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._reader.join(timeout=5)
            assert self.proc.stdout is not None
            self.stdout = self.proc.stdout.read()
            self.proc.stdout.close()
            if self.proc.stderr is not None:
                self.proc.stderr.close()
        return code


def systemd_verify(unit_text: str, path: Path) -> None:
    """Write ``unit_text`` to ``path`` and, where systemd-analyze exists and can run, check it verifies clean."""
    if not shutil.which("systemd-analyze"):
        return
    path.write_text(unit_text, encoding="utf-8")
    checked = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True)
    if "Failed to initialize manager" not in checked.stderr:
        assert checked.returncode == 0 and not checked.stderr.strip(), checked.stderr

"""``vaultsync watch`` as a real process: signals, kill -9 mid-batch, a second writer, inotify limits."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest
from support.watch_helpers import WatchProcess, no_thread_leaks, wait_until  # noqa: F401  (autouse fixture)

from vaultsync import Vault

READY = "watching "


def readonly(db: Path) -> Vault:
    return Vault.open(db, name="vault", readonly=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.capabilities_off("no-fcntl")
@pytest.mark.slow
def test_signal_flushes_pending_batch_and_second_writer_is_refused(
    sig: int, db_path: Path, vault_dir: Path, cli
) -> None:
    watcher = WatchProcess(db_path, vault_dir, "--step-ms", "20000", "--debounce-ms", "60000", "--json", "-v")
    try:
        watcher.wait_for(READY)
        refused = cli("watch", str(vault_dir), db=db_path, timeout=60)
        assert refused.returncode == 1, refused.stderr
        assert refused.stderr.startswith(f"Error: vault 'vault' is already being written by pid {watcher.proc.pid} (")
        assert " watch " in refused.stderr and "Traceback" not in refused.stderr
        scanned = cli("import", str(vault_dir), db=db_path, timeout=60)  # a scan the watcher carries out
        assert scanned.returncode == 0 and scanned.stdout.startswith("vault: no change: "), scanned.stderr
        (vault_dir / "Pending.md").write_text("# waiting for the quiet period\n", encoding="utf-8")
        time.sleep(1.0)  # the event is recorded; the 20 s quiet period is far away
        with readonly(db_path) as vault:
            assert "Pending.md" not in [r.path for r in vault.ls()]
        watcher.proc.send_signal(sig)
        assert watcher.finish() == 0, watcher.stderr
    finally:
        if watcher.proc.poll() is None:
            watcher.proc.kill()
            watcher.finish()
    assert any(line.split(": ", 1)[-1].startswith("final ") for line in watcher.lines), watcher.stderr
    assert any(line.endswith(" wrote Pending.md") for line in watcher.lines), "-v names the paths"
    batches = [json.loads(line) for line in watcher.stdout.splitlines()]  # --json: one line per batch
    assert [(b["added"], b["modified"]) for b in batches] == [(2, 0), (1, 0)]
    assert "Traceback" not in watcher.stderr
    assert cli("read", "Pending.md", db=db_path).stdout == "# waiting for the quiet period\n"
    assert cli("import", str(vault_dir), db=db_path).returncode == 0, "the lock was released"


@pytest.mark.slow
def test_vault_folder_removed_keeps_watching_with_one_clear_line(
    db_path: Path, vault_dir: Path, tmp_path: Path
) -> None:
    """A vanished vault folder is waited for, not recorded as deleted (issue 19; it used to stop the watcher)."""
    watcher = WatchProcess(db_path, vault_dir, "--step-ms", "50")
    try:
        watcher.wait_for(READY)
        os.rename(vault_dir, tmp_path / "renamed")
        line = watcher.wait_for("is gone")
        time.sleep(2.5)  # several retries: still one line, still running
        assert watcher.proc.poll() is None
        watcher.proc.terminate()
        code = watcher.finish(timeout=30)
    finally:
        if watcher.proc.poll() is None:
            watcher.proc.kill()
            watcher.finish()
    assert code == 0
    assert f"the vault folder {vault_dir} is gone" in line
    assert sum("is gone" in x for x in watcher.lines) == 1, watcher.stderr
    assert "Traceback" not in watcher.stderr
    with readonly(db_path) as vault:
        assert len(vault.ls()) == 2, "nothing was recorded as deleted"


def note_text(i: int) -> str:
    sections = "".join(f"## Section {s}\n\nNote {i}, section {s}. " + "lorem ipsum " * 40 + "\n\n" for s in range(12))
    return f"# Burst note {i}\n\n{sections}"


@pytest.mark.slow
def test_kill_9_in_the_middle_of_a_batch_then_restart(db_path: Path, vault_dir: Path, tmp_path: Path, cli) -> None:
    count, attempts = 800, 3

    def stage(attempt: int) -> Path:  # outside the vault, so the watcher sees one folder appear
        staged = tmp_path / f"staged{attempt}"
        staged.mkdir()
        for i in range(count):
            (staged / f"n{i:04}.md").write_text(note_text(i), encoding="utf-8")
        return staged

    args = ("--step-ms", "200", "--debounce-ms", "30000")
    watcher = WatchProcess(db_path, vault_dir, *args)
    killed_during: int | None = None
    try:
        watcher.wait_for(READY)
        probe = apsw.Connection(str(db_path))
        probe.set_busy_timeout(0)
        for attempt in range(attempts):  # a loaded machine may finish a batch between two probes: try again
            staged = stage(attempt)
            written = sum("batch " in line for line in watcher.lines)
            os.rename(staged, vault_dir / f"burst{attempt}")  # one event, one batch
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and watcher.proc.poll() is None:
                try:
                    probe.execute("BEGIN IMMEDIATE")
                    probe.execute("ROLLBACK")
                except apsw.BusyError:  # the watcher holds SQLite's write lock: a batch is being written
                    watcher.proc.send_signal(signal.SIGKILL)
                    killed_during = attempt
                    break
                if sum("batch " in line for line in watcher.lines) > written:
                    break
                time.sleep(0.002)
            if killed_during is not None:
                break
        probe.close()
        watcher.finish()
    finally:
        if watcher.proc.poll() is None:
            watcher.proc.kill()
            watcher.finish()
    assert killed_during is not None, f"no batch was caught in progress:\n{watcher.stderr}"
    assert watcher.proc.returncode == -signal.SIGKILL

    checked = cli("check", db=db_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with readonly(db_path) as vault:
        for attempt in range(killed_during + 1):
            found = [r.path for r in vault.ls(prefix=f"burst{attempt}/")]
            expected = (0, count) if attempt == killed_during else (count,)
            assert len(found) in expected, f"burst{attempt}: {len(found)} of {count} notes visible"
        assert [r.path for r in vault.ls(prefix="Projects/")] == ["Projects/Atlas.md"]

    restarted = WatchProcess(db_path, vault_dir, *args)
    try:
        restarted.wait_for(READY)
        restarted.proc.send_signal(signal.SIGTERM)
        assert restarted.finish() == 0, restarted.stderr
    finally:
        if restarted.proc.poll() is None:
            restarted.proc.kill()
            restarted.finish()
    checked = cli("check", db=db_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with readonly(db_path) as vault:
        revisions = vault.ls(prefix=f"burst{killed_during}/")
        assert len(revisions) == count, "nothing was lost: the restart caught up"
        assert len({r.batch_id for r in revisions}) == 1, "the notes landed as one batch"
        for rev in revisions:
            disk = (vault_dir / rev.path).read_bytes()
            assert rev.content_hash == hashlib.sha256(disk).hexdigest()
        assert vault.read(revisions[-1].path).content == note_text(count - 1)


HOLD_WATCHES = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
for d in sys.argv[2:]:
    assert libc.inotify_add_watch(fd, os.fsencode(d), 0x100) >= 0, ctypes.get_errno()
open(sys.argv[1], "w").close()
parent = os.getppid()
while os.getppid() == parent:  # until the watcher, which sh became, exits
    time.sleep(0.1)
"""


def unshare_available() -> bool:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-Ur", "sh", "-c", "echo 100 > /proc/sys/user/max_inotify_watches"], capture_output=True
    )
    return probe.returncode == 0


@pytest.mark.skipif(not unshare_available(), reason="needs Linux user namespaces (unshare -Ur)")
@pytest.mark.parametrize("case", ["limit below folder count", "watches used elsewhere"])
@pytest.mark.slow
def test_inotify_watch_limit_falls_back_to_polling(case: str, db_path: Path, vault_dir: Path, tmp_path: Path) -> None:
    """In a private user namespace with a small inotify watch limit, the watcher warns and polls.

    With watches held elsewhere the limit is met either when watchdog adds the first watches (it refuses
    to start) or later (folders are skipped and the kernel's count is short), depending on the watchdog
    version and on timing; both give the same warning, naming the folder count and the limit.
    """
    for i in range(40):
        (vault_dir / f"f{i:02}").mkdir()
    if case == "limit below folder count":
        limit, hold = 20, ""
    else:  # enough for the vault on paper, but another program already holds most of the watches
        others = [tmp_path / f"other{i}" for i in range(40)]
        for other in others:
            other.mkdir()
        ready = tmp_path / "holding"
        limit = 60
        holder = tmp_path / "hold_watches.py"
        holder.write_text(HOLD_WATCHES, encoding="utf-8")
        hold = (
            f"{sys.executable} {holder} {ready} {' '.join(map(str, others))} </dev/null >/dev/null 2>&1 & "
            f"while [ ! -e {ready} ]; do sleep 0.05; done; "
        )
    script = f'echo {limit} > /proc/sys/user/max_inotify_watches; {hold}exec "$@"'
    watcher = WatchProcess(db_path, vault_dir, "--step-ms", "50", prefix=["unshare", "-Ur", "sh", "-c", script, "sh"])
    try:
        warning = watcher.wait_for("falling back to polling")
        folders = 1 + sum(len(names) for _, names, _ in os.walk(vault_dir))
        share = (
            "fewer than its folders"
            if case == "limit below folder count"
            else "for all of this user's programs together"
        )
        assert (
            f"the native observer cannot watch {vault_dir}: not all of its {folders} folders could be watched "
            f"(inotify watches are limited to fs.inotify.max_user_watches = {limit}, {share}); "
            f"falling back to polling every 1 s"
        ) in warning, warning
        watcher.wait_for(READY + str(vault_dir) + " (polling)")
        (vault_dir / "f39" / "deep.md").write_text("# seen by polling\n", encoding="utf-8")

        def stored() -> bool:
            with readonly(db_path) as vault:
                return "f39/deep.md" in [r.path for r in vault.ls()]

        wait_until(stored, timeout=30, what="the note in the 40th folder")
        watcher.proc.send_signal(signal.SIGTERM)
        assert watcher.finish() == 0, watcher.stderr
    finally:
        if watcher.proc.poll() is None:
            watcher.proc.kill()
            watcher.finish()
    assert sum("cannot watch" in line for line in watcher.lines) == 1

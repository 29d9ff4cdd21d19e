"""Save → visible delay of `vaultsync watch` while the semantic model fills a backlog of vectors: old code beside new.

What a person saw with the service file's ``Nice=10`` on a busy machine: saves recorded half a minute or more later.
This runs a real ``vaultsync watch`` at ``nice 10`` with ``VAULTSYNC_EMBEDDER=minilm`` on a store whose vectors are
all still to fill (imported with ``--vectors-wait 0``), saves notes one at a time, and measures from the end of each
write to the moment another process (this one, read-only) reads the new text. Each code ("old": the commit ``OLD``,
unpacked with ``git archive``; "new": this checkout) runs calm, then with a bounded CPU load (``LOADERS`` busy
processes at nice 0, stopped after the phase or ``LOAD_MAX_S``), each on its own copy of the same imported store.
Figures per code and phase: the delays (ms), the watcher's own reported delay for the same batches (its log line),
and the vectors it filled meanwhile (the backlog is still there: the filler was busy the whole time).

The saves begin once the filler stored its first vectors (the model loaded). Needs the semantic extra. Quick: the
sample vault (a small backlog), 3 saves, calm only. Full: the Help vault, 4 saves, calm and loaded.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import REPO, Figures, load_average
from benchmarks.inputs import vault_for, workdir

OLD = "6f934c5"
"""The commit before the filler moved off the watcher's thread."""
LOADERS = 4
LOAD_MAX_S = 300.0
TIMEOUT_S = 180.0
REPORTED = re.compile(r"batch (\d+): .* ms, (\d+) ms after the first change")


def unpack(commit: str, dest: Path) -> Path:
    """The package tree of ``commit`` (``git archive``), importable from ``dest``."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", commit, "vaultsync"], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def loaders(until: float) -> list[subprocess.Popen[bytes]]:
    """``LOADERS`` busy processes, each ending by itself at ``until`` (monotonic) at the latest."""
    seconds = max(0.0, until - time.monotonic())
    code = f"import time\nend = time.monotonic() + {seconds:.1f}\nwhile time.monotonic() < end: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(LOADERS)]


class Watcher:
    """A ``nice 10`` ``vaultsync watch`` of one code tree, its stderr collected."""

    def __init__(self, tree: Path | None, db: Path, vault: Path) -> None:
        env = {**os.environ, "VAULTSYNC_EMBEDDER": "minilm", "PYTHONUNBUFFERED": "1"}
        if tree is not None:
            env["PYTHONPATH"] = str(tree)
        self.proc = subprocess.Popen(
            ["nice", "-n", "10", sys.executable, "-m", "vaultsync", "--db", str(db), "watch", str(vault)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tree or REPO,  # python -m puts the working folder first: the tree's package is the one imported
        )
        self.log: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            self.log.append(line.rstrip())

    def wait_ready(self) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not any("watching " in line for line in self.log):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("vaultsync watch did not start:\n" + "\n".join(self.log[-20:]))
            time.sleep(0.05)

    def reported(self) -> dict[int, int]:
        return {int(m[1]): int(m[2]) for line in self.log if (m := REPORTED.search(line))}

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._thread.join(timeout=10)


def phase(tree: Path | None, base_db: Path, vault: Path, work: Path, saves: int, load: bool) -> dict[str, Any]:
    from vaultsync import NoteNotFound, Vault

    db = work / "phase.db"
    for old in work.glob("phase.db*"):
        old.unlink()
    shutil.copy(base_db, db)
    # notes vaultsync records: none inside a dot-folder (.github, .obsidian), which it never reads
    notes = sorted(p for p in vault.rglob("*.md") if not any(x.startswith(".") for x in p.relative_to(vault).parts))
    watcher = Watcher(tree, db, vault)
    busy: list[subprocess.Popen[bytes]] = []
    delays: list[float] = []
    try:
        watcher.wait_ready()
        with Vault.open(db, name=vault.name, readonly=True) as reader:  # the model loaded, the filler embedding
            deadline = time.monotonic() + TIMEOUT_S * 2
            while (reader.vector_progress() or {}).get("filled", 0) == 0 and time.monotonic() < deadline:
                time.sleep(0.2)
        if load:
            busy = loaders(time.monotonic() + LOAD_MAX_S)
            time.sleep(1.0)
        with Vault.open(db, name=vault.name, readonly=True) as reader:
            before = reader.vector_progress() or {}
            for i in range(saves):
                path = notes[(i * 7) % len(notes)]
                rel = path.relative_to(vault).as_posix()
                text = path.read_text(encoding="utf-8") + f"\ndelay benchmark save {i} {time.time_ns()}\n"
                path.write_text(text, encoding="utf-8")
                written = time.monotonic()
                while time.monotonic() - written < TIMEOUT_S:
                    try:
                        if reader.read(rel).content == text:
                            break
                    except NoteNotFound:
                        pass
                    time.sleep(0.01)
                delays.append(round((time.monotonic() - written) * 1000))
                time.sleep(1.0)
            after = reader.vector_progress() or {}
        load_seen = load_average()
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
        watcher.stop()
    reported = sorted(watcher.reported().values())
    return {
        "delays_ms": " ".join(map(str, delays)),
        "max_ms": max(delays),
        "median_ms": sorted(delays)[len(delays) // 2],
        "watcher_reported_ms": " ".join(map(str, reported[-saves:])),
        "vectors_filled_meanwhile": int(after.get("filled", 0)) - int(before.get("filled", 0)),
        "vectors_left": int(after.get("total", 0)) - int(after.get("filled", 0)),
        "load_average": " ".join(map(str, load_seen)),
    }


def run(quick: bool) -> Figures:
    from vaultsync.embed.semantic import installed

    if not installed():
        raise SystemExit("this benchmark needs the semantic extra (pip install 'vaultsync[semantic]')")
    figures: Figures = {"old_commit": OLD, "nice": 10, "loaders": LOADERS}
    with workdir("watch-delay") as work:
        vault = vault_for(quick, work, "obsidian-help.bundle")
        base = work / "base.db"
        old_tree = unpack(OLD, work / "old")
        # imported by the old code: both read it (the new one upgrades its copy; the old one refuses a newer schema)
        subprocess.run(
            [sys.executable, "-m", "vaultsync", "--db", str(base), "import", str(vault), "--vectors-wait", "0"],
            check=True,
            capture_output=True,
            env={**os.environ, "VAULTSYNC_EMBEDDER": "minilm", "PYTHONPATH": str(old_tree)},
            cwd=old_tree,
        )
        saves = 3 if quick else 4
        # quick (the suite's check that it runs): calm only, no busy processes taking the machine's cores from
        # whatever else runs beside it
        loads = (False,) if quick else (False, True)
        for load in loads:
            for code, tree in (("old", old_tree), ("new", None)):
                name = f"{code}.{'loaded' if load else 'calm'}"
                for key, value in phase(tree, base, vault, work, saves, load).items():
                    figures[f"{name}.{key}"] = value
        for which in ("calm", "loaded")[: len(loads)]:
            for stat in ("max", "median"):
                new = figures[f"new.{which}.{stat}_ms"]
                figures[f"{which}.{stat}_old_over_new"] = round(figures[f"old.{which}.{stat}_ms"] / max(new, 1), 1)
    return figures

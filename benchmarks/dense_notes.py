"""Notes dense in tags, links or headings, and how a running watcher copes with them.

``python -m benchmarks.dense_notes make VAULT`` writes the dense notes into VAULT (created if needed):

* ``Dense tags.md``: 500,000 distinct ``#tags`` (about 4.4 MB, ten a line);
* ``Dense links.md``: 300,000 ``[[wikilinks]]`` (under the 5 MB limit for a note, ten a line);
* ``Dense headings.md``: 100,000 headings, nested six deep, each with a line of text.

``python -m benchmarks.dense_notes watch`` runs the whole measurement: a small vault is imported, a real
``vaultsync watch`` process started on it, the dense notes written into the vault; a second later an ordinary
note is edited and the time until the watcher has recorded that edit is taken (what other changes wait
behind the dense notes). Then one character is appended to the tag note and the time until
it is recorded taken as well. Reports the watcher's peak resident memory (VmHWM), its resident memory
once everything is recorded (VmRSS after a quiet period), and the delays. ``--scale`` shrinks the notes
(0.1: a tenth of each). Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import apsw

TAGS = 500_000
LINKS = 300_000
HEADINGS = 100_000


def dense_tags(count: int) -> str:
    lines = [" ".join(f"#t{i + k:06d}" for k in range(10) if i + k < count) for i in range(0, count, 10)]
    return "# Dense tags\n\n" + "\n".join(lines) + "\n"


def dense_links(count: int) -> str:
    lines = [" ".join(f"[[n{i + k:05d}]]" for k in range(10) if i + k < count) for i in range(0, count, 10)]
    return "# Dense links\n\n" + "\n".join(lines) + "\n"


def dense_headings(count: int) -> str:
    parts = [f"{'#' * (i % 6 + 1)} H{i}\ntext {i}\n" for i in range(count)]
    return "".join(parts)


def make(vault: Path, scale: float = 1.0) -> dict[str, int]:
    """Write the three dense notes into ``vault``; returns their sizes in bytes."""
    vault.mkdir(parents=True, exist_ok=True)
    notes = {
        "Dense tags.md": dense_tags(int(TAGS * scale)),
        "Dense links.md": dense_links(int(LINKS * scale)),
        "Dense headings.md": dense_headings(int(HEADINGS * scale)),
    }
    sizes = {}
    for name, text in notes.items():
        (vault / name).write_text(text, encoding="utf-8")
        sizes[name] = len(text.encode())
    return sizes


def memory_mb(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def tree_rss_mb(pid: int) -> float:
    """Resident memory of the watcher and its parse workers (children), summed."""
    total = memory_mb(pid).get("VmRSS", 0.0)
    for child in Path(f"/proc/{pid}/task").glob("*/children"):
        for cpid in child.read_text().split():
            try:
                total += memory_mb(int(cpid)).get("VmRSS", 0.0)
            except OSError:
                pass
    return total


class Watcher:
    """A ``vaultsync watch --json`` process; the paths of each recorded batch with their arrival times."""

    def __init__(self, db: Path, vault: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vaultsync", "--db", str(db), "watch", str(vault), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.db = db
        self.peak_tree_mb = 0.0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._sample, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for _ in self.proc.stdout:  # batch lines, not needed: the store is polled
            pass

    def _sample(self) -> None:
        while self.proc.poll() is None:
            try:
                self.peak_tree_mb = max(self.peak_tree_mb, tree_rss_mb(self.proc.pid))
            except OSError:
                return
            time.sleep(0.05)

    def wait_for(self, path: str, text: str, timeout_s: float) -> float | None:
        """When the store first held ``text`` at ``path`` (polled on a read-only connection), None on timeout."""
        digest = hashlib.sha256(text.encode()).hexdigest()
        deadline = time.monotonic() + timeout_s
        con = apsw.Connection(f"file:{self.db}?mode=ro", flags=apsw.SQLITE_OPEN_URI | apsw.SQLITE_OPEN_READONLY)
        try:  # each query its own read (``with con`` would hold one snapshot)
            con.set_busy_timeout(10_000)
            while time.monotonic() < deadline:
                row = con.execute(
                    "SELECT content_hash FROM notes WHERE path = ? ORDER BY id DESC LIMIT 1", (path,)
                ).fetchone()
                if row is not None and row[0] == digest:
                    return time.monotonic()
                time.sleep(0.05)
        finally:
            con.close()
        return None

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def say(what: str, **figures: Any) -> None:
    """A measurement as it is taken, on stderr (a run cut short keeps what it measured)."""
    print(json.dumps({"at": time.strftime("%H:%M:%S"), "event": what, **figures}), file=sys.stderr, flush=True)


def measure(scale: float, timeout_s: float) -> dict[str, Any]:
    from vaultsync import Vault

    with tempfile.TemporaryDirectory(prefix="dense-") as tmp:
        vault, db = Path(tmp) / "vault", Path(tmp) / "vault.db"
        vault.mkdir()
        for i in range(20):
            (vault / f"Note {i}.md").write_text(f"# Note {i}\n\nordinary text {i}\n", encoding="utf-8")
        with Vault.open(db, root=vault) as v:
            v.sync()
        watcher = Watcher(db, vault)
        try:
            time.sleep(3)  # started, caught up
            idle = memory_mb(watcher.proc.pid)
            say("watcher started", **idle)
            started = time.monotonic()
            sizes = make(vault, scale)
            time.sleep(1)  # an ordinary edit while the dense notes are being recorded
            edited = time.monotonic()
            (vault / "Note 0.md").write_text("# Note 0\n\nedited\n", encoding="utf-8")
            edit_at = watcher.wait_for("Note 0.md", "# Note 0\n\nedited\n", timeout_s)
            say("other edit recorded", after_s=None if edit_at is None else round(edit_at - edited, 2))
            dense_at = [watcher.wait_for(name, (vault / name).read_text(encoding="utf-8"), timeout_s) for name in sizes]
            say("dense notes recorded", after_s=[None if at is None else round(at - started, 2) for at in dense_at])
            time.sleep(5)
            after_dense = memory_mb(watcher.proc.pid)
            say("memory after the dense notes", **after_dense, peak_with_workers_mb=round(watcher.peak_tree_mb, 1))
            written = time.monotonic()
            with (vault / "Dense tags.md").open("a", encoding="utf-8") as f:
                f.write("x")
            appended = watcher.wait_for(
                "Dense tags.md", (vault / "Dense tags.md").read_text(encoding="utf-8"), timeout_s
            )
            say("one character appended, recorded", after_s=None if appended is None else round(appended - written, 2))
            time.sleep(5)
            steady = memory_mb(watcher.proc.pid)
            return {
                "scale": scale,
                "note_bytes": sizes,
                "dense_recorded_s": [None if at is None else round(at - started, 2) for at in dense_at],
                "other_edit_recorded_after_s": None if edit_at is None else round(edit_at - edited, 2),
                "append_one_char_recorded_after_s": None if appended is None else round(appended - written, 2),
                "rss_idle_mb": idle["VmRSS"],
                "rss_after_dense_mb": after_dense["VmRSS"],
                "rss_steady_mb": steady["VmRSS"],
                "peak_watcher_mb": steady["VmHWM"],
                "peak_with_workers_mb": round(watcher.peak_tree_mb, 1),
            }
        finally:
            watcher.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make_cmd = sub.add_parser("make", help="write the dense notes into a vault folder")
    make_cmd.add_argument("vault", type=Path)
    make_cmd.add_argument("--scale", type=float, default=1.0)
    watch_cmd = sub.add_parser("watch", help="the dense notes through a running watcher")
    watch_cmd.add_argument("--scale", type=float, default=1.0)
    watch_cmd.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for each recording")
    args = parser.parse_args()
    if args.command == "make":
        print(json.dumps(make(args.vault, args.scale)))
    else:
        print(json.dumps(measure(args.scale, args.timeout), indent=2))


if __name__ == "__main__":
    main()

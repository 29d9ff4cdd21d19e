"""The Obsidian Help history as test data: the replay of its commits and the ``--from-git`` backfill, built once
per run by the session fixtures of tests/conftest.py (``help_replayed``, ``help_backfilled``) and kept across runs
by ``support.corpus_cache`` while their inputs are unchanged.

Each corpus database is shared by every test that reads it. Readers open it read-only; a test that writes works
on a copy (``copy_db``).
"""

from __future__ import annotations

import datetime as dt
import errno
import inspect
import json
import os
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.cli import invoke
from support.repo import CORPORA, SHARED

HELP_BUNDLE = CORPORA / "obsidian-help.bundle"
REPLAY_TOOL = SHARED / "tools" / "replay_history.py"
REPLAY_EVERY = int(os.environ.get("VAULTSYNC_REPLAY_EVERY", "16"))
"""Every how many commits of the Help history the replay imports: 16 in ``make test`` (115 of 1,827 commits,
431 renames and 2,052 deletions between them); ``VAULTSYNC_REPLAY_EVERY=8`` replays twice as many states."""
HELP_SELECTION = ["--every", str(REPLAY_EVERY)]
"""The replay's commit selection (every REPLAY_EVERY-th commit, 2020-2026); truth uses the same."""
REPLAY_FOLDERS = os.environ.get("VAULTSYNC_REPLAY_FOLDERS", "en,zh,ja,ko,ru,ar,th,km,Release notes,Sandbox")
"""The top folders of the Help tree that the replay keeps (top-level notes are always kept): English, the release
notes, the sandbox and one translation in each other script (Han, kana, Hangul, Cyrillic, Arabic, Thai, Khmer).
The other 26 translations, Latin-script copies of English added mostly in 2026, are taken out of the folder before
each import: they were 55 % of the replay's revisions and none of its scripts. ``all`` keeps every folder."""


def replayed_folder(name: str) -> bool:
    """Whether the replay keeps this top folder of the Help tree (see REPLAY_FOLDERS)."""
    return REPLAY_FOLDERS == "all" or name.startswith(".") or name in REPLAY_FOLDERS.split(",")


def replayed_path(path: str) -> bool:
    """Whether the replay keeps this repository path: a top-level note, or one in a kept folder."""
    top, _, rest = path.partition("/")
    return not rest or replayed_folder(top)


HELP_GIT_VAULTS = ("ko", "zh")
"""Language folders imported with --from-git, each its own vault (a subfolder of the repository): Chinese since
2020, Korean since 2024, 1,939 changes and 246 renames between them, every path non-ASCII. (English, 1,159 commits,
took two thirds of the backfill; its history is checked through the replay.)"""


@dataclass(frozen=True)
class HelpCorpus:
    """The Obsidian Help bundle, and a work folder whose environment gives replay_history.py one clone cache."""

    work: Path
    env: dict[str, str]


@dataclass(frozen=True)
class Replayed:
    """Every REPLAY_EVERY-th commit of the Help history imported with ``vaultsync import --known-at "$COMMIT_TIME"``."""

    db: Path
    commit_times: list[int]
    """Unix committer times of the replayed commits, oldest first."""
    summaries: list[dict]
    """The ``--json`` summary of each import."""
    root: Path
    """The vault folder as the last replayed commit left it (the one the database registered): read it, never
    change it."""


@dataclass(frozen=True)
class Backfilled:
    """Two language folders of a clone of the Help bundle, each imported as its own vault with --from-git."""

    db: Path
    clone: Path
    """The clone whose folders the database registered: read it, never change it."""


def copy_db(src: Path, dst: Path) -> Path:
    """A private copy of a (closed) database file, for a test that writes to a shared one."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal"):
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")
    return dst


def _unix(text: str) -> int:
    return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def replay(corpus: HelpCorpus, vault: Path, selection: list[str], on_commit: Callable[[str], None]) -> None:
    """Run replay_history.py into ``vault``; after each commit it waits while ``on_commit(COMMIT_TIME)`` runs here.

    The tool's ``--exec`` command hands the commit over through a FIFO and waits for the answer on
    another, so each state of the folder is imported in this process (no Python start per commit).
    """
    channel = Path(tempfile.mkdtemp(dir=corpus.work, prefix="replay-"))
    ask, answer = channel / "ask", channel / "answer"
    os.mkfifo(ask)
    os.mkfifo(answer)
    command = (
        f'printf "%s\\n" "$COMMIT_TIME" > {shlex.quote(str(ask))} '
        f'&& read -r reply < {shlex.quote(str(answer))} && [ "$reply" = ok ]'
    )
    errors = channel / "stderr"
    reader = os.open(ask, os.O_RDONLY | os.O_NONBLOCK)
    keep_open = os.open(ask, os.O_WRONLY)  # so that reads wait for lines instead of seeing end-of-file
    with open(errors, "wb") as err:
        tool = subprocess.Popen(
            [
                sys.executable,
                str(REPLAY_TOOL),
                str(HELP_BUNDLE),
                "--vault",
                str(vault),
                *selection,
                "-q",
                "--exec",
                command,
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=corpus.env,
        )
    buffered = b""
    try:
        while True:
            ready, _, _ = select.select([reader], [], [], 0.5)
            if not ready:
                if tool.poll() is not None:
                    break
                continue
            buffered += os.read(reader, 4096)
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                reply = b"ok\n"
                try:
                    on_commit(line.decode())
                except BaseException:
                    reply = b"failed\n"
                    raise
                finally:
                    _answer(answer, reply, tool)
        assert tool.wait(timeout=60) == 0, errors.read_text(errors="replace")[-2000:]
    finally:
        os.close(keep_open)
        os.close(reader)
        if tool.poll() is None:
            tool.kill()
            tool.wait()


def _answer(fifo: Path, reply: bytes, tool: subprocess.Popen[bytes]) -> None:
    """Write ``reply`` once the waiting ``--exec`` command has opened ``fifo`` (or the tool has exited)."""
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO or tool.poll() is not None:  # ENXIO: no reader yet
                return
            time.sleep(0.001)
            continue
        try:
            os.write(fd, reply)
        finally:
            os.close(fd)
        return


def _build_replayed(help_corpus: HelpCorpus, folder: Path) -> dict[str, Any]:
    """Replay every REPLAY_EVERY-th commit into ``folder``/help, importing each state at its commit time into
    ``folder``/replay.db; the meta: each import's summary and commit time."""
    db, vault = folder / "replay.db", folder / "help"
    summaries: list[dict] = []
    times: list[int] = []

    def import_state(commit_time: str) -> None:
        for top in vault.iterdir():  # the folders the replay leaves out (REPLAY_FOLDERS)
            if top.is_dir() and not replayed_folder(top.name):
                shutil.rmtree(top)
        done = invoke(
            "import",
            str(vault),
            "--known-at",
            commit_time,
            "--json",
            db=db,
            env={"VAULTSYNC_HOME": str(help_corpus.work / "home")},
        )
        assert done.returncode == 0, done.stderr
        summaries.append(json.loads(done.stdout))
        times.append(_unix(commit_time))

    replay(help_corpus, vault, HELP_SELECTION, import_state)
    return {"commit_times": times, "summaries": summaries}


def _build_backfilled(help_corpus: HelpCorpus, folder: Path) -> dict[str, Any]:
    """A clone of the Help bundle in ``folder``/clone, two of its language folders each imported as its own vault
    with ``import --from-git`` into ``folder``/git.db; the meta: each import's summary and the clone's first-parent
    commit count."""
    clone = folder / "clone"
    subprocess.run(["git", "clone", "-q", str(HELP_BUNDLE), str(clone)], check=True, env=help_corpus.env, timeout=300)
    commits = len(
        subprocess.run(
            ["git", "-C", str(clone), "rev-list", "--first-parent", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    results = []
    for name in HELP_GIT_VAULTS:
        done = invoke(
            "import",
            str(clone / name),
            "--from-git",
            "--json",
            db=folder / "git.db",
            env={"VAULTSYNC_HOME": str(help_corpus.work / "home")},
        )
        assert done.returncode == 0, done.stderr
        results.append(json.loads(done.stdout))
    return {"commits": commits, "results": results}


def _cache_key(
    name: str, *builders: Callable[..., Any], inputs: tuple[Path, ...] = (HELP_BUNDLE, REPLAY_TOOL), **settings: Any
) -> str:
    from support.corpus_cache import key

    return key(
        name,
        inputs=inputs,
        settings=settings,
        builder_source="".join(inspect.getsource(b) for b in (*builders, replay, _answer, invoke)),
    )

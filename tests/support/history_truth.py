"""Git's answers about the Obsidian Help history (replay_history.py, git cat-file) and the helpers that compare
vaultsync's reads with them."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import importlib.util
import io
import random
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from support.cli import Ran, invoke
from support.help_corpus import HELP_BUNDLE, HELP_GIT_VAULTS, HELP_SELECTION, REPLAY_TOOL
from vaultsync import NoteNotFound, Vault

BUNDLE, TOOL, SELECTION, GIT_VAULTS = HELP_BUNDLE, REPLAY_TOOL, HELP_SELECTION, HELP_GIT_VAULTS


SEED = 20260830


def iso(seconds: int, offset_minutes: int = 0) -> str:
    """Unix seconds as ISO 8601 with an explicit offset (Z for UTC)."""
    zone = dt.timezone(dt.timedelta(minutes=offset_minutes))
    text = dt.datetime.fromtimestamp(seconds, zone).isoformat()
    return text.replace("+00:00", "Z")


def hidden(path: str) -> bool:
    return any(part.startswith(".") for part in path.split("/"))


@dataclass
class Truth:
    """Git's answers through replay_history.py with one commit selection."""

    env: dict[str, str]
    selection: list[str]
    keep: Callable[[str], bool] = lambda path: True
    """The repository paths the database holds (the replay leaves some folders out: conftest.replayed_path)."""
    listings: dict[str, tuple[str | None, list[str]]] = field(default_factory=dict)

    def tool(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, str(TOOL), str(BUNDLE), *self.selection, *args],
            capture_output=True,
            env=self.env,
            timeout=120,
        )

    @property
    def git_dir(self) -> str:
        found = sorted(Path(self.env["REPLAY_HISTORY_CACHE"]).glob("obsidian-help-*.git"))
        assert found, "replay_history.py did not clone the bundle into its cache"
        return str(found[0])

    def list_at(self, date: str) -> tuple[str | None, list[str]]:
        """(commit in force, .md paths that existed) at ``date``: the tool's own ``--list-at``, its ``main`` run
        in this process (a Python start per date was most of the cost; the CLI tests still run it as a process)."""
        out, err = io.BytesIO(), io.StringIO()
        stdout = io.TextIOWrapper(out, encoding="utf-8")
        args = [str(BUNDLE), *self.selection, "--cache-dir", self.env["REPLAY_HISTORY_CACHE"], "--list-at", date]
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
            code = replay_tool().main(args)
        stdout.flush()
        assert code == 0, err.getvalue()
        commit = None
        for line in err.getvalue().splitlines():
            if line.startswith("# commit "):
                commit = line.split()[2]
        paths = [p.decode("utf-8") for p in out.getvalue().split(b"\n") if p]
        return commit, [p for p in paths if self.keep(p)]

    def load(self, dates: Iterable[str]) -> None:
        for date in dict.fromkeys(dates):
            if date not in self.listings:
                self.listings[date] = self.list_at(date)

    def contents(self, pairs: list[tuple[str | None, str]]) -> list[bytes | None]:
        """The bytes of each (commit, repo path) from git (None: no such file then)."""
        asked = [(c, p) for c, p in pairs if c is not None]
        batch = subprocess.run(
            ["git", "--git-dir", self.git_dir, "cat-file", "--batch"],
            capture_output=True,
            input=b"".join(f"{c}:{p}\n".encode() for c, p in asked),
            check=True,
            timeout=300,
        )
        out, pos, answers = batch.stdout, 0, {}
        for key in asked:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            pos = end + 1
            if header[-1] == b"missing":
                answers[key] = None
                continue
            assert header[1] == b"blob", header
            size = int(header[2])
            answers[key] = out[pos : pos + size]
            pos += size + 1
        return [answers.get((c, p)) if c is not None else None for c, p in pairs]

    def ever(self) -> set[str]:
        """Every visible .md path any first-parent commit ever touched (renames as delete + add)."""
        log = subprocess.run(
            [
                "git",
                "--git-dir",
                self.git_dir,
                "log",
                "--first-parent",
                "--no-renames",
                "--format=",
                "--name-only",
                "-z",
                "HEAD",
            ],
            capture_output=True,
            check=True,
        ).stdout
        paths = {p.decode("utf-8") for p in log.split(b"\0") if p.endswith(b".md")}
        return {p for p in paths if not hidden(p) and self.keep(p)}


@functools.cache
def replay_tool() -> ModuleType:
    """../shared/tools/replay_history.py as a module, read at run time (its --list-at without a process)."""
    spec = importlib.util.spec_from_file_location("replay_history", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def vaultsync(db: Path, *args: str) -> Ran:
    """The command line, in this process (``stdout_bytes`` for byte-exact reads)."""
    return invoke(*args, db=db)


def sample_dates(rng: random.Random, commit_times: list[int], extra: int = 25) -> list[str]:
    """Dates across the range: exactly at commit times, one second before them, random ones in several forms."""
    chosen = rng.sample(commit_times, min(35, len(commit_times)))
    before = rng.sample(commit_times, min(35, len(commit_times)))
    lo, hi = commit_times[0] - 2 * 86_400, commit_times[-1] + 2 * 86_400
    dates = [iso(t) for t in chosen] + [iso(t - 1) for t in before]
    dates += [iso(rng.randrange(lo, hi)) for _ in range(extra)]
    dates += [iso(rng.randrange(lo, hi), rng.choice([-420, 330, 120])) for _ in range(5)]
    dates += [iso(rng.randrange(lo, hi))[:10] for _ in range(5)]
    dates += [iso(commit_times[0] - 1), iso(commit_times[0]), iso(commit_times[-1]), "2020-01-01"]
    return list(dict.fromkeys(dates))


@dataclass
class Pair:
    vault: str
    path: str
    """Vault-relative."""
    date: str
    repo_path: str


def check_pairs(truth: Truth, vaults: dict[str, Vault], pairs: list[Pair]) -> list[str]:
    """Compare Vault.read with git for every pair; return the disagreements."""
    expected = truth.contents([(truth.listings[p.date][0], p.repo_path) for p in pairs])
    wrong = []
    for pair, want in zip(pairs, expected):
        try:
            got: bytes | None = vaults[pair.vault].read(pair.path, as_of=pair.date).content.encode("utf-8")
        except NoteNotFound:
            got = None
        if got != want:
            describe = lambda b: "absent" if b is None else f"{len(b)} bytes"  # noqa: E731
            wrong.append(f"{pair.vault}:{pair.path} as of {pair.date}: vaultsync {describe(got)}, git {describe(want)}")
    return wrong


def coverage(pairs: list[Pair], truth_exists: list[bool], head: set[str]) -> dict[str, int]:
    return {
        "pairs": len(pairs),
        "existing": sum(truth_exists),
        "absent": len(pairs) - sum(truth_exists),
        "non_ascii": sum(not p.path.isascii() for p in pairs),
        "gone_by_head": sum(p.repo_path not in head for p in pairs),
        "years": len({p.date[:4] for p in pairs}),
    }

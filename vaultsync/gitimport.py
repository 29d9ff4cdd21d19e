"""Backfill a vault's history from git: first-parent commits, oldest first, one batch each.

This module reads git (the commits to import and what each changed, as observations); ``Vault.import_git``
writes them through the same plan → batch path as every other sync.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .disk.attachments import PIECE, is_attachment
from .disk.folder import Absent, Observed, Present
from .disk.ignore import recorded
from .disk.paths import nfc
from .errors import ConfigError
from .sync import BatchSummary
from .times import format_time

GIT_HISTORY_NOT_REWRITTEN = (
    "vaultsync does not rewrite the vault's own git history, which still holds what was purged here; "
    "rewrite it with git filter-repo (--replace-text, --invert-paths) and force-push every clone"
)


def in_git(root: Path) -> bool:
    """Whether the vault folder is inside a git work tree (it or a parent holds ``.git``)."""
    return any((folder / ".git").exists() for folder in (root, *root.parents))


EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    committed_at: int
    """Committer time, UTC microseconds."""


def _run_git(cwd: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError:
        raise ConfigError("importing git history needs the `git` command, which is not installed") from None


def _said(stderr: bytes) -> str:
    """What git said, on one line: its ``fatal:``/``error:`` lines and its advice, without the prefixes."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    said = [line.split(":", 1)[1].strip() if line.startswith(("fatal:", "error:")) else line for line in lines]
    return "; ".join(said) or "unknown error"


def _git(cwd: str, *args: str) -> bytes:
    done = _run_git(cwd, *args)
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise ConfigError(f"git {args[0]} failed: {message[-1] if message else 'unknown error'}")
    return done.stdout


INLINE_BYTES = 8 * 2**20
"""An attachment blob up to this size is read into memory whole (as a note's is); a larger one is streamed."""


class GitHistory:
    """The first-parent history of the repository holding ``vault`` (which may be a subfolder)."""

    def __init__(self, vault: Path) -> None:
        self.vault = vault
        found = _run_git(str(vault), "rev-parse", "--show-toplevel")
        if found.returncode != 0:
            if b"not a git repository" in found.stderr:
                raise ConfigError(f"{vault} is not inside a git repository (needed to import its history)")
            # a repository git will not read (another user's: "dubious ownership"), said in git's words
            raise ConfigError(f"git refuses to read the repository of {vault}: {_said(found.stderr)}")
        top = found.stdout.decode().strip()
        self.top = top
        prefix = os.path.relpath(os.path.realpath(vault), os.path.realpath(top)).replace(os.sep, "/")
        self.prefix = "" if prefix == "." else prefix + "/"
        self.recorded = recorded(vault)
        """Which paths are recorded: the working tree's ``.vaultsyncignore`` (``disk.ignore``), as a scan applies it."""
        self._cat: subprocess.Popen[bytes] | None = None
        self._check: subprocess.Popen[bytes] | None = None
        self._log: subprocess.Popen[bytes] | None = None
        self._diffs: Iterator[tuple[str, list[tuple[bytes, bytes]]]] | None = None

    def commits(self) -> list[Commit]:
        out = _git(self.top, "log", "--first-parent", "--reverse", "--format=%H %ct", "HEAD")
        commits = []
        for line in out.decode().splitlines():
            sha, seconds = line.split()
            commits.append(Commit(sha, int(seconds) * 1_000_000))
        return commits

    def changes(self, parent: str | None, commit: str) -> dict[str, Observed]:
        """Vault-relative note paths changed from ``parent`` to ``commit``: blob or Absent.

        ``parent`` is ``commit``'s first parent (``pending`` gives them so): the changes come from one
        ``git log`` stream over the whole first-parent history, read in step with the import, instead of
        a git process per commit. Any other pair is diffed on its own."""
        entries = self._streamed(commit) if parent is not None else None
        if entries is None:
            args = ["diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", parent or EMPTY_TREE, commit]
            if self.prefix:
                args += ["--", self.prefix]
            fields = _git(self.top, *args).split(b"\0")
            entries = list(zip(fields[0::2], fields[1::2]))
        out: dict[str, Observed] = {}
        for meta, raw_path in entries:
            if not meta:
                continue
            _, new_mode, _, new_sha, status = meta.decode().lstrip(":").split()
            path = raw_path.decode("utf-8", "surrogateescape")
            if not path.startswith(self.prefix):
                continue
            rel = nfc(path[len(self.prefix) :])
            if not self.recorded(rel):
                continue
            if status == "D" or new_mode not in ("100644", "100755"):
                out[rel] = Absent()
            else:
                out[rel] = self._observe(rel, new_sha)
        return out

    def tree(self, commit: str) -> dict[str, Observed]:
        """Every note in ``commit``'s tree, as blobs."""
        args = ["ls-tree", "-r", "-z", commit]
        if self.prefix:
            args += ["--", self.prefix]
        out: dict[str, Observed] = {}
        for entry in _git(self.top, *args).split(b"\0"):
            if not entry:
                continue
            meta, raw_path = entry.split(b"\t", 1)
            mode, kind, sha = meta.decode().split()
            path = raw_path.decode("utf-8", "surrogateescape")
            rel = nfc(path[len(self.prefix) :])
            if kind != "blob" or mode not in ("100644", "100755") or not self.recorded(rel):
                continue
            out[rel] = self._observe(rel, sha)
        return out

    def _streamed(self, commit: str) -> list[tuple[bytes, bytes]] | None:
        """``commit``'s raw diff against its first parent from the history's ``git log`` stream (None if the
        stream has passed it or does not hold it)."""
        if self._diffs is None:
            args = [
                "git",
                "log",
                "--first-parent",
                "--full-history",
                "--sparse",
                "--reverse",
                "--root",
                "--diff-merges=first-parent",
                "--raw",
                "-r",
                "-z",
                "--no-renames",
                "--no-abbrev",
                "--format=%x01%H",
                "HEAD",
            ]
            if self.prefix:
                args += ["--", self.prefix]
            self._log = subprocess.Popen(args, cwd=self.top, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            assert self._log.stdout is not None
            self._diffs = _raw_log(self._log.stdout)
        for sha, entries in self._diffs:
            if sha == commit:
                return entries
        return None

    def observed(self, parent: str | None, commit: Commit, *, whole: bool) -> dict[str, Observed]:
        """What ``commit`` holds (``whole``: its whole tree) or changed since ``parent``, as observations."""
        return self.tree(commit.sha) if whole else self.changes(parent, commit.sha)

    def _observe(self, rel: str, sha: str) -> Present:
        """The blob ``sha`` at ``rel`` as an observation: its bytes, or for an attachment larger than ``INLINE_BYTES``
        a stream of them read from git anew each time (a large file never held whole)."""
        if is_attachment(rel):
            size = self.blob_size(sha)
            if size > INLINE_BYTES:
                return Present(size=size, stream=lambda: self._pieces(sha))
        data = self.blob(sha)
        return Present(size=len(data), data=data)

    def blob_size(self, sha: str) -> int:
        if self._check is None:
            self._check = subprocess.Popen(
                ["git", "cat-file", "--batch-check"], cwd=self.top, stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        assert self._check.stdin is not None and self._check.stdout is not None
        self._check.stdin.write(sha.encode() + b"\n")
        self._check.stdin.flush()
        header = self._check.stdout.readline().split()
        if len(header) < 3 or header[1] != b"blob":
            raise ConfigError(f"git object {sha} is not a blob")
        return int(header[2])

    def _pieces(self, sha: str) -> Iterator[bytes]:
        """The blob's bytes from its own ``git cat-file``, ``PIECE`` at a time."""
        cat = subprocess.Popen(["git", "cat-file", "blob", sha], cwd=self.top, stdout=subprocess.PIPE)
        assert cat.stdout is not None
        done = False
        try:
            while piece := cat.stdout.read(PIECE):
                yield piece
            done = True
        finally:  # left early (the store refused it): git is not left writing into a pipe nobody reads
            if not done:
                cat.kill()
            cat.stdout.close()
            cat.wait()
        if cat.returncode != 0:
            raise ConfigError(f"git could not read the blob {sha}")

    def blob(self, sha: str) -> bytes:
        if self._cat is None:
            self._cat = subprocess.Popen(
                ["git", "cat-file", "--batch"], cwd=self.top, stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        assert self._cat.stdin is not None and self._cat.stdout is not None
        self._cat.stdin.write(sha.encode() + b"\n")
        self._cat.stdin.flush()
        header = self._cat.stdout.readline().split()
        if len(header) < 3 or header[1] != b"blob":
            raise ConfigError(f"git object {sha} is not a blob")
        data = self._cat.stdout.read(int(header[2]))
        self._cat.stdout.read(1)  # the newline after the object
        return data

    def close(self) -> None:
        if self._check is not None:
            assert self._check.stdin is not None
            self._check.stdin.close()
            self._check.wait()
            self._check = None
        if self._cat is not None:
            assert self._cat.stdin is not None
            self._cat.stdin.close()
            self._cat.wait()
            self._cat = None
        if self._log is not None:
            self._log.kill()
            self._log.wait()
            assert self._log.stdout is not None
            self._log.stdout.close()
            self._log, self._diffs = None, None


def pending(history: GitHistory, imported: set[str]) -> Iterator[tuple[str | None, Commit]]:
    """(parent, commit) pairs not yet imported, oldest first; the parent is the previous first-parent commit."""
    parent: str | None = None
    for commit in history.commits():
        if commit.sha not in imported:
            yield parent, commit
        parent = commit.sha


OnCommit = Callable[[int, int, Commit], None]


@dataclass
class GitImport:
    """What a git backfill did."""

    summary: BatchSummary
    commits: int = 0
    skipped: int = 0
    lifted: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            **self.summary.to_json(),
            "commits": self.commits,
            "already_imported": self.skipped,
            "lifted": self.lifted,
        }


def to_import(history: GitHistory, imported: set[str], last: tuple[int, str] | None) -> list[tuple[str | None, Commit]]:
    """The (parent, commit) pairs to import, oldest first; ConfigError when the vault's batches came from
    the folder (``last``: its last batch's known_at and source) and are later than the first of them."""
    todo = list(pending(history, imported))
    if todo and last is not None and last[1] != "git" and todo[0][1].committed_at < last[0]:
        raise ConfigError(
            f"this vault already has batches up to {format_time(last[0])}, later than the first commit "
            f"to import ({format_time(todo[0][1].committed_at)}); import the git history into a new "
            "vault name or database"
        )
    return todo


def _raw_log(stream: Any) -> Iterator[tuple[str, list[tuple[bytes, bytes]]]]:
    """(commit, [(raw meta, path), ...]) from ``git log --format=%x01%H --raw -z``, one commit at a time."""
    sha: str | None = None
    entries: list[tuple[bytes, bytes]] = []
    meta: bytes | None = None
    buffered = b""
    while True:
        chunk = stream.read1(1 << 16)
        fields = (buffered + chunk).split(b"\0")
        buffered = fields.pop() if chunk else b""
        for field in fields:
            if meta is not None:  # the path after its meta, whatever it holds
                entries.append((meta, field))
                meta = None
                continue
            field = field.lstrip(b"\n")
            if field.startswith(b"\x01"):
                if sha is not None:
                    yield sha, entries
                sha, entries = field[1:].decode(), []
            elif field.startswith(b":"):
                meta = field
        if not chunk:
            break
    if sha is not None:
        yield sha, entries

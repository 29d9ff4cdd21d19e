"""``import --from-git`` on a small repository made here: first-parent merges, a vault in a subfolder next to
other folders, deletions, a note that stops being a regular file, non-ASCII names, and a second import
that resumes after new commits. Each commit's changes come from one ``git log`` stream read in step with
the import (``gitimport.GitHistory``); the truth is git's own tree at every commit (``git ls-tree`` and
``git show``), read independently of that stream."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from vaultsync import Vault
from vaultsync.errors import NoteNotFound

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

START = 1_700_000_000


class Repo:
    def __init__(self, top: Path) -> None:
        self.top = top
        self.clock = START
        top.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.org",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.org",
            "GIT_AUTHOR_DATE": f"@{self.clock} +0000",
            "GIT_COMMITTER_DATE": f"@{self.clock} +0000",
            "HOME": str(self.top),
        }
        return subprocess.run(
            ["git", "-c", "core.quotepath=off", *args],
            cwd=self.top,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def write(self, path: str, text: str) -> None:
        file = self.top / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")

    def commit(self, message: str) -> None:
        self.clock += 3600
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)

    def merge(self, branch: str) -> None:
        self.clock += 3600
        self.git("merge", "-q", "--no-ff", "-m", f"merge {branch}", branch)

    def first_parent(self) -> list[tuple[str, int]]:
        out = self.git("log", "--first-parent", "--reverse", "--format=%H %ct", "HEAD")
        return [(sha, int(t)) for sha, t in (line.split() for line in out.splitlines())]

    def notes_at(self, sha: str, folder: str = "") -> dict[str, str]:
        """Every regular .md file under ``folder`` (default: the whole tree) at ``sha``, by vault-relative path,
        as git holds it."""
        out = self.git("ls-tree", "-r", "-z", sha, *(["--", folder + "/"] if folder else []))
        notes = {}
        for entry in filter(None, out.split("\0")):
            meta, path = entry.split("\t", 1)
            if meta.split()[0] in ("100644", "100755") and path.endswith(".md"):
                notes[path[len(folder) + 1 :] if folder else path] = self.git("show", f"{sha}:{path}")
        return notes


def build(repo: Repo) -> None:
    repo.write("vault/Home.md", "# Home\n\nStart here.\n")
    repo.write("other/Outside.md", "# Not in the vault\n")
    repo.commit("first")
    repo.write("vault/Ideen/Über.md", "# Über\n\nUmlaute im Namen.\n")
    repo.write("vault/日记.md", "今天 同步\n")
    repo.commit("non-ASCII names")
    repo.write("other/Outside.md", "# Still not in the vault\n")
    repo.commit("outside only")
    repo.git("checkout", "-q", "-b", "topic")
    repo.write("vault/Topic.md", "# Topic\n\nFrom a branch.\n")
    repo.write("vault/Home.md", "# Home\n\nStart here.\n\nSee [[Topic]].\n")
    repo.commit("topic work")
    repo.write("vault/Topic.md", "# Topic\n\nFrom a branch, twice.\n")
    repo.commit("topic again")
    repo.git("checkout", "-q", "main")
    repo.write("vault/Main side.md", "Written on main meanwhile.\n")
    repo.commit("main meanwhile")
    repo.merge("topic")
    (repo.top / "vault/日记.md").unlink()
    repo.git("mv", "vault/Ideen/Über.md", "vault/Ideen/Ueber.md")
    repo.commit("delete and rename")
    (repo.top / "vault/Main side.md").unlink()
    os.symlink("Home.md", repo.top / "vault/Main side.md")
    repo.commit("a note becomes a symlink")


def test_from_git_matches_every_first_parent_commit_and_resumes(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    build(repo)
    db = tmp_path / "git.db"
    with Vault.open(db, root=repo.top / "vault") as vault:
        done = vault.import_git().to_json()
    commits = repo.first_parent()
    assert (done["commits"], done["already_imported"]) == (len(commits), 0)

    # more history, then a second import: only the new commits, diffed against the last imported one
    repo.write("vault/Later.md", "# Later\n")
    repo.write("vault/Home.md", "# Home\n\nStart here, again.\n")
    repo.commit("after the first import")
    repo.git("checkout", "-q", "-b", "late")
    repo.write("vault/Ideen/Ueber.md", "# Über\n\nUmlaute, geändert auf einem Zweig.\n")
    repo.commit("late branch")
    repo.git("checkout", "-q", "main")
    repo.merge("late")
    with Vault.open(db, root=repo.top / "vault") as vault:
        again = vault.import_git().to_json()
    all_commits = repo.first_parent()
    assert (again["commits"], again["already_imported"]) == (len(all_commits) - len(commits), len(commits))

    with Vault.open(db, name="vault", readonly=True) as vault:
        for sha, seconds in all_commits:
            at = dt.datetime.fromtimestamp(seconds, dt.UTC)
            truth = repo.notes_at(sha, "vault")
            assert {r.path for r in vault.ls(as_of=at)} == set(truth), sha
            for path, text in truth.items():
                assert vault.read(path, as_of=at).content == text, (sha, path)
        assert vault.ls() and "Main side.md" not in {r.path for r in vault.ls()}
        with pytest.raises(NoteNotFound):
            vault.read("日记.md")
        assert [r.kind for r in vault.history("Ideen/Ueber.md")][-1] == "modified"


def test_a_vault_at_the_top_of_its_repository_matches_every_commit(tmp_path: Path) -> None:
    """No folder prefix: every note of the tree, the other folder's included, at every first-parent commit."""
    repo = Repo(tmp_path / "repo")
    build(repo)
    db = tmp_path / "top.db"
    with Vault.open(db, root=repo.top) as vault:
        done = vault.import_git().to_json()
    commits = repo.first_parent()
    assert (done["commits"], done["errors"]) == (len(commits), [])
    with Vault.open(db, name="repo", readonly=True) as vault:
        for sha, seconds in commits:
            at = dt.datetime.fromtimestamp(seconds, dt.UTC)
            truth = repo.notes_at(sha)
            assert {r.path for r in vault.ls(as_of=at)} == set(truth), sha
            for path, text in truth.items():
                assert vault.read(path, as_of=at).content == text, (sha, path)
        assert "other/Outside.md" in {r.path for r in vault.ls()}


BROKEN = "---\ntags: [unclosed\n---\n# Broken\n"


def test_a_broken_frontmatter_is_warned_about_once_a_text_not_for_its_renames(tmp_path: Path, cli) -> None:
    """A note with broken YAML renamed twice, then changed (still broken), then copied: one warning for the first
    text, one for the changed text; none for a rename, nor for the copy of a text already warned about."""
    repo = Repo(tmp_path / "repo")
    repo.write("vault/Broken.md", BROKEN)
    repo.write("vault/Fine.md", "# Fine\n")
    repo.commit("a broken note")
    repo.git("mv", "vault/Broken.md", "vault/Moved.md")
    repo.commit("renamed")
    repo.git("mv", "vault/Moved.md", "vault/Third.md")
    repo.commit("renamed again")
    repo.write("vault/Third.md", BROKEN + "\nMore text.\n")
    repo.commit("changed, still broken")
    repo.write("vault/Copy.md", BROKEN + "\nMore text.\n")
    repo.commit("copied")
    done = cli("import", str(repo.top / "vault"), "--from-git", db=tmp_path / "db" / "git.db")
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "invalid YAML frontmatter" in line]
    assert [line.split(":")[1].strip() for line in warned] == ["Broken.md", "Third.md"], done.stderr
    with Vault.open(tmp_path / "db" / "git.db", name="vault", readonly=True) as vault:  # the history keeps them all
        assert [r.kind for r in vault.history("Third.md")] == ["created", "renamed", "renamed", "modified"]
        assert all(r.warnings for r in vault.history("Third.md"))


def test_a_repository_git_refuses_to_read_is_said_in_gits_words(tmp_path: Path, cli) -> None:
    """Another user's repository: git refuses it ("dubious ownership", and how to allow it); the import says that,
    not that the folder is not in a repository."""
    if os.geteuid() != 0:
        pytest.skip("making a repository another user's needs root")
    repo = Repo(tmp_path / "repo")
    repo.write("vault/Fine.md", "# Fine\n")
    repo.commit("first")
    for folder, dirs, files in os.walk(repo.top):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.chown(name, 65534, 65534)
    home = tmp_path / "home"  # no global git configuration that would allow it (safe.directory)
    home.mkdir()
    done = cli("import", str(repo.top / "vault"), "--from-git", db=tmp_path / "db" / "git.db", env={"HOME": str(home)})
    assert done.returncode == 1, done.stderr
    assert "dubious ownership" in done.stderr and "safe.directory" in done.stderr, done.stderr
    assert "not inside a git repository" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    outside = tmp_path / "plain"
    outside.mkdir()
    done = cli("import", str(outside), "--from-git", db=tmp_path / "db" / "git.db", env={"HOME": str(home)})
    assert done.returncode == 1 and "is not inside a git repository" in done.stderr, done.stderr

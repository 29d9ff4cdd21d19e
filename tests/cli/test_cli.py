"""The command line: help, exit codes, one-line errors, bad input, --json shapes.

Behaviour runs in this process through click's runner (``invoke``); a few tests keep a real subprocess
where the process boundary is the point: the installed script and ``python -m``, usage exit status 2,
``check``'s own exit status, byte-exact stdout of ``read``, and the demo.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from support.cli import Ran, invoke, run_cli
from support.repo import REPO

from vaultsync.cli import cli as cli_group

T1, T2, T3 = "2024-01-01", "2024-02-01T12:00:00Z", "2024-03-01T00:00:00+02:00"
READ_ONLY = [
    ["read", "Inbox.md"],
    ["ls"],
    ["history", "Inbox.md"],
    ["diff", "Inbox.md", "--from", T1],
    ["changes", "--since", T1],
    ["stats"],
    ["check"],
]


def raw(*args: str, db: Path) -> subprocess.CompletedProcess[bytes]:
    """The installed command with bytes output (byte-exact stdout through a real process)."""
    return subprocess.run([sys.executable, "-m", "vaultsync", "--db", str(db), *args], capture_output=True, timeout=120)


def one_line_error(done: Ran | subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit status 1 and exactly one `Error: …` line on stderr, naming every needle."""
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def history(db_path: Path, vault_dir: Path) -> tuple[Path, Path]:
    """The shared small vault imported at T1, then edited, renamed and pruned and imported at T2."""
    invoke("import", str(vault_dir), "--known-at", T1, db=db_path, check=True)
    atlas = vault_dir / "Projects" / "Atlas.md"
    atlas.write_text(atlas.read_text(encoding="utf-8") + "\n## Later\n\nAdded in February.\n", encoding="utf-8")
    os.replace(vault_dir / "Inbox.md", vault_dir / "Inbox 2024.md")
    (vault_dir / "Notes").mkdir()
    (vault_dir / "Notes" / "Idea.md").write_text("# Idea\n\ntemporary\n", encoding="utf-8")
    invoke("import", str(vault_dir), "--known-at", T2, db=db_path, check=True)
    (vault_dir / "Notes" / "Idea.md").unlink()
    invoke("import", str(vault_dir), "--known-at", T3, db=db_path, check=True)
    return db_path, vault_dir


# ---------------------------------------------------------------- help and entry points


@pytest.mark.parametrize("command", [None, *sorted(cli_group.commands)])
def test_every_command_has_help_with_an_example(command: str | None) -> None:
    done = invoke(*([command] if command else []), "--help")
    assert done.returncode == 0, done.stderr
    assert "Usage: vaultsync" in done.stdout and "Example:" in done.stdout
    example = done.stdout.split("Example:", 1)[1]
    assert f"vaultsync {command or ''}".strip() in example


def test_python_m_and_the_console_script(tmp_path: Path) -> None:
    assert run_cli("--version").returncode == 0
    script = Path(sys.executable).with_name("vaultsync")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Commands:" in done.stdout


def test_usage_mistakes_exit_2(db_path: Path, vault_dir: Path) -> None:
    assert run_cli("frobnicate", db=db_path).returncode == 2
    assert run_cli("read", db=db_path).returncode == 2  # missing NOTE
    both = run_cli("import", str(vault_dir), "--from-git", "--known-at", T1, db=db_path)
    assert both.returncode == 2 and "--known-at cannot be combined with --from-git" in both.stderr
    assert "Traceback" not in both.stderr


# ---------------------------------------------------------------- one-line errors


@pytest.mark.parametrize("args", READ_ONLY, ids=[a[0] for a in READ_ONLY])
def test_read_only_commands_never_create_a_database(tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "nowhere" / "missing.db"
    one_line_error(invoke(*args, db=missing), str(missing), "vaultsync import")
    assert not missing.parent.exists()
    # the default location ($VAULTSYNC_HOME) is not created either
    home = Path(os.environ["VAULTSYNC_HOME"])
    one_line_error(invoke(*args), "no vaultsync database")
    assert not (home / "vaultsync.db").exists()


def test_library_errors_are_shown_in_the_command_lines_words(tmp_path: Path) -> None:
    """The library names the argument an error is about and the operation that fixes it, never a flag or
    a command; the command line adds its own option and command for them."""
    from vaultsync.cli.base import message
    from vaultsync.errors import ConfigError, ProviderError, StoreError

    missing = tmp_path / "missing.db"
    assert one_line_error(invoke("ls", db=missing)) == (
        f"Error: no vaultsync database at {missing}: import a vault into it first, or open another database "
        "(run `vaultsync import VAULT`; --db)"
    )
    assert message(ProviderError("switch embedders", remedy="reembed", remedy_args={"embedder": "minilm"})) == (
        "switch embedders (run `vaultsync reembed --embedder minilm`)"
    )
    assert message(StoreError("rebuild", remedy="reindex", remedy_args={"full": True})) == (
        "rebuild (run `vaultsync reindex --full`)"
    )
    assert message(ConfigError("not there", argument="watch", remedy="sync", remedy_args={"root": "/v"})) == (
        "not there (run `vaultsync import /v`; --watch)"
    )
    assert message(ConfigError("too early", argument="known_at")) == "too early (--known-at)"
    assert message(ConfigError("plain")) == "plain"


def test_files_that_are_not_our_database(tmp_path: Path, vault_dir: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello\n", encoding="utf-8")
    one_line_error(invoke("ls", db=text), "not a database")
    one_line_error(invoke("import", str(vault_dir), db=text), "not a database")
    assert text.read_text(encoding="utf-8") == "hello\n"
    foreign = tmp_path / "other.sqlite"
    con = apsw.Connection(str(foreign))
    con.execute("CREATE TABLE mine (x)")
    con.close()
    one_line_error(invoke("ls", db=foreign), "not a vaultsync database")
    one_line_error(invoke("import", str(vault_dir), db=foreign), "another program's SQLite database")
    newer = tmp_path / "newer.db"
    invoke("import", str(vault_dir), db=newer, check=True)
    con = apsw.Connection(str(newer))
    con.execute("PRAGMA user_version = 999")
    con.close()
    one_line_error(invoke("ls", db=newer), "newer vaultsync")
    one_line_error(invoke("import", str(vault_dir), db=newer), "newer vaultsync")


@pytest.mark.parametrize(
    "bad",
    [
        "2024-02-30",
        "yesterday",
        "2024-01-01T10:00",
        "2024-13-01",
        "01/02/2024",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
    ],
)
def test_impossible_as_of_is_refused(history: tuple[Path, Path], bad: str) -> None:
    db, _ = history
    line = one_line_error(invoke("read", "Projects/Atlas.md", "--as-of", bad, db=db), bad, "YYYY-MM-DD")
    assert "--as-of" in line
    one_line_error(invoke("ls", "--as-of", bad, db=db), bad)


def test_known_at_earlier_than_last_batch_changes_nothing(history: tuple[Path, Path]) -> None:
    db, vault = history
    before = json.loads(invoke("stats", "--json", db=db, check=True).stdout)
    (vault / "Projects" / "Atlas.md").write_text("# Atlas\n\nrewritten\n", encoding="utf-8")
    one_line_error(
        invoke("import", str(vault), "--known-at", "2024-02-01", db=db),
        "known_at 2024-02-01T00:00:00Z",
        "--known-at",
        "earlier than the vault's last batch",
        "2024-02-29T22:00:00Z",
    )
    after = json.loads(invoke("stats", "--json", db=db, check=True).stdout)
    assert (after["batches"], after["revisions"]) == (before["batches"], before["revisions"])
    assert "rewritten" not in invoke("read", "Projects/Atlas.md", db=db).stdout


def test_missing_notes_and_paths_outside_the_vault(history: tuple[Path, Path]) -> None:
    db, _ = history
    one_line_error(invoke("read", "Nope.md", db=db), "'Nope.md' did not exist")
    one_line_error(invoke("read", "Projects/Atlas.md", "--as-of", "2023-06-01", db=db), "as of 2023-06-01")
    one_line_error(invoke("read", "Inbox.md", db=db), "renamed to Inbox 2024.md")
    one_line_error(invoke("read", "Notes/Idea.md", db=db), "was deleted at", "as of")
    one_line_error(invoke("history", "Nope.md", db=db), "no history")
    one_line_error(invoke("diff", "Nope.md", "--from", T1, db=db), "Nope.md")
    for bad in ("../secret.md", "Projects/../../secret.md", "/etc/passwd"):
        one_line_error(invoke("read", bad, db=db), bad)
    one_line_error(invoke("changes", "--since", T2, "--until", T1, db=db), "until is earlier than since")
    one_line_error(invoke("--vault", "other", "ls", db=db), "no vault 'other'")
    one_line_error(invoke("import", "/no/such/folder", db=db), "/no/such/folder")


def test_several_vaults_need_a_name(history: tuple[Path, Path], tmp_path: Path) -> None:
    db, _ = history
    second = tmp_path / "second"
    second.mkdir()
    (second / "A.md").write_text("# A\n", encoding="utf-8")
    invoke("import", str(second), db=db, check=True)
    one_line_error(invoke("ls", db=db), "holds 2 vaults", "--vault NAME")
    assert invoke("--vault", "second", "read", "A.md", db=db, check=True).stdout == "# A\n"


# ---------------------------------------------------------------- bad input


BAD_FILES = {
    "invalid-utf8": ("Latin1.md", b"# caf\xe9\n", "invalid UTF-8 at byte 5"),
    "nul": ("Binary.md", b"# x\n\x00\x01\x02", "NUL bytes"),
    "oversized": ("Huge.md", b"x" * (5 * 2**20 + 1), "MB limit"),
    "frontmatter": ("Broken.md", b"---\ntags: [unclosed\n  bad: : yaml\n---\n# Broken\n", "invalid YAML frontmatter"),
    "symlink": ("Escape.md", None, "a symlink, not followed"),
}


def write_bad(vault: Path, kind: str, outside: Path) -> str:
    name, payload, _ = BAD_FILES[kind]
    if payload is None:
        outside.write_text("# secret outside the vault\n", encoding="utf-8")
        (vault / name).symlink_to(outside)
    else:
        (vault / name).write_bytes(payload)
    return name


def test_bad_files_are_named_and_the_rest_lands(history: tuple[Path, Path], tmp_path: Path) -> None:
    db, vault = history
    good_before = invoke("read", "Projects/Atlas.md", db=db).stdout_bytes
    for kind in BAD_FILES:
        write_bad(vault, kind, tmp_path / "outside.md")
    (vault / "Projects" / "Atlas.md").write_bytes(b"# Atlas\n\xff\xfe\n")  # a good note turns bad
    (vault / "Fine.md").write_text("# Fine\n", encoding="utf-8")
    done = invoke("import", str(vault), "--json", db=db)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    problems = {e["path"]: e["reason"] for e in summary["errors"] + summary["warnings"]}
    for kind, (name, _, reason) in BAD_FILES.items():
        assert reason in problems[name], (kind, problems)
        assert name in done.stderr and reason in done.stderr
    assert "Projects/Atlas.md" in problems and summary["added"] == 2  # Fine.md and Broken.md (kept as text)
    assert "Traceback" not in done.stderr
    listed = [r["path"] for r in json.loads(invoke("ls", "--json", db=db, check=True).stdout)]
    assert "Fine.md" in listed and "Broken.md" in listed
    assert not {"Latin1.md", "Binary.md", "Huge.md", "Escape.md"} & set(listed)
    assert invoke("read", "Projects/Atlas.md", db=db).stdout_bytes == good_before  # last good revision stays
    broken = json.loads(invoke("read", "Broken.md", "--json", db=db, check=True).stdout)
    assert broken["frontmatter"] is None and "invalid YAML" in broken["warnings"][0]
    assert broken["content"].encode() == BAD_FILES["frontmatter"][1]


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_strict_refuses_the_whole_batch(history: tuple[Path, Path], tmp_path: Path, kind: str) -> None:
    db, vault = history
    before = json.loads(invoke("stats", "--json", db=db, check=True).stdout)
    name = write_bad(vault, kind, tmp_path / "outside.md")
    (vault / "Fine.md").write_text("# Fine\n", encoding="utf-8")
    one_line_error(invoke("import", str(vault), "--strict", db=db), "strict", name)
    after = json.loads(invoke("stats", "--json", db=db, check=True).stdout)
    assert (after["batches"], after["revisions"]) == (before["batches"], before["revisions"])
    assert invoke("read", "Fine.md", db=db).returncode == 1
    # without --strict the same folder imports, naming the file
    loose = invoke("import", str(vault), db=db)
    assert loose.returncode == 0 and name in loose.stderr


# ---------------------------------------------------------------- output shapes


def test_import_json(db_path: Path, vault_dir: Path) -> None:
    first = json.loads(invoke("import", str(vault_dir), "--known-at", T1, "--json", db=db_path, check=True).stdout)
    assert set(first) >= {
        "vault",
        "batch_id",
        "known_at",
        "added",
        "modified",
        "renamed",
        "deleted",
        "unchanged",
        "errors",
        "warnings",
    }
    assert (first["vault"], first["known_at"], first["added"], first["errors"]) == (
        vault_dir.name,
        "2024-01-01T00:00:00Z",
        2,
        [],
    )
    again = json.loads(invoke("import", str(vault_dir), "--json", db=db_path, check=True).stdout)
    assert (again["batch_id"], again["unchanged"], again["added"]) == (None, 2, 0)
    human = invoke("import", str(vault_dir), db=db_path, check=True).stdout
    assert human.startswith(f"{vault_dir.name}: no change") and "2 unchanged" in human


@pytest.mark.slow
def test_read_json_and_bytes(history: tuple[Path, Path]) -> None:
    db, vault = history
    old = json.loads(invoke("read", "Projects/Atlas.md", "--as-of", T1, "--json", db=db, check=True).stdout)
    assert set(old) >= {
        "path",
        "content",
        "known_at",
        "content_hash",
        "size",
        "kind",
        "renamed_from",
        "title",
        "tags",
        "links",
        "frontmatter",
    }
    assert (old["path"], old["known_at"], old["kind"]) == ("Projects/Atlas.md", "2024-01-01T00:00:00Z", "created")
    assert "Added in February" not in old["content"] and old["size"] == len(old["content"].encode())
    now = raw("read", "Projects/Atlas.md", db=db)
    assert now.returncode == 0 and now.stdout == (vault / "Projects" / "Atlas.md").read_bytes()
    moved = json.loads(invoke("read", "Inbox 2024.md", "--json", db=db, check=True).stdout)
    assert (moved["kind"], moved["renamed_from"]) == ("renamed", "Inbox.md")
    assert raw("read", "Inbox 2024", db=db).stdout == (vault / "Inbox 2024.md").read_bytes()  # .md optional


def test_ls_json(history: tuple[Path, Path]) -> None:
    db, _ = history
    rows = json.loads(invoke("ls", "--as-of", T2, "--json", db=db, check=True).stdout)
    assert [r["path"] for r in rows] == ["Inbox 2024.md", "Notes/Idea.md", "Projects/Atlas.md"]
    assert all({"path", "known_at", "content_hash", "size"} <= set(r) for r in rows)
    assert [r["path"] for r in json.loads(invoke("ls", "--as-of", T1, "--json", db=db).stdout)] == [
        "Inbox.md",
        "Projects/Atlas.md",
    ]
    assert json.loads(invoke("ls", "--as-of", "2023-01-01", "--json", db=db).stdout) == []
    assert [r["path"] for r in json.loads(invoke("ls", "--prefix", "Projects/", "--json", db=db).stdout)] == [
        "Projects/Atlas.md"
    ]
    human = invoke("ls", db=db, check=True).stdout.splitlines()
    assert len(human) == 2 and human[0].endswith("Inbox 2024.md")


def test_history_json_follows_renames(history: tuple[Path, Path]) -> None:
    db, _ = history
    rows = json.loads(invoke("history", "Inbox 2024.md", "--json", db=db, check=True).stdout)
    assert [(r["path"], r["kind"], r["renamed_from"]) for r in rows] == [
        ("Inbox.md", "created", None),
        ("Inbox 2024.md", "renamed", "Inbox.md"),
    ]
    assert all({"path", "known_at", "kind", "content_hash", "size", "renamed_from"} <= set(r) for r in rows)
    assert rows[0]["content_hash"] == rows[1]["content_hash"]
    idea = json.loads(invoke("history", "Notes/Idea.md", "--json", db=db, check=True).stdout)
    assert [(r["kind"], r["known_at"]) for r in idea] == [
        ("created", "2024-02-01T12:00:00Z"),
        ("deleted", "2024-02-29T22:00:00Z"),
    ]
    assert idea[1]["size"] is None and idea[1]["content_hash"] is None


def test_changes_json(history: tuple[Path, Path]) -> None:
    db, _ = history
    rows = json.loads(invoke("changes", "--since", T1, "--json", db=db, check=True).stdout)
    assert [(r["path"], r["kind"], r["renamed_from"]) for r in rows] == [
        ("Inbox 2024.md", "renamed", "Inbox.md"),
        ("Notes/Idea.md", "created", None),
        ("Projects/Atlas.md", "modified", None),
        ("Notes/Idea.md", "deleted", None),
    ]
    assert all({"path", "kind", "known_at", "renamed_from"} <= set(r) for r in rows)
    window = json.loads(invoke("changes", "--since", T1, "--until", T2, "--json", db=db, check=True).stdout)
    assert len(window) == 3 and all(r["known_at"] == "2024-02-01T12:00:00Z" for r in window)
    assert json.loads(invoke("changes", "--since", T3, "--json", db=db, check=True).stdout) == []


def test_diff(history: tuple[Path, Path]) -> None:
    db, _ = history
    done = invoke("diff", "Projects/Atlas.md", "--from", T1, "--to", T2, db=db, check=True)
    assert done.stdout.startswith(
        "--- Projects/Atlas.md @ 2024-01-01T00:00:00Z\n+++ Projects/Atlas.md @ 2024-02-01T12:00:00Z\n"
    )
    assert "+Added in February.\n" in done.stdout and "\n-" not in done.stdout
    assert invoke("diff", "Projects/Atlas.md", "--from", T2, "--to", T3, db=db, check=True).stdout == ""
    gone = invoke("diff", "Notes/Idea.md", "--from", T2, "--to", T3, db=db, check=True).stdout
    assert "-temporary\n" in gone and "(absent" in gone


def test_stats_and_check_json(history: tuple[Path, Path]) -> None:
    db, vault = history
    stats = json.loads(invoke("stats", "--json", db=db, check=True).stdout)
    assert (stats["vault"], stats["notes"], stats["batches"]) == (vault.name, 2, 3)
    assert {"revisions", "chunk_revisions", "first_batch", "last_batch", "database_bytes"} <= set(stats)
    assert stats["first_batch"] == "2024-01-01T00:00:00Z" and stats["last_batch"] == "2024-02-29T22:00:00Z"
    check = invoke("check", "--json", db=db, check=True)
    assert json.loads(check.stdout) == {"vault": vault.name, "ok": True, "problems": []}
    assert invoke("check", db=db, check=True).stdout.strip() == f"{vault.name}: ok"


def test_check_detects_tampering(history: tuple[Path, Path]) -> None:
    db, _ = history
    con = apsw.Connection(str(db))
    con.execute("DROP TRIGGER texts_no_update")
    con.execute("UPDATE texts SET body = zeroblob(3) WHERE id = (SELECT min(id) FROM texts)")
    con.execute("DROP TRIGGER batches_no_update")
    con.execute("UPDATE batches SET known_at = 0 WHERE id = (SELECT max(id) FROM batches)")
    con.close()
    done = run_cli("check", db=db)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "texts_no_update is missing" in done.stderr and "does not match" in done.stderr
    assert "goes back in time" in done.stderr
    report = json.loads(run_cli("check", "--json", db=db).stdout)
    assert report["ok"] is False and len(report["problems"]) >= 4


@pytest.mark.slow
def test_the_demo_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for step in (
        "$ vaultsync import",
        "--from-git",
        "$ vaultsync ls --as-of",
        "$ vaultsync read",
        "$ vaultsync diff",
        "$ vaultsync history",
        "$ vaultsync search beacons --as-of",
        "--valid-at",
        "> search_notes(",
        "> read_note(",
        "$ vaultsync changes --since",
        "Done.",
    ):
        assert step in out, step
    past, today = out.split("$ vaultsync search beacons")[1:3]
    assert "Decision, February" not in past and "Decision, February" in today
    assert "+We switch the offline sync to lighthouse beacons" in out
    assert "without the February decision" in out and "known 2025-02-03" in out
    assert "renamed" in out and "Traceback" not in out + done.stderr
    # the vectors' line does not promise a watcher that nobody started
    assert "Ctrl-C leaves the rest to the watcher or the next import" in out or "semantic vectors" not in out
    # three commits, three batches: the import's counts say they are the sum, not one batch's
    assert re.search(
        r"batches up to \d+ \(one a commit, the last known at 2025-03-03T09:00:00Z\), in all: \d+ added", out
    )
    # the commands it prints can be typed as they are, after the line it says to type first
    first = next(line for line in out.splitlines() if line.startswith("To type the commands below yourself"))
    db = re.search(r"VAULTSYNC_DB=(\S+)", first)
    assert db and "PATH=" in first, first
    shown = out.split("$ vaultsync ls --as-of 2025-01-10 --prefix Team/\n")[1].split("\n\n")[0]
    typed = subprocess.run(
        [sys.executable, "-m", "vaultsync", "ls", "--as-of", "2025-01-10", "--prefix", "Team/"],
        capture_output=True,
        text=True,
        env={**os.environ, "VAULTSYNC_DB": db.group(1)},
    )
    assert typed.stdout.strip() == shown.strip() and "Team/Onboarding.md" in shown, (typed.stderr, shown)

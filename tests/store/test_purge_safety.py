"""Purge safety: readers see before or after, a SIGKILL leaves before or after, refusals, merges, the
compression dictionary, the command line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.cli import invoke
from support.engines import own_store, sqlite_file
from support.purge_history import S_ASCII, S_CJK, S_STASH, SECRETS, STASH, History, find_traces, redact

from vaultsync.errors import ConfigError, LockedError
from vaultsync.store.codec import MIN_SAMPLE
from vaultsync.store.lock import WriterLock
from vaultsync.times import as_micros
from vaultsync.vault import Vault


def observe(db: Path, history: History, k: int) -> tuple:
    """What a reader sees at batch ``k`` in one read transaction: two planted notes, the listing, a search."""
    with own_store(db) as store:
        found = store.vault("vault")
        assert found is not None
        with store.view(found.id, found.name, as_of=as_micros(history.times[k])) as view:
            return (
                view.content(view.revision(history.planted["ascii"])),
                view.content(view.revision(history.planted["cjk"])),
                tuple(r.path for r in view.ls()),
                tuple(h["chunk_id"] for h in view.search("quokka", mode="keyword")["hits"]),
            )


@pytest.mark.corpus
def test_a_concurrent_reader_sees_before_or_after_never_between(planted_history: History, planted_db: Path) -> None:
    history, k = planted_history, 6
    before = observe(planted_db, history, k)
    assert S_ASCII in before[0] and S_CJK in before[1] and before[3]
    seen: list[tuple] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                seen.append(observe(planted_db, history, k))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        with Vault.open(planted_db, name="vault") as vault:
            vault.purge(texts=SECRETS)
    finally:
        done.set()
        for t in threads:
            t.join()
    after = observe(planted_db, history, k)
    assert not errors, errors
    assert after[0] == redact(before[0]) and after[1] == redact(before[1]) and after != before
    assert after[3] == ()  # "quokka" was only ever in the purged secret
    mixed = [s for s in seen if s not in (before, after)]
    assert not mixed, f"{len(mixed)} of {len(seen)} reads saw a partial purge"


@pytest.mark.corpus
def test_sigkill_during_purge_leaves_before_or_after(
    planted_history: History, planted_db: Path, tmp_path: Path
) -> None:
    history = planted_history
    k = 6
    before = observe(planted_db, history, k)
    redacted = (redact(before[0]), redact(before[1]), before[2], ())  # "quokka" was only in a secret
    reference = tmp_path / "reference.db"
    reference.write_bytes(planted_db.read_bytes())
    args = [sys.executable, "-m", "vaultsync", "--db", str(planted_db), "purge", "--yes", "--json"]
    args += [a for s in SECRETS for a in ("--text", s)]
    started = time.perf_counter()
    full = subprocess.run(args, capture_output=True, text=True, timeout=600)
    duration = time.perf_counter() - started
    assert full.returncode == 0, full.stderr
    outcomes = []
    for fraction in (0.3, 0.6, 0.85, 0.95, None):  # None: the moment the purge's commit is visible
        copy = tmp_path / f"kill{fraction}.db"
        copy.write_bytes(reference.read_bytes())
        proc = subprocess.Popen([*args[:4], str(copy), *args[5:]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if fraction is None:
            committed(copy, proc)
        else:
            time.sleep(duration * fraction)
        proc.send_signal(signal.SIGKILL)  # nothing when the process already ended
        proc.wait()
        state = observe(copy, history, k)
        assert state in (before, redacted), f"killed at {fraction}: neither before nor after"
        with Vault.open(copy, name="vault") as vault:  # opening for writing finishes an interrupted scrub
            assert vault.check() == []
        if state == redacted:
            assert find_traces(copy, {"ascii": [S_ASCII.encode()]}, {}) == []
        outcomes.append("after" if state == redacted else "before")
    assert outcomes[-1] == "after", outcomes  # killed after its commit: the purge stands, the scrub is finished
    print("outcomes", outcomes)


def committed(db: Path, proc: subprocess.Popen) -> None:
    """Wait until a purge's commit is visible to another connection (or the process ends)."""
    import apsw

    while proc.poll() is None:
        try:
            con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
            try:
                if con.execute("SELECT count(*) FROM purges").fetchone()[0]:
                    return
            finally:
                con.close()
        except apsw.Error:
            pass  # not migrated yet, or busy
        time.sleep(0.001)


def _vault(tmp_path: Path, notes: dict[str, str]) -> Path:
    root = tmp_path / "vault"
    for rel, text in notes.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_refusals_name_the_problem(tmp_path: Path) -> None:
    root = _vault(tmp_path, {"a.md": "# A\n\nkey: hunter2-secret\n", "hunter2-secret notes.md": "# B\n"})
    with Vault.open(tmp_path / "db", root=root) as vault:
        vault.sync(known_at="2024-01-01")
        with pytest.raises(ConfigError, match="still contain that text"):
            vault.purge(texts=["key: hunter2"])
        with pytest.raises(ConfigError, match="at least 3 characters"):
            vault.purge(texts=["  a "])
        with pytest.raises(ConfigError, match="part of a note's path"):
            vault.purge(texts=["hunter2-secret"], also_current=True)
        with pytest.raises(ConfigError, match="still in the vault"):
            vault.purge(note="a.md")
        with pytest.raises(ConfigError, match="in the future"):
            vault.purge(before="2999-01-01")
        with own_store(tmp_path / "db", readonly=False) as store, pytest.raises(ConfigError, match="exactly one"):
            store.purge(vault.id, note="a.md", before=1)  # the store's own refusal, below Vault.purge's
        assert vault.purge(texts=["key: hunter2"], also_current=True).revisions_changed == 1
        assert vault.read("a.md").content == "# A\n\n[purged]-secret\n"
        other = Vault.open(tmp_path / "db", root=root)
        try:
            vault.lock.acquire()
            with pytest.raises(LockedError):
                other.purge(texts=["something"], also_current=True)
        finally:
            vault.lock.release()
            other.close()
        lock_text = WriterLock(str(tmp_path / "db"), vault.name).path.read_text()  # the lock file as the holder left it
    assert "hunter2" not in lock_text


def test_a_revision_made_identical_by_the_purge_is_merged(tmp_path: Path) -> None:
    root = _vault(tmp_path, {"n.md": "# N\n\nplain\n"})
    with Vault.open(tmp_path / "db", root=root) as vault:
        vault.sync(known_at="2024-01-01")
        (root / "n.md").write_text("# N\n\nplain\n\npassword: tr0ub4dor\n", encoding="utf-8")
        vault.sync(known_at="2024-01-02")
        (root / "n.md").write_text("# N\n\nplain\n\npassword: [purged]\n", encoding="utf-8")
        vault.sync(known_at="2024-01-03")  # already redacted by hand: the purge makes it equal to the 2nd
        (root / "n.md").write_text("# N\n\nplain, later\n", encoding="utf-8")
        vault.sync(known_at="2024-01-04")
        vault.purge(texts=["tr0ub4dor"])
        history = vault.history("n.md")
        assert [(r.kind, r.known_at) for r in history][1:] == [
            ("modified", history[1].known_at),
            ("modified", history[2].known_at),
        ]
        assert len(history) == 3
        assert vault.read("n.md", as_of="2024-01-03").content == "# N\n\nplain\n\npassword: [purged]\n"
        assert vault.read("n.md", as_of="2024-01-02").content == "# N\n\nplain\n\npassword: [purged]\n"
        assert vault.check() == []


def test_a_dictionary_holding_the_text_is_trained_again(tmp_path: Path) -> None:
    filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 20
    notes = {f"n{i:03}.md": f"# Note {i}\n\nDICTSECRET-77aa {filler}{i}\n" for i in range(120)}
    assert sum(len(t) for t in notes.values()) > MIN_SAMPLE
    root = _vault(tmp_path, notes)
    with Vault.open(tmp_path / "db", root=root) as vault:
        vault.sync(known_at="2024-01-01")
        for rel in notes:
            (root / rel).write_text(notes[rel].replace("DICTSECRET-77aa", "nothing"), encoding="utf-8")
        vault.sync(known_at="2024-01-02")
        with sqlite_file(tmp_path / "db") as con:
            held = con.execute("SELECT body FROM dictionaries").fetchall()
        assert held and b"DICTSECRET-77aa" in held[0][0]
        result = vault.purge(texts=["DICTSECRET-77aa"]).to_json()
        assert result["dictionary_retrained"] and result["revisions_changed"] == 120
        with sqlite_file(tmp_path / "db") as con:
            held = con.execute("SELECT body FROM dictionaries").fetchall()
        assert held and b"DICTSECRET-77aa" not in held[0][0]
        assert vault.read("n005.md", as_of="2024-01-01").content == notes["n005.md"].replace(
            "DICTSECRET-77aa", "[purged]"
        )
        assert vault.check() == []
    assert find_traces(tmp_path / "db", {"s": [b"DICTSECRET-77aa"]}, {}) == []


def test_cli_purge(tmp_path: Path) -> None:
    root = _vault(tmp_path, {"a.md": "# A\n\nold 12345-secret\n", STASH: f"# S\n\n{S_STASH}\n"})
    (root / ".git").mkdir()  # the vault is a git work tree: the output points at git filter-repo
    db = tmp_path / "db"
    invoke("import", str(root), "--known-at", "2024-01-01", db=db, check=True)
    (root / "a.md").write_text("# A\n\nnew\n", encoding="utf-8")
    (root / STASH).unlink()
    invoke("import", str(root), "--known-at", "2024-01-02", db=db, check=True)
    secrets = tmp_path / "secrets.txt"
    secrets.write_text("12345-secret\n", encoding="utf-8")
    done = invoke("purge", "--text-file", str(secrets), db=db, check=True)
    assert "1 revisions rewritten" in done.stdout and "git filter-repo" in done.stderr
    done = invoke("purge", "--note", STASH, "--json", db=db, check=True)
    assert json.loads(done.stdout)["revisions_removed"] == 2
    done = invoke("purge", "--note", "a.md", db=db)
    assert done.returncode == 1 and done.stderr.startswith("Error: the note file a.md is still in the vault")
    assert "(--also-current)" in done.stderr and "Traceback" not in done.stderr
    done = invoke("purge", "--note", "a.md", "--before", "2024-01-01", db=db)
    assert done.returncode == 2 and "exactly one" in done.stderr
    assert invoke("read", "a.md", "--as-of", "2024-01-01", db=db, check=True).stdout == "# A\n\nold [purged]\n"


def test_cli_text_purge_of_a_path_points_at_the_note_purge(tmp_path: Path) -> None:
    """A text that is part of a note's path is refused, and the way out named is the note purge's own flag."""
    root = _vault(tmp_path, {"hunter2-secret notes.md": "# B\n"})
    db = tmp_path / "db"
    invoke("import", str(root), db=db, check=True)
    done = invoke("purge", "--text", "hunter2-secret", "--also-current", db=db)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        "Error: that text is part of a note's path, which a text purge does not rename; "
        "remove that note with a note purge (--note)"
    )


READER = """
import sys
from vaultsync.store import Store
store = Store(sys.argv[1], readonly=True)
with store.db.atomic() as con:
    con.execute("SELECT count(*) FROM notes").fetchall()
    print("reading", flush=True)
    sys.stdin.readline()
store.close()
"""


def test_a_reader_that_held_back_the_scrub_finishes_wiping_the_file_when_it_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader (another process) mid-read through the purge keeps the purged text in the database file's old
    pages; when it closes, they are overwritten and the WAL truncated; the next write-open records the scrub."""
    secret = "zebraquokka7391"
    root = _vault(tmp_path, {f"n{i}.md": f"# N{i}\n\n{'filler words ' * 200}\n{secret}\n" for i in range(8)})
    db = tmp_path / "db"
    invoke("import", str(root), "--known-at", "2024-01-01", db=db, check=True)
    for i in range(8):
        (root / f"n{i}.md").write_text(f"# N{i}\n\nclean\n", encoding="utf-8")
    invoke("import", str(root), "--known-at", "2024-01-02", db=db, check=True)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline() == "reading\n"
        monkeypatch.setenv("VAULTSYNC_BUSY_TIMEOUT_MS", "200")  # the purge waits this long for the reader
        with Vault.open(db, name="vault") as vault:
            assert not vault.purge(texts=[secret], also_current=True).scrubbed
        assert secret.encode() in db.read_bytes()  # the file's old pages, which the reader still reads
        reader.communicate("\n", timeout=60)
    finally:
        reader.kill()
    assert reader.returncode == 0
    wal = Path(f"{db}-wal")
    assert secret.encode() not in db.read_bytes() and (not wal.exists() or wal.stat().st_size == 0)
    with sqlite_file(db) as con:
        assert con.execute("SELECT count(*) FROM purges WHERE scrubbed_at IS NULL").fetchone()[0] == 1
    invoke("import", str(root), "--known-at", "2024-01-03", db=db, check=True)  # a write-open records it
    with sqlite_file(db) as con:
        assert con.execute("SELECT count(*) FROM purges WHERE scrubbed_at IS NULL").fetchone()[0] == 0

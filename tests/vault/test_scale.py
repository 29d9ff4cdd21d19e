"""Scale without timing: memory, memory mappings and per-batch work must not grow with the vault.

Generated vaults of 500 and 5,000 tiny notes are imported in a child process (a process's peak
memory and its mappings are the point) that samples ``/proc/self/maps`` after every note written.
A one-note batch's work is counted in SQLite virtual-machine steps, which do not depend on the
machine's speed or load: it must be the same in a vault ten times larger.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from support.engines import own_store
from support.help_corpus import copy_db

from vaultsync.vault import Vault

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")

WORDS = ("atlas", "budget", "garden", "kickoff", "reading", "travel", "review")


def name(i: int) -> str:
    """A distinct title for note ``i`` made of the fixed vocabulary (its base-7 digits as words)."""
    digits = []
    while True:
        i, digit = divmod(i, 7)
        digits.append(WORDS[digit])
        if not i:
            return " ".join(digits)


def make_vault(root: Path, count: int) -> Path:
    """``count`` tiny notes in 20 folders, linking each other, with a vocabulary that does not grow."""
    for i in range(count):
        folder = root / f"Folder {WORDS[i % 7]} {WORDS[i // 7 % 3]}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name(i)}.md").write_text(
            f"# {name(i)}\n\nAbout {WORDS[i % 7]} and [[{name(i * 7 % 50)}]]. #{WORDS[i % 3]}\n", encoding="utf-8"
        )
    return root


CHILD = r"""
import json, sys
from pathlib import Path
import apsw
from vaultsync.vault import Vault

def maps():
    with open("/proc/self/maps", "rb") as f:
        return f.read().count(b"\n")

def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])  # kB

out = {"maps_before": maps(), "rss_before_kb": status("VmRSS")}
peak = [0]
def sample(done, total):
    peak[0] = max(peak[0], maps())
with Vault.open(sys.argv[1], root=sys.argv[2]) as vault:
    first = vault.sync(progress=sample)
    out["added"] = first.added
    out["maps_peak"] = peak[0]
    out["hwm_import_kb"] = status("VmHWM")
    out["sqlite_hwm_kb"] = apsw.memory_high_water() // 1024
    again = vault.sync()
    out["unchanged"] = again.unchanged
    out["again_batch"] = again.batch_id
    out["maps_after"] = maps()
print(json.dumps(out))
"""


def import_in_child(tmp_path: Path, count: int) -> dict[str, int]:
    root = make_vault(tmp_path / f"vault{count}", count)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / f"db{count}" / "v.db"), str(root)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_import_mappings_and_peak_memory_do_not_grow_with_the_number_of_files(tmp_path: Path) -> None:
    small, large = import_in_child(tmp_path, 500), import_in_child(tmp_path, 5000)
    assert (small["added"], large["added"]) == (500, 5000)
    assert (small["unchanged"], large["unchanged"]) == (500, 5000)
    assert small["again_batch"] is None and large["again_batch"] is None
    # one mapping per file held (the bug this guards against) would add 4,500 here
    assert large["maps_peak"] - small["maps_peak"] < 64, (small, large)
    assert large["maps_after"] - small["maps_after"] < 64, (small, large)
    # Outside SQLite's page cache (bounded by its cache_size), a changed note costs only its path and
    # stat until the batch ends (~0.75 kB here); a page per file (4 kB) or its bytes held would exceed this.
    rss_kb = (large["hwm_import_kb"] - large["rss_before_kb"]) - (small["hwm_import_kb"] - small["rss_before_kb"])
    sqlite_kb = large["sqlite_hwm_kb"] - small["sqlite_hwm_kb"]
    assert rss_kb - sqlite_kb < 4500 * 1.5, (small, large)
    assert large["sqlite_hwm_kb"] < 80 * 1024


@contextlib.contextmanager
def counting_vm_steps() -> Iterator[list[int]]:
    """Count in ``[0]`` the SQLite VM steps of every connection opened inside the block (``apsw.connection_hooks``:
    the vault's own, without reaching into it)."""
    steps = [0]

    def count() -> bool:
        steps[0] += 1
        return False  # never interrupt

    def hook(con: apsw.Connection) -> None:
        con.set_progress_handler(count, 1)

    apsw.connection_hooks.append(hook)
    try:
        yield steps
    finally:
        apsw.connection_hooks.remove(hook)


def vm_steps(vault: Vault, steps: list[int], paths: list[str]) -> tuple[int, int]:
    """SQLite VM steps (counted by ``counting_vm_steps``) and notes written by one ``Vault.sync(paths)``."""
    before = steps[0]
    summary = vault.sync(paths)
    return steps[0] - before, summary.changed


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, Path]]:
    """A vault of 500 notes and one of 5,000, each imported once: count -> (folder, database)."""
    made = {}
    for count in (500, 5000):
        work = tmp_path_factory.mktemp(f"scale{count}")
        root = make_vault(work / "vault", count)
        with Vault.open(work / "v.db", root=root) as vault:
            vault.sync()
        made[count] = root, work / "v.db"
    return made


@pytest.mark.slow
@pytest.mark.parametrize("edit", ["modify", "create", "delete", "folder"])
def test_a_one_note_batch_does_the_same_work_in_a_vault_ten_times_larger(
    tmp_path: Path, edit: str, imported: dict[int, tuple[Path, Path]]
) -> None:
    steps = []
    for count, (folder, db) in imported.items():
        root = shutil.copytree(folder, tmp_path / f"vault{count}")  # a private copy of each, mtimes kept
        with (
            counting_vm_steps() as counted,
            Vault.open(copy_db(db, tmp_path / f"db{count}.db"), name="vault", readonly=False) as vault,
        ):
            vault.root = root
            assert vault.sync().changed == 0
            note = root / "Folder kickoff atlas" / "kickoff.md"
            if edit == "modify":
                note.write_text("# kickoff\n\nEdited.\n", encoding="utf-8")
                paths = ["Folder kickoff atlas/kickoff.md"]
            elif edit == "create":
                (root / "Folder kickoff atlas" / "New.md").write_text("# New\n\nAbout travel.\n", encoding="utf-8")
                paths = ["Folder kickoff atlas/New.md"]
            elif edit == "delete":
                note.unlink()
                paths = ["Folder kickoff atlas/kickoff.md"]
            else:  # a small folder moved in: the batch names the folder
                (root / "Moved").mkdir()
                (root / "Moved" / "One.md").write_text("# One\n", encoding="utf-8")
                paths = ["Moved"]
            work, changed = vm_steps(vault, counted, paths)
            assert changed == 1
            steps.append(work)
    small, large = steps
    assert small > 0  # the hook reached the vault's connection
    assert large < small * 1.5 + 500, f"a one-note batch took {small} VM steps at 500 notes, {large} at 5,000"


def test_narrow_live_state_queries_agree_with_the_whole_state(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    names = ["a.md", "a-b/x.md", "a/b.md", "a/b/c.md", "a/b0.md", "a0.md", "ab/c.md", "é/ü.md", "z/a/b.md"]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"# {name}\n", encoding="utf-8")
    with Vault.open(tmp_path / "v.db", root=root) as vault:
        vault.sync()
        (root / "a/b/c.md").unlink()
        vault.sync()
    with own_store(tmp_path / "v.db") as store:  # the same database, read as a store of its own
        whole = store.live_state(vault.id)
        assert set(whole) == set(names) - {"a/b/c.md"}
        asked = ["a/b.md", "a/b/c.md", "missing.md", "é/ü.md"]
        assert store.live_state(vault.id, asked) == {p: whole[p] for p in asked if p in whole}
        assert store.live_under(vault.id, ["a"]) == ["a/b.md", "a/b0.md"]
        assert store.live_under(vault.id, ["a/b", "z"]) == ["z/a/b.md"]
        assert store.live_under(vault.id, ["é"]) == ["é/ü.md"]
        assert store.live_under(vault.id, []) == []
        states = store.file_states(vault.id)
        assert store.file_states(vault.id, asked) == {p: states[p] for p in asked if p in states}
        index = store.live_index(vault.id)
        assert set(index) == set(whole)

"""The store's contract (``vaultsync/store/contract.py``), engine by engine (``open_engine``: tests/support/engines.py).

Two kinds of check:

- conformance: each class of the SQLite engine has every member its protocol declares, with the same
  parameters (names, kinds, defaults), so what the contract documents is what the code does; the checker
  itself is shown to catch a missing method and a changed signature;
- behaviour through the contract only (batch, view, upkeep, lock, follow): nothing here reaches past the
  protocols, so a second engine runs these tests unchanged.
"""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path
from typing import Any, Protocol

import pytest
from support.changes import change

from vaultsync.errors import ConfigError, LockedError
from vaultsync.store import BatchWriter, Store, View, WriterLock, file_stamp
from vaultsync.store.contract import PROTOCOLS, Batch, Change, Engine, Follow, Lock, ReadView, Upkeep, Wakeup
from vaultsync.store.lock import Sleep

SQLITE_CLASSES: dict[type, type] = {
    Batch: BatchWriter,
    ReadView: View,
    Lock: WriterLock,
    Follow: Store,
    Upkeep: Store,
    Engine: Store,
    Wakeup: Sleep,
}


# ---------------------------------------------------------------- conformance


def _declared(protocol: type) -> dict[str, Any]:
    """The members a protocol declares (its own and its bases'), name -> function, property or annotation."""
    out: dict[str, Any] = {}
    for base in reversed(protocol.__mro__):
        if base in (object, Protocol) or not getattr(base, "_is_protocol", False):
            continue
        out.update({name: "attribute" for name in getattr(base, "__annotations__", {})})
        out.update(
            {
                name: value
                for name, value in vars(base).items()
                if not name.startswith("_") and (callable(value) or isinstance(value, property))
            }
        )
    return out


def _params(fn: Any) -> list[tuple[str, Any, bool]]:
    return [(p.name, p.kind, p.default is inspect.Parameter.empty) for p in inspect.signature(fn).parameters.values()]


def mismatches(protocol: type, cls: type) -> list[str]:
    """How ``cls`` departs from ``protocol``: missing members, methods whose parameters differ."""
    problems = []
    for name, declared in _declared(protocol).items():
        if declared == "attribute":
            if (
                name not in getattr(cls, "__annotations__", {})
                and not hasattr(cls, name)
                and name not in _init_attributes(cls)
            ):
                problems.append(f"{cls.__name__} has no attribute {name}")
            continue
        actual = getattr(cls, name, None)
        if actual is None:
            problems.append(f"{cls.__name__} has no {name}")
        elif isinstance(declared, property):
            if not isinstance(actual, property):
                problems.append(f"{cls.__name__}.{name} is not a property")
        elif _params(declared) != _params(actual):
            problems.append(
                f"{cls.__name__}.{name}{inspect.signature(actual)} is not {name}{inspect.signature(declared)}"
            )
    return problems


def _init_attributes(cls: type) -> set[str]:
    """Attributes ``__init__`` assigns on ``self`` (what a plain class declares by setting them)."""
    try:
        source = inspect.getsource(cls.__init__)
    except (OSError, TypeError):
        return set()
    return {
        line.split("self.", 1)[1].split("=", 1)[0].split(":")[0].strip()
        for line in source.splitlines()
        if line.strip().startswith("self.") and "=" in line
    }


@pytest.mark.parametrize("protocol", sorted(SQLITE_CLASSES, key=lambda p: p.__name__), ids=lambda p: p.__name__)
def test_the_sqlite_engine_implements_the_contract(protocol: type) -> None:
    assert _declared(protocol), "the protocol declares nothing (the checker is blind)"
    assert mismatches(protocol, SQLITE_CLASSES[protocol]) == []


def _pg_classes() -> dict[type, type]:
    from vaultsync.store.pg import PgStore
    from vaultsync.store.pg.follow import Wakeup as PgWakeup
    from vaultsync.store.pg.lock import PgWriterLock
    from vaultsync.store.pg.view import PgView

    return {
        Batch: BatchWriter,
        ReadView: PgView,
        Lock: PgWriterLock,
        Follow: PgStore,
        Upkeep: PgStore,
        Engine: PgStore,
        Wakeup: PgWakeup,
    }


@pytest.mark.parametrize("protocol", sorted(SQLITE_CLASSES, key=lambda p: p.__name__), ids=lambda p: p.__name__)
def test_the_postgres_engine_implements_the_contract(protocol: type) -> None:
    assert mismatches(protocol, _pg_classes()[protocol]) == []


def test_every_part_of_the_contract_is_checked() -> None:
    assert set(PROTOCOLS.values()) - set(SQLITE_CLASSES) == {PROTOCOLS["indexer"]}  # an engine's own part


def test_the_conformance_check_catches_a_departure() -> None:
    class Partial:
        def __init__(self) -> None:
            self.batch_id = None
            self.known_at = 0
            self.counts: dict[str, int] = {}

        def add_revision(self, change: Change) -> None: ...  # a parameter short

    found = mismatches(Batch, Partial)
    assert "Partial has no add_tombstone" in found and "Partial has no record_git_commit" in found
    assert any(p.startswith("Partial.add_revision(") for p in found)
    assert not any("attribute" in p for p in found)
    assert mismatches(Lock, Partial)[0] == "Partial has no attribute command"


# ---------------------------------------------------------------- behaviour, through the contract


@pytest.fixture
def engine(open_engine: Any, tmp_path: Path) -> Any:
    store = open_engine(tmp_path / "contract.db", search=True, embedder="hash")
    yield store
    store.close()


def test_a_batch_lands_whole_and_a_view_reads_it(engine: Engine, tmp_path: Path) -> None:
    vid = engine.ensure_vault("v", tmp_path)
    with engine.batch(vid, known_at=1_000, source="import") as batch:
        batch.add_revision(*change("a.md", "# A\n\nalpha beta\n", mtime_ns=5))
        batch.set_file_state("a.md", 17, 5, hashlib.sha256(b"# A\n\nalpha beta\n").hexdigest())
        batch.add_revision(*change("b.md", "---\nvalid_from: 2024-01-01\n---\n# B\n"))
    assert batch.batch_id is not None and batch.known_at == 1_000 and batch.counts["created"] == 2
    assert engine.last_batch(vid) == (1_000, "import") and engine.last_batch_id(vid) == batch.batch_id
    live = engine.live_state(vid)
    assert sorted(live) == ["a.md", "b.md"]
    assert engine.file_states(vid, ["a.md"]) == {"a.md": (17, 5, live["a.md"][1])}
    assert engine.plan_state(vid, ["a.md", "new.md"]) == ({"a.md": live["a.md"]}, {"a.md": (17, 5, live["a.md"][1])})
    assert engine.live_index(vid)["a.md"] == file_stamp(17, 5)
    with engine.view(vid, "v") as view:
        a, b = view.revision("a.md"), view.revision("b.md")
        assert a is not None and b is not None and view.content(a) == "# A\n\nalpha beta\n"
        assert [r.path for r in view.ls()] == ["a.md", "b.md"]
        assert b.valid_from == 1_704_067_200_000_000 and b.valid_to is None  # validity came with the parse
        assert [h["path"] for h in view.search("alpha", mode="keyword")["hits"]] == ["a.md"]
        assert view.locate([("a.md", a.content_hash, 1_000)]) == [a.note_id]
        assert view.revision_by_id(a.note_id) == a
    with engine.view(vid, "v", as_of=999) as before:
        assert before.ls() == []


def test_a_batch_that_raises_leaves_nothing_and_an_empty_batch_no_trace(engine: Engine, tmp_path: Path) -> None:
    vid = engine.ensure_vault("v", tmp_path)
    with pytest.raises(RuntimeError, match="stop"):
        with engine.batch(vid, known_at=10) as batch:
            batch.add_revision(*change("a.md", "# A\n"))
            raise RuntimeError("stop")
    with engine.batch(vid, known_at=20) as batch:
        pass
    assert batch.batch_id is None
    assert engine.last_batch(vid) is None and engine.live_state(vid) == {} and engine.last_batch_id(vid) == 0


def test_a_batch_before_the_last_one_is_refused(engine: Engine, tmp_path: Path) -> None:
    vid = engine.ensure_vault("v", tmp_path)
    with engine.batch(vid, known_at=100) as batch:
        batch.add_revision(*change("a.md", "# A\n"))
    with pytest.raises(ConfigError, match="earlier than the vault's last batch"):
        with engine.batch(vid, known_at=50):
            pass


def test_renames_deletions_history_and_follow(engine: Engine, open_engine: Any, tmp_path: Path) -> None:
    vid = engine.ensure_vault("v", tmp_path)
    with engine.batch(vid, known_at=100) as first:
        first.add_revision(*change("a.md", "# A\n\nsame text\n"))
        first.add_revision(*change("dir/gone.md", "# Gone\n"))
    live = engine.live_state(vid)
    assert engine.live_under(vid, ["dir"]) == ["dir/gone.md"]
    with engine.batch(vid, known_at=200, source="watch") as second:
        second.add_revision(
            *change("moved.md", "# A\n\nsame text\n", kind="renamed", prev=live["a.md"][0], renamed_from="a.md")
        )
        second.add_tombstone("a.md", live["a.md"][0], renamed_to="moved.md")
        second.add_tombstone("dir/gone.md", live["dir/gone.md"][0])
    assert second.counts == {"created": 0, "modified": 0, "renamed": 1, "deleted": 1}
    assert sorted(engine.live_state(vid)) == ["moved.md"] and engine.live_under(vid, ["dir"]) == []
    same, gone = live["a.md"][1], live["dir/gone.md"][1]
    assert engine.live_with_hashes(vid, [same, gone, "0" * 64]) == {"moved.md": engine.live_state(vid)["moved.md"]}
    with engine.view(vid, "v") as view:
        assert [(r.path, r.kind) for r in view.history("moved.md")] == [("a.md", "created"), ("moved.md", "renamed")]
        assert {r.path: r.kind for r in view.changes(view.at(100))} == {"moved.md": "renamed", "dir/gone.md": "deleted"}
    news = engine.batches_after(vid, first.batch_id)
    assert [(n.batch_id, sorted(n.paths), n.listed) for n in news] == [
        (second.batch_id, ["a.md", "dir/gone.md", "moved.md"], True)
    ]
    reader = open_engine(engine.path, readonly=True)  # another connection follows what this one commits
    try:
        before = reader.data_version()
        assert reader.data_version() == before
        with engine.batch(vid, known_at=300) as third:
            third.add_revision(*change("c.md", "# C\n"))
        assert reader.data_version() != before and reader.last_batch_id(vid) == third.batch_id
        assert [n.paths for n in reader.batches_after(vid, second.batch_id)] == [("c.md",)]
    finally:
        reader.close()


def test_the_first_big_batch_trains_compression_from_its_notes_and_keeps_every_text(
    engine: Engine, tmp_path: Path
) -> None:
    """More notes than the engine holds back to train on: every one lands, in order, and reads back exactly."""
    vid = engine.ensure_vault("v", tmp_path)
    texts = {
        f"n{i:04}.md": f"# Note {i}\n\nshared words about ferries and timetables, number {i}\n" for i in range(1100)
    }
    with engine.batch(vid, known_at=1) as batch:
        for path, text in texts.items():
            batch.add_revision(*change(path, text))
        batch.record_git_commit("f" * 40, 1)  # after the held-back notes: the batch has its id by then
    assert batch.counts["created"] == 1100 and engine.git_commits(vid) == {"f" * 40}
    with engine.view(vid, "v") as view:
        notes = view.ls()
        assert [r.path for r in notes] == sorted(texts)
        assert all(view.content(r) == texts[r.path] for r in notes)
        assert [r.note_id for r in notes] == sorted(r.note_id for r in notes)  # written in the order given


def test_one_writer_per_vault_and_its_holder_is_named(engine: Engine) -> None:
    mine, theirs = engine.writer_lock("v"), engine.writer_lock("v")
    mine.acquire("vaultsync watch (contract test)")
    try:
        assert mine.held and not theirs.try_acquire()
        assert "vaultsync watch (contract test)" in (theirs.holder() or "")
        with pytest.raises(LockedError, match="already being written"):
            theirs.acquire()
    finally:
        mine.release()
    assert theirs.try_acquire() and theirs.holder_info() is None
    theirs.release()


def test_vaults_are_apart_and_purge_forgets(engine: Engine, tmp_path: Path) -> None:
    one, two = engine.ensure_vault("one", tmp_path / "1"), engine.ensure_vault("two", tmp_path / "2")
    assert [v.name for v in engine.vaults()] == ["one", "two"] and engine.vault("two").id == two
    for vid in (one, two):
        with engine.batch(vid, known_at=10) as batch:
            batch.add_revision(*change("a.md", "# A\n\nsecret-ish words\n"))
    result = engine.purge(one, note="a.md")
    assert result.command == "note" and result.revisions_removed == 1 and engine.purge_count(one) == 1
    assert engine.live_state(one) == {} and list(engine.live_state(two)) == ["a.md"]
    with engine.view(one, "one") as view:
        assert [p.command for p in view.purges()] == ["note"] and view.check() == []


def test_an_index_behind_its_rows_is_found_and_reindex_repairs_it(engine: Engine, tmp_path: Path) -> None:
    """Both engines: ``check`` (``index_problems``) finds a search index whose mark of the last batch it indexed fell
    behind its rows, and ``reindex`` leaves an index that answers the batch."""
    vid = engine.ensure_vault("v", tmp_path)
    for n, text in enumerate(["# A\n\nfirst words\n", "# A\n\nsecond words zeppelin\n"]):
        with engine.batch(vid, known_at=1_000 * (n + 1)) as batch:
            live = engine.live_state(vid).get("a.md")
            live_id = None if live is None else live[0]
            batch.add_revision(*change("a.md", text, kind="modified" if n else "created", live=live_id, prev=live_id))
    with engine.view(vid, "v") as view:
        assert view.index_problems() == [] and view.check() == []
    with engine.db.atomic() as con:  # type: ignore[attr-defined]
        con.execute("UPDATE search_state SET last_batch = last_batch - 1 WHERE vault_id = ?", (vid,))
    with engine.view(vid, "v") as view:
        found = view.index_problems()
        assert found[0] == "the search index is 1 batch behind", found
        assert any("rows of batches after the last it marked as indexed (batch 1)" in p for p in found), found
        assert any(p.endswith("(run `vaultsync reindex`)") for p in view.check())
    engine.reindex(vid)
    with engine.view(vid, "v") as view:
        assert view.index_problems() == [] and view.check() == []

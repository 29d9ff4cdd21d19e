"""The planner alone: observations + live state → a plan, built and inspected without a database."""

from __future__ import annotations

import pytest
from support.plans import NOW, blob, live, sha

from vaultsync.disk.folder import Absent, FileProblem, Present, Unreadable
from vaultsync.errors import ParseError
from vaultsync.sync import RACY_NS, Plan


def kinds(plan: Plan) -> dict[str, str]:
    return {c.path: c.kind for c in plan.changes()}


def test_new_modified_unchanged_and_deleted() -> None:
    now = live(a="# A\n", b="# B\n", gone="# Gone\n")
    observed = {"a.md": blob("# A\n"), "b.md": blob("# B changed\n"), "c.md": blob("# C\n"), "gone.md": Absent()}
    plan = Plan(observed, now, {}, now_ns=NOW)
    changes = list(plan.changes())
    assert [(c.path, c.kind) for c in changes] == [("b.md", "modified"), ("c.md", "created")]
    b = changes[0]
    assert (b.live_id, b.prev_id, b.text, b.hash, b.size) == (2, 2, "# B changed\n", sha("# B changed\n"), 12)
    assert changes[1].live_id is None and changes[1].prev_id is None
    assert plan.deletions == ["gone.md"] and plan.renames == {}
    assert plan.unchanged == 1 and plan.refused == []


def test_a_full_scan_deletes_what_it_did_not_see_and_a_path_sync_does_not() -> None:
    now = live(a="# A\n", b="# B\n")
    assert Plan({"a.md": blob("# A\n")}, now, {}, full=True, now_ns=NOW).deletions == ["b.md"]
    assert Plan({"a.md": blob("# A\n")}, now, {}, full=False, now_ns=NOW).deletions == []


def test_same_content_under_a_new_path_is_a_rename() -> None:
    now = live(Old__Note="# Note\n\nbody\n", other="# Other\n")
    observed = {"Old/Note.md": Absent(), "New/Note.md": blob("# Note\n\nbody\n")}
    plan = Plan(observed, now, {}, now_ns=NOW)
    changes = list(plan.changes())
    assert [(c.path, c.kind, c.renamed_from, c.prev_id, c.live_id) for c in changes] == [
        ("New/Note.md", "renamed", "Old/Note.md", 1, None)
    ]
    assert plan.deletions == ["Old/Note.md"] and plan.renames == {"Old/Note.md": "New/Note.md"}


def test_two_copies_of_one_deleted_note_rename_one_and_create_the_other() -> None:
    now = live(old="same\n")
    observed = {"old.md": Absent(), "x.md": blob("same\n"), "y.md": blob("same\n")}
    plan = Plan(observed, now, {}, now_ns=NOW)
    assert kinds(plan) == {"x.md": "renamed", "y.md": "created"}
    assert plan.renames == {"old.md": "x.md"}


def test_a_modified_note_is_never_taken_for_a_rename() -> None:
    now = live(a="text\n", b="other\n")
    plan = Plan({"a.md": Absent(), "b.md": blob("text\n")}, now, {}, now_ns=NOW)
    assert kinds(plan) == {"b.md": "modified"} and plan.renames == {}


def test_size_and_mtime_skip_reading_unless_the_file_is_racy() -> None:
    now = live(a="# A\n")
    old_mtime = NOW - 10 * RACY_NS
    states = {"a.md": (4, old_mtime, sha("# A\n"))}
    unread = Present(size=4, mtime_ns=old_mtime, fs_path="/nonexistent/never-read.md")
    plan = Plan({"a.md": unread}, now, states, now_ns=NOW)
    assert plan.to_read == [] and plan.unchanged == 1 and list(plan.changes()) == []
    racy = blob("# B\n", mtime_ns=NOW - 1)  # same size, mtime matches the cache, but modified just now
    plan = Plan({"a.md": racy}, now, {"a.md": (4, NOW - 1, sha("# A\n"))}, now_ns=NOW)
    assert kinds(plan) == {"a.md": "modified"}


def test_an_unchanged_file_with_a_new_mtime_is_remembered() -> None:
    now = live(a="# A\n")
    plan = Plan({"a.md": blob("# A\n", mtime_ns=5)}, now, {"a.md": (4, 1, sha("# A\n"))}, now_ns=NOW)
    assert list(plan.changes()) == [] and plan.state_updates == [("a.md", 4, 5, sha("# A\n"))]


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"\xff\xfe bad", "invalid UTF-8 at byte 0"),
        (b"ok\x00no", "contains NUL bytes"),
    ],
)
def test_bad_bytes_are_refused_with_the_reason_and_the_old_revision_kept(data: bytes, reason: str) -> None:
    now = live(a="# A\n")
    plan = Plan({"a.md": Present(size=len(data), data=data)}, now, {}, full=True, now_ns=NOW)
    assert list(plan.changes()) == [] and plan.deletions == []
    assert len(plan.refused) == 1 and plan.refused[0].path == "a.md" and reason in plan.refused[0].reason


def test_unreadable_paths_and_unlisted_folders_delete_nothing() -> None:
    now = live(Projects__a="a\n", Projects__b="b\n", c="c\n", d="d\n")
    errors = [FileProblem("Projects", "cannot list folder: Permission denied")]
    observed = {"c.md": Unreadable("cannot read: Permission denied"), "d.md": blob("d\n")}
    plan = Plan(observed, now, {}, full=True, errors=errors, now_ns=NOW)
    # c.md was seen (unreadable), so it is not missing; the Projects notes hide behind the unlisted folder
    assert plan.deletions == []
    everything = Plan({}, now, {}, full=True, errors=[FileProblem(".", "cannot list folder")], now_ns=NOW)
    assert everything.deletions == []


def test_an_unreadable_note_is_not_deleted() -> None:
    now = live(c="c\n")
    plan = Plan(
        {"c.md": Unreadable("symlink points outside the vault (/etc/passwd)")},
        now,
        {},
        full=True,
        errors=[FileProblem("c.md", "symlink points outside the vault (/etc/passwd)")],
        now_ns=NOW,
    )
    assert plan.deletions == [] and [e.path for e in plan.refused] == ["c.md"]


def test_strict_refuses_a_plan_with_refusals_before_anything_is_written(tmp_path, open_engine) -> None:
    from vaultsync.sync import write_plan

    store = open_engine(tmp_path / "db.sqlite", search=False)
    try:
        vault_id = store.ensure_vault("v", tmp_path)
        plan = Plan({"a.md": Present(size=3, data=b"\xff\xfe!"), "b.md": blob("# B\n")}, {}, {}, now_ns=NOW)
        with pytest.raises(ParseError, match="strict.*a.md"):
            write_plan(store, vault_id, "v", plan, known_at=1, strict=True)
        assert store.last_batch(vault_id) is None and store.live_state(vault_id) == {}
        plan = Plan({"a.md": Present(size=3, data=b"\xff\xfe!"), "b.md": blob("# B\n")}, {}, {}, now_ns=NOW)
        summary = write_plan(store, vault_id, "v", plan, known_at=1)
        assert summary.added == 1 and [e.path for e in summary.errors] == ["a.md"]
        assert set(store.live_state(vault_id)) == {"b.md"}
    finally:
        store.close()


def test_changes_come_in_path_order_and_the_plan_counts_its_work() -> None:
    observed = {f"n{i:02d}.md": blob(f"note {i}\n") for i in reversed(range(12))}
    observed["gone.md"] = Absent()
    plan = Plan(observed, live(gone="x\n"), {}, now_ns=NOW)
    assert plan.size == 13
    assert [c.path for c in plan.changes()] == sorted(p for p in observed if p != "gone.md")

"""The planner alone, for a move that reaches it in pieces: the far end found by content (``twins``), and what a
watcher's flush holds back one window (``hold``)."""

from __future__ import annotations

from support.plans import NOW, blob, live

from vaultsync.disk.folder import Absent
from vaultsync.sync import Plan


def twins_of(notes: dict[str, tuple[int, str]], on_disk: set[str]):  # type: ignore[no-untyped-def]
    """The lookup ``Vault.sync`` builds: content hash -> live notes with it, and whether each file is on disk."""
    return lambda digest: [(p, rev, p in on_disk) for p, rev in notes.items() if rev[1] == digest]


def test_a_new_note_whose_twin_is_gone_is_renamed_from_it() -> None:
    everything = live(Travel__Paris="# Paris\n", Inbox="# Inbox\n")
    plan = Plan(
        {"A1/Travel/Paris.md": blob("# Paris\n")}, {}, {}, now_ns=NOW, twins=twins_of(everything, on_disk={"Inbox.md"})
    )
    changes = list(plan.changes())
    assert [(c.path, c.kind, c.renamed_from, c.prev_id) for c in changes] == [
        ("A1/Travel/Paris.md", "renamed", "Travel/Paris.md", 1)
    ]
    assert plan.deletions == ["Travel/Paris.md"] and plan.renames == {"Travel/Paris.md": "A1/Travel/Paris.md"}


def test_a_copy_of_a_note_still_there_is_held_or_created() -> None:
    everything = live(Original="# Same\n")
    observed = {"Copy.md": blob("# Same\n")}
    held = Plan(observed, {}, {}, now_ns=NOW, twins=twins_of(everything, {"Original.md"}), hold=lambda p: True)
    assert list(held.changes()) == [] and held.held == ["Copy.md"] and held.deletions == []
    created = Plan(observed, {}, {}, now_ns=NOW, twins=twins_of(everything, {"Original.md"}), hold=lambda p: False)
    assert [(c.path, c.kind) for c in created.changes()] == [("Copy.md", "created")] and created.held == []


def test_an_unpaired_deletion_holds_the_whole_batch_while_allowed() -> None:
    """What waits for its other half holds back everything with it: the rename and the edit are not recorded
    without the deletion (no such state was ever on disk)."""
    now = live(Gone="# Gone\n", Old="# Moved\n", Edited="# v1\n")
    observed = {"Gone.md": Absent(), "Old.md": Absent(), "New.md": blob("# Moved\n"), "Edited.md": blob("# v2\n")}
    asked: list[str] = []
    plan = Plan(observed, now, {}, now_ns=NOW, hold=lambda p: asked.append(p) or True)
    assert list(plan.changes()) == [] and plan.deletions == []
    assert plan.held == ["Edited.md", "Gone.md", "New.md", "Old.md"] and asked == ["Gone.md"]
    paired = Plan({"Old.md": Absent(), "New.md": blob("# Moved\n")}, now, {}, now_ns=NOW, hold=lambda p: True)
    assert [(c.path, c.kind) for c in paired.changes()] == [("New.md", "renamed")]
    assert paired.deletions == ["Old.md"] and paired.held == []
    late = Plan(observed, now, {}, now_ns=NOW, hold=lambda p: False)
    list(late.changes())
    assert late.deletions == ["Gone.md", "Old.md"] and late.held == []


def test_a_twin_already_in_the_batch_is_not_taken_twice() -> None:
    now = live(Old="# Same\n")
    everything = {**now, **live(Elsewhere="# Same\n")}
    observed = {"Old.md": Absent(), "New.md": blob("# Same\n"), "Newer.md": blob("# Same\n")}
    plan = Plan(observed, now, {}, now_ns=NOW, twins=twins_of(everything, on_disk=set()))
    changes = {c.path: (c.kind, c.renamed_from) for c in plan.changes()}
    assert changes["New.md"] == ("renamed", "Old.md")
    assert changes["Newer.md"][0] == "renamed" and changes["Newer.md"][1] != "Old.md"
    assert sorted(plan.deletions) == sorted(plan.renames) == ["Elsewhere.md", "Old.md"]


def test_a_file_being_written_holds_back_its_whole_batch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With ``settle`` (a watcher's), a file modified just now holds back its whole batch (a burst is never recorded
    in part: the other notes of a folder moved in, the far end of a move and its deletion wait with it)."""
    from vaultsync.disk.folder import observe_file

    for name, text in {"Edited.md": "# half a sa", "Moved.md": "# Moved\n", "Written.md": "# new\n"}.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    now = live(Edited="# v1\n", Old="# Moved\n")
    observed = {p: observe_file(str(tmp_path), str(tmp_path / p)) for p in ("Edited.md", "Moved.md", "Written.md")}
    just_now = max(o.mtime_ns for o in observed.values()) + 1_000_000  # type: ignore[union-attr]
    plan = Plan({**observed, "Old.md": Absent()}, now, {}, now_ns=just_now, hold=lambda p: True, settle=True)
    assert list(plan.changes()) == []
    assert plan.unsettled == ["Edited.md", "Moved.md", "Old.md", "Written.md"] and plan.deletions == []
    for calm in (  # not a watcher's, or one that let them wait long enough: recorded as read
        Plan({**observed, "Old.md": Absent()}, now, {}, now_ns=just_now, hold=lambda p: True),
        Plan({**observed, "Old.md": Absent()}, now, {}, now_ns=just_now, hold=lambda p: False, settle=True),
    ):
        assert sorted(c.path for c in calm.changes()) == ["Edited.md", "Moved.md", "Written.md"] and not calm.unsettled

"""Thinning a vault's history to the batches a retention policy keeps (``vaultsync.retention``): a purge.

Given the kept batches K (the latest batch always among them), every batch that is not kept is merged into the
next kept one: a revision born at batch b and ended at batch e (none: current) is born at ``ceil(b)`` and ends
at ``ceil(e)``, ``ceil`` being the first kept batch at or after. A kept batch k then sees exactly the
revisions it saw before (``ceil(b) <= k < ceil(e)`` if and only if ``b <= k < e``), so ``read``, ``ls`` and
``search`` as of every kept moment answer as before; a revision no kept batch saw (``ceil(b) == ceil(e)``) is
removed with its text, and as of a moment between two kept batches the store answers with the earlier one's
state (the batches in between are gone). Beyond a horizon only the state at it stays (``purge --before``).

The history that remains is the one a watcher recording only the kept moments would have written: a survivor
that followed removed revisions follows the nearest survivor before them (``modified`` on the same path,
``renamed`` from another), a deletion's tombstone names where the note went (``renamed_to``) or is dropped
when the note stayed, and a ``modified`` revision now identical to the one it follows is merged into it.

``thin_plan`` works out the changes without writing (a dry run's counts come from it); ``purge_thin`` makes
them inside the purge's transaction, on either engine (``store/purge.py`` and ``store/pg/purge.py`` call it).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..retention import Plan
from . import freed
from .search.repair import Repair
from .values import PurgeResult, RetentionPreview


@dataclass(slots=True)
class _Rev:
    id: int
    batch: int
    end: int | None
    kind: str
    prev: int | None
    path: str


@dataclass(slots=True)
class ThinPlan:
    """The changes that thin a vault's history to the kept batches."""

    removed: set[int] = field(default_factory=set)
    """Revisions (and tombstones) no kept batch needs."""
    moved: dict[int, int] = field(default_factory=dict)
    """Surviving revision → the kept batch it is born in now."""
    ends: dict[int, int] = field(default_factory=dict)
    """Surviving revision → the kept batch it ends in now."""
    relinked: dict[int, tuple[int | None, str, str | None]] = field(default_factory=dict)
    """Survivor → (the revision it follows now, its kind, renamed_from) where those changed."""
    renamed_to: dict[int, str | None] = field(default_factory=dict)
    """Surviving tombstone → where its note went now (None: a plain deletion)."""
    paths: set[str] = field(default_factory=set)
    """Paths of every revision removed or changed."""

    def touched(self) -> set[int]:
        return self.removed | set(self.moved) | set(self.ends) | set(self.relinked) | set(self.renamed_to)


def _revisions(con: Any, vault_id: int) -> dict[int, _Rev]:
    return {
        row[0]: _Rev(*row)
        for row in con.execute(
            """SELECT n.id, n.batch_id, e.batch_id, n.kind, n.prev_id, n.path FROM notes n
               LEFT JOIN note_ends e ON e.note_id = n.id WHERE n.vault_id = ? ORDER BY n.id""",
            (vault_id,),
        )
    }


def thin_plan(con: Any, vault_id: int, kept: list[int], horizon: bool) -> ThinPlan:
    """The changes that keep exactly the states of ``kept`` (sorted batch ids, the vault's latest among them);
    ``horizon``: nothing before the first kept batch is asked about any more."""
    revs = _revisions(con, vault_id)
    out = ThinPlan()
    if not kept:
        return out

    def ceil(batch: int) -> int:
        return kept[min(bisect.bisect_left(kept, batch), len(kept) - 1)]

    first = kept[0]
    for rev in revs.values():
        if rev.kind == "deleted":
            continue
        if rev.end is not None and ceil(rev.end) == ceil(rev.batch):
            out.removed.add(rev.id)
    for rev in revs.values():  # a tombstone goes with the revision it ended (or before a horizon)
        if rev.kind == "deleted" and (
            (rev.prev in out.removed) or (rev.prev is None and horizon and rev.batch <= first)
        ):
            out.removed.add(rev.id)

    def survivor(prev: int | None) -> int | None:
        while prev is not None and prev in out.removed:
            prev = revs[prev].prev
        return prev

    continued: dict[int, _Rev] = {}  # surviving revision → the survivor that follows it now
    for rev in revs.values():
        if rev.id in out.removed:
            continue
        if ceil(rev.batch) != rev.batch:
            out.moved[rev.id] = ceil(rev.batch)
        if rev.end is not None and ceil(rev.end) != rev.end:
            out.ends[rev.id] = ceil(rev.end)
        if rev.kind == "deleted":
            continue
        prev = survivor(rev.prev)
        if prev is not None and revs[prev].kind != "deleted":
            continued[prev] = rev
        if prev == rev.prev:
            continue
        before = revs[prev] if prev is not None else None
        if before is None:  # all it followed is gone: it begins the note's history (or follows the horizon)
            kind, source = (rev.kind, None) if horizon else ("created", None)
        elif before.kind == "deleted":
            kind, source = rev.kind, None
        elif before.path == rev.path:
            kind, source = "modified", None
        else:
            kind, source = "renamed", before.path
        out.relinked[rev.id] = (prev, kind, source)
    for rev in revs.values():
        if rev.kind != "deleted" or rev.id in out.removed or rev.prev is None:
            continue
        after = continued.get(rev.prev)
        if after is not None and after.path == rev.path:
            out.removed.add(rev.id)  # the note stayed: the survivor after it is a modification
        else:
            out.renamed_to[rev.id] = after.path if after is not None else None
    for tomb in [i for i in out.renamed_to if i in out.removed]:
        del out.renamed_to[tomb]
    for i in out.removed:
        out.moved.pop(i, None)
        out.ends.pop(i, None)
    out.paths = {revs[i].path for i in out.touched()}
    return out


def _ids(values: Any) -> str:
    return json.dumps(sorted(values))


def freed_bytes(con: Any, removed: set[int]) -> tuple[int, int]:
    """(texts, their stored bytes) that only the revisions ``removed`` use: what removing them frees at least."""
    row = con.execute(
        """SELECT count(*), coalesce(sum(length(t.body)), 0) FROM texts t
           WHERE t.id IN (SELECT c.text_id FROM chunks c WHERE c.note_id IN (SELECT value FROM json_each(?)))
             AND t.id NOT IN (SELECT k.text_id FROM chunks k
                              WHERE k.note_id NOT IN (SELECT value FROM json_each(?)))""",
        (_ids(removed), _ids(removed)),
    ).fetchone()
    return int(row[0]), int(row[1])


def preview(con: Any, vault_id: int, plan: Plan, sizes: freed.Sizes) -> RetentionPreview:
    """What thinning to ``plan`` would remove, read without changing anything; ``table_bytes``: the engine's
    bytes where a thinning can free some (``freed``)."""
    thinned = thin_plan(con, vault_id, plan.kept, plan.horizon is not None)
    texts, _ = freed_bytes(con, thinned.removed)
    share = freed.shares(con, thinned.removed, plan.thinned, {table for table, _, _ in sizes.parts})
    live = con.execute(
        """SELECT count(*) FROM notes n WHERE n.id IN (SELECT value FROM json_each(?)) AND n.kind != 'deleted'
           AND NOT EXISTS (SELECT 1 FROM note_ends e WHERE e.note_id = n.id)""",
        (_ids(thinned.touched() - thinned.removed),),
    ).fetchone()[0]
    size = freed.estimate(sizes, share, bool(live)) if thinned.removed or plan.thinned else 0
    revisions = con.execute("SELECT count(*) FROM notes WHERE vault_id = ?", (vault_id,)).fetchone()[0]
    return RetentionPreview(
        batches=plan.batches,
        batches_removed=plan.thinned,
        revisions=int(revisions),
        revisions_removed=len(thinned.removed),
        notes=len(thinned.paths),
        texts_freed=texts,
        bytes_freed=size,
        database_bytes=sizes.database,
        horizon=plan.horizon,
    )


def purge_thin(
    con: Any,
    vault_id: int,
    kept: list[int],
    horizon: bool,
    result: PurgeResult,
    steps: tuple[Callable[[Any, set[int]], None], Callable[[Any, Iterable[int]], int]],
    repair: Repair | None = None,
) -> None:
    """Thin the vault's history to ``kept`` inside the caller's transaction (see the module's docstring), with the
    purge's own ``steps``: removing revisions, and merging a revision into an unchanged predecessor."""
    _remove, _merge_unchanged = steps
    plan = thin_plan(con, vault_id, kept, horizon)
    touched = plan.touched()
    if not touched:
        return
    if repair is not None:
        repair.take_out(touched)
    for note_id, (prev, kind, source) in plan.relinked.items():
        con.execute(
            "UPDATE notes SET prev_id = ?, kind = ?, renamed_from = ? WHERE id = ?", (prev, kind, source, note_id)
        )
    if plan.removed:
        _remove(con, plan.removed)
    con.executemany("UPDATE notes SET batch_id = ? WHERE id = ?", [(b, i) for i, b in plan.moved.items()])
    con.executemany("UPDATE note_ends SET batch_id = ? WHERE note_id = ?", [(b, i) for i, b in plan.ends.items()])
    con.executemany("UPDATE notes SET renamed_to = ? WHERE id = ?", [(p, i) for i, p in plan.renamed_to.items()])
    merged = _merge_unchanged(con, [i for i, (_, kind, _) in plan.relinked.items() if kind == "modified"])
    if repair is not None:
        repair.put_back(touched - plan.removed)
    result.revisions_removed = len(plan.removed) + merged
    result.revisions_changed = len(touched - plan.removed) - merged
    result.notes = len(plan.paths)

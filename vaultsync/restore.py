"""Bring it back: a note or a folder as it was at a past moment, or the notes a batch changed as they
were just before it, written through the safe write path and recorded as one new batch.

History is never rewritten: a restore is a new revision whose batch says where it came from
(source "restore" or "undo", detail naming the revision or batch). Every file is written through
``vaultfs`` (no symlink followed, an existing note keeps its mode); before writing, the files are
recorded as they are on disk, and a file that changes between that and the write is recorded again
and retried, so an editor's save made meanwhile is in the history, never lost.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .disk import vaultfs
from .errors import ConfigError, NoteChanged, NoteNotFound, PathError
from .disk.digest import content_hash
from .disk.folder import MAX_FILE_BYTES
from .parsers import split_lines
from .disk.paths import nfc, note_path, writable_note_path
from .sync import BatchSummary
from .revisions import check_revision_id, short_revision
from .times import TimeLike, as_micros, format_time

if TYPE_CHECKING:
    from .store import Revision
    from .vault import Vault

WRITE_TRIES = 20
"""How many times one file is recorded and written again when another writer keeps changing it."""


@dataclass(slots=True)
class Step:
    """One file to put in a state: ``text`` at ``path`` (None: the file removed)."""

    path: str
    text: str | None
    current: str | None
    """The note's text at ``path`` now, as recorded (None: no note there)."""
    current_hash: str | None
    origin: str
    """Where the text comes from (a revision, or the state before a batch)."""
    refused: str | None = None
    """Why this file is left alone (the others go ahead)."""

    @property
    def changes(self) -> bool:
        return self.refused is None and self.text != self.current

    def diff(self) -> str:
        lines = difflib.unified_diff(split_lines(self.current or ""), split_lines(self.text or ""),
                                     f"{self.path} (now)", f"{self.path} ({self.origin})")
        return "".join(x if x.endswith("\n") else x + "\n\\ No newline at end of file\n" for x in lines)

    def to_json(self, with_diff: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "action": self.action, "from": self.origin, "refused": self.refused}
        if with_diff:
            out["diff"] = self.diff()
        return out

    @property
    def action(self) -> str:
        if self.refused is not None:
            return "refused"
        if not self.changes:
            return "unchanged"
        return "delete" if self.text is None else "create" if self.current is None else "write"


@dataclass(slots=True)
class Restored:
    """What a restore or undo did (or, dry, would do)."""

    steps: list[Step]
    dry_run: bool
    summary: BatchSummary | None = None
    detail: str = ""
    source: str = "restore"
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        s = self.summary
        return {"dry_run": self.dry_run, "source": self.source, "detail": self.detail,
                "batch_id": s.batch_id if s else None, "known_at": format_time(s.known_at) if s else None,
                "notes": [step.to_json(self.dry_run) for step in self.steps]}


# ---------------------------------------------------------------- finding what to restore


def find_revision(vault: Vault, path: str, *, as_of: TimeLike = None, revision: str | None = None) -> Revision:
    """The revision of the note at ``path`` at ``as_of`` (under the name it had then, found by its old
    or new name), or the one ``revision`` names (its id as history shows it: its content hash or a prefix)."""
    if (as_of is None) == (revision is None):
        raise ConfigError("give exactly one of a time (as_of) and a revision", argument="as_of")
    when = as_micros(as_of, "as_of")
    seen: set[str] = set()
    rel = note_path(path)
    while True:
        revs = vault.history(rel)
        if revision is not None:  # a revision id as history shows it: a prefix of its content hash
            wanted = check_revision_id(revision, "revision")
            hits = [r for r in revs if not r.deleted and (r.content_hash or "").startswith(wanted)]
            if not hits:
                raise NoteNotFound(f"note {path!r} has no revision {revision!r} (see its history)")
            return hits[-1]
        known = [r for r in revs if r.known_at <= when]  # type: ignore[operator]
        last = known[-1] if known else None
        if last is not None and last.deleted and last.renamed_to and last.renamed_to not in seen:
            seen.add(rel)
            rel = last.renamed_to  # an old name asked at a time after the rename: the note's name then
            continue
        if last is None or last.deleted:  # the note living here now may have had another name then
            later = next((r for r in revs if r.known_at > when and r.renamed_from  # type: ignore[operator]
                          and r.renamed_from not in seen), None)
            if later is not None and later.renamed_from:
                seen.add(rel)
                rel = later.renamed_from
                continue
            raise NoteNotFound(f"note {path!r} did not exist as of {format_time(when)}")
        return last


def destination(vault: Vault, rev: Revision) -> tuple[str, bool]:
    """Where the note of ``rev`` lives now (following its renames), and whether it still exists;
    a deleted note comes back at the path ``rev`` had."""
    path, since, seen = rev.path, rev.batch_id, {rev.path}
    while True:
        later = [r for r in vault.history(path) if r.path == path and r.batch_id > since]
        ended = next((r for r in later if r.deleted), None)
        if ended is None:
            return path, True
        if not ended.renamed_to or ended.renamed_to in seen:
            return rev.path, False
        path, since = ended.renamed_to, ended.batch_id
        seen.add(path)


def _now(vault: Vault, path: str) -> tuple[str | None, str | None]:
    try:
        note = vault.read(path)
    except NoteNotFound:
        return None, None
    return note.content, note.revision.content_hash


def plan_note(vault: Vault, path: str, *, as_of: TimeLike = None, revision: str | None = None,
              to: str | None = None) -> Step:
    """The step that puts the note back as ``find_revision`` finds it, at ``destination`` (or ``to``)."""
    rev = find_revision(vault, path, as_of=as_of, revision=revision)
    origin = f"revision {short_revision(rev.content_hash)} of {rev.path}, known at {format_time(rev.known_at)}"
    target, alive = (writable_note_path(to), True) if to is not None else destination(vault, rev)
    text = vault.revision_text(rev)
    current, digest = _now(vault, target)
    step = Step(target, text, current, digest, origin)
    if not alive and current is not None and current != text:  # (the same text: restored already)
        step.refused = f"{target} now holds another note; restore this one to another path"
    return step


def plan_folder(vault: Vault, prefix: str, *, as_of: TimeLike, delete_newer: bool = False) -> list[Step]:
    """Every note under ``prefix`` as it was at ``as_of``; the notes created there since are left alone
    unless ``delete_newer`` (only files whose bytes the store holds are deleted)."""
    when = as_micros(as_of, "as_of")
    if when is None:
        raise ConfigError("a folder is restored as of a time", argument="as_of")
    folder = nfc(prefix).strip("/")
    under = folder + "/" if folder else ""
    then = {r.path: r for r in vault.ls(as_of=when, prefix=under)}
    steps = []
    texts = {p: vault.revision_text(r) for p, r in then.items()}
    for path, rev in sorted(then.items()):
        current, digest = _now(vault, path)
        steps.append(Step(path, texts[path], current, digest,
                          f"revision {short_revision(rev.content_hash)}, known at {format_time(rev.known_at)}"))
    for rev in vault.ls(prefix=under):
        if rev.path in then:
            continue
        current, digest = _now(vault, rev.path)
        step = Step(rev.path, None, current, digest, f"absent as of {format_time(when)}")
        if not delete_newer:
            step.refused = "created since; left alone (delete_newer removes it)"
        steps.append(step)
    return steps


def plan_undo(vault: Vault, batch_id: int, *, force: bool = False) -> list[Step]:
    """Every note the batch changed, back to its state just before the batch; a note changed again
    since is refused with the reason (unless ``force``)."""
    info = vault.batch_info(batch_id)
    if info is None:
        raise NoteNotFound(f"vault '{vault.name}' has no batch {batch_id}")
    steps = []
    for rev in vault.written_by(batch_id):
        before = vault.revision_before(rev.path, batch_id)
        current, digest = _now(vault, rev.path)
        text = None
        if before is not None and not before.deleted:
            text = vault.revision_text(before)
        step = Step(rev.path, text, current, digest, f"state before batch {batch_id}")
        if digest != rev.content_hash and not force:
            step.refused = (f"changed since batch {batch_id} (now {digest[:12] if digest else 'absent'}, "
                            f"the batch left {rev.content_hash[:12] if rev.content_hash else 'it absent'}); "
                            "force overwrites it")
        steps.append(step)
    return steps


# ---------------------------------------------------------------- writing it back


def apply(vault: Vault, steps: list[Step], *, source: str, detail: str, dry_run: bool = False) -> Restored:
    """Write every step that changes something and record them as one batch (``source``, ``detail``)."""
    done = Restored(steps, dry_run, detail=detail, source=source)
    live = [s for s in steps if s.refused is None]
    if dry_run or not live:
        return done
    root = str(vault.root)
    with vault.writing(f"vaultsync {source}"):
        vault.sync([s.path for s in live])  # what is on disk now first: a save not yet recorded is kept
        for step in live:
            step.current, step.current_hash = _now(vault, step.path)
        todo = [s for s in live if s.changes]
        paths = [s.path for s in todo]
        if not todo:
            return done
        for step in todo:
            for _ in range(WRITE_TRIES):
                if _write(root, step.path, step.text, _now(vault, step.path)[1]):
                    break
                vault.sync([step.path])  # another writer got in: record it, then try again
            else:
                raise PathError(f"{step.path} kept changing ({WRITE_TRIES} tries); nothing more was written")
        done.summary = vault.sync(paths, source=source, detail=detail)
    return done


def _write(root: str, rel: str, text: str | None, expected: str | None) -> bool:
    """Put ``text`` at ``rel`` (None: remove it) if the file still holds the recorded ``expected``
    hash; False when it does not (nothing written)."""
    try:
        vaultfs.stat_note(root, rel)  # NotANote (a symlink, a folder...): refused with the reason
        exists = True
    except (FileNotFoundError, NotADirectoryError):
        exists = False
    if (expected is None) != (not exists):
        return False
    if text is None:
        return _unlink(root, rel, expected)
    data = text.encode("utf-8")
    try:
        if exists:
            def change(old: bytes) -> bytes:
                if content_hash(old) != expected:
                    raise NoteChanged(rel)
                return data

            vaultfs.edit(root, rel, MAX_FILE_BYTES, change)
        else:
            vaultfs.create(root, rel, data)
    except (NoteChanged, FileExistsError, FileNotFoundError):
        return False
    return True


def _unlink(root: str, rel: str, expected: str | None) -> bool:
    *parts, last = rel.split("/")
    try:
        with vaultfs.folder(root, parts) as where:
            data, _ = vaultfs.read_note(root, rel, MAX_FILE_BYTES)
            if content_hash(data) != expected:
                return False
            os.unlink(where.at(vaultfs.disk_name(where, last)), dir_fd=where.fd)
    except FileNotFoundError:
        return False
    return True

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

from .. import write_caller
from ..disk import vaultfs
from ..disk.attachments import digest, file_pieces, is_attachment, max_attachment_bytes
from ..disk.digest import content_hash
from ..disk.folder import MAX_FILE_BYTES
from ..disk.paths import nfc, note_candidates, note_path, writable_note_path
from ..errors import ConfigError, NoteChanged, NoteNotFound, PathError
from ..parsers import split_lines
from ..revisions import looks_like_revision, revision_id
from ..store.view import no_history
from ..sync import BatchSummary
from ..times import TimeLike, as_micros, format_time

if TYPE_CHECKING:
    from ..store import Revision
    from .api import Vault

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
    """Why this file cannot be put in that state (the others go ahead; the command fails)."""
    kept: bool = False
    """Left alone on purpose (a note created since, or moved in since): ``note`` says why."""
    note: str | None = None
    """What else the plan should say about this file (a copy of a note living elsewhere, a note replaced)."""
    moved: bool = False
    """One end of a rename undone: its text moves as it is, so it has no diff to show."""

    @property
    def changes(self) -> bool:
        return self.refused is None and not self.kept and self.text != self.current

    def diff(self) -> str:
        if self.moved:
            return ""
        if is_attachment(self.path):  # bytes, not lines
            return f"Binary files {self.path} (now) and {self.path} ({self.origin}) differ\n"
        lines = difflib.unified_diff(
            split_lines(self.current or ""),
            split_lines(self.text or ""),
            f"{self.path} (now)",
            f"{self.path} ({self.origin})",
        )
        return "".join(x if x.endswith("\n") else x + "\n\\ No newline at end of file\n" for x in lines)

    def to_json(self, with_diff: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "action": self.action,
            "from": self.origin,
            "refused": self.refused,
            "note": self.note,
        }
        if with_diff:
            out["diff"] = self.diff()
        return out

    @property
    def action(self) -> str:
        if self.refused is not None:
            return "refused"
        if self.kept:
            return "keep"
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
        return {
            "dry_run": self.dry_run,
            "source": self.source,
            "detail": self.detail,
            "batch_id": s.batch_id if s else None,
            "known_at": format_time(s.known_at) if s else None,
            "notes": [step.to_json(self.dry_run) for step in self.steps],
        }


# ---------------------------------------------------------------- finding what to restore


def find_revision(vault: Vault, path: str, *, as_of: TimeLike = None, revision: str | None = None) -> Revision:
    """The revision of the note at ``path`` at ``as_of`` (under the name it had then, found by its old
    or new name), or the one ``revision`` names (its id as history shows it: its content hash or a prefix)."""
    if (as_of is None) == (revision is None):
        raise ConfigError("give exactly one of a time and a revision", argument="as_of")
    if revision is not None or looks_like_revision(as_of):  # as history shows it: r12, or its content's digits
        return vault.revision(path, str(revision or as_of), "revision" if revision is not None else "as_of")
    when = as_micros(as_of, "as_of")
    assert when is not None  # as_of was given: revision was not
    seen: set[str] = set()
    rel = note_path(path)
    while True:
        revs = vault.history(rel)
        known = [r for r in revs if r.known_at <= when]
        last = known[-1] if known else None
        if last is not None and last.deleted and last.renamed_to and last.renamed_to not in seen:
            seen.add(rel)
            rel = last.renamed_to  # an old name asked at a time after the rename: the note's name then
            continue
        if last is None or last.deleted:  # the note living here now may have had another name then
            later = next((r for r in revs if r.known_at > when and r.renamed_from and r.renamed_from not in seen), None)
            if later is not None and later.renamed_from:
                seen.add(rel)
                rel = later.renamed_from
                continue
            why = f": {no_history(vault.name, format_time(vault.first_known_at))}" if vault.before_history(when) else ""
            raise NoteNotFound(f"note {path!r} did not exist as of {format_time(when)}{why}", argument="as_of")
        return last


def name_at(vault: Vault, path: str, when: int) -> str | None:
    """The path the note living at ``path`` now had at ``when`` (following its renames back), or None when
    it did not exist anywhere in the vault then."""
    name = path
    for rev in reversed(vault.history(path)):
        if rev.path != name:
            continue  # the other end of a rename, or an older note of another name
        if rev.known_at <= when:
            return None if rev.deleted else name
        if rev.kind == "renamed" and rev.renamed_from:
            name = rev.renamed_from
        elif rev.kind == "created" or rev.deleted:
            return None  # born after ``when`` (a tombstone here ends an older note of this name)
    return None


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
    if is_attachment(path):
        return _text(vault, note.revision), note.revision.content_hash
    return note.content, note.revision.content_hash


def _text(vault: Vault, rev: Revision) -> str:
    """A revision's content as a step carries it: a note's text; an attachment's bytes, each byte that is not UTF-8
    as a lone surrogate (``surrogateescape``: ``_write`` gives back the exact bytes)."""
    if not is_attachment(rev.path):
        return vault.revision_text(rev)
    pieces: list[bytes] = []
    vault.revision_bytes(rev, pieces.append)
    return b"".join(pieces).decode("utf-8", "surrogateescape")


def plan_note(
    vault: Vault,
    path: str,
    *,
    as_of: TimeLike = None,
    revision: str | None = None,
    to: str | None = None,
    follow: bool = False,
) -> Step:
    """The step that puts the note back as ``find_revision`` finds it.

    A note that lived at ``path`` then is written at ``path``: it ends up holding exactly what
    ``read(path, as_of)`` gives, whatever note lives there now (whose text stays in the history). If
    that note lives elsewhere now, the step says so (a copy); ``follow`` writes it where it lives
    instead. A note found under another name then (``path`` is its name now, or was renamed away
    before ``as_of``) is written where it lives now; ``to`` names another path.
    """
    rev = find_revision(vault, path, as_of=as_of, revision=revision)
    origin = f"revision {revision_id(rev)} of {rev.path}, known at {format_time(rev.known_at)}"
    lives, alive = destination(vault, rev)
    if to is not None:
        target = writable_note_path(to, attachment=is_attachment(rev.path))
    elif rev.path in note_candidates(note_path(path)) and not follow:
        target = rev.path
    else:
        target = lives
    text = _text(vault, rev)
    current, digest = _now(vault, target)
    step = Step(target, text, current, digest, origin)
    step.note = _placement(target, lives, alive, current, text)
    return step


def _placement(target: str, lives: str, alive: bool, current: str | None, text: str) -> str | None:
    """What the plan says about writing a note's past text at ``target`` when it lives at ``lives`` now."""
    notes = []
    if alive and lives != target:
        notes.append(f"a copy: this note lives at {lives} now (follow restores it there)")
    if current is not None and current != text and (not alive or lives != target):
        notes.append(f"replaces the note at {target} now (its text stays in the history)")
    return "; ".join(notes) or None


def plan_folder(
    vault: Vault,
    prefix: str,
    *,
    as_of: TimeLike,
    delete_newer: bool = False,
    follow: bool = False,
    to: str | None = None,
) -> list[Step]:
    """Every note under ``prefix`` as it was at ``as_of``, at the path it had then (a note moved since is
    written there as a copy, which the step says; ``follow`` writes it where it lives now). Notes
    created there since are kept unless ``delete_newer`` (only files whose bytes the store holds are
    deleted); a note that existed elsewhere at ``as_of`` and moved in since is always kept. ``to`` names
    another folder: each note is written under it at the same relative path, and ``prefix`` is left alone."""
    when = as_micros(as_of, "as_of")
    if when is None:
        raise ConfigError("a folder is restored as of a time", argument="as_of")
    folder = nfc(prefix).strip("/")
    under = folder + "/" if folder else ""
    if to is not None and nfc(to).strip("/") != folder:
        return _plan_folder_to(vault, under, when, to, delete_newer=delete_newer, follow=follow)
    then = {r.path: r for r in vault.ls(as_of=when, prefix=under)}
    steps = []
    texts = {p: _text(vault, r) for p, r in then.items()}
    targets = set()
    for path, rev in sorted(then.items()):
        lives, alive = destination(vault, rev)
        target = lives if follow and alive else path
        targets.add(target)
        current, digest = _now(vault, target)
        origin = f"revision {revision_id(rev)}, known at {format_time(rev.known_at)}"
        step = Step(target, texts[path], current, digest, origin)
        step.note = _placement(target, lives, alive, current, texts[path])
        steps.append(step)
    for rev in vault.ls(prefix=under):
        if rev.path in then or rev.path in targets:
            continue
        current, digest = _now(vault, rev.path)
        step = Step(rev.path, None, current, digest, f"absent as of {format_time(when)}")
        was = name_at(vault, rev.path, when)
        if was is not None:
            step.origin = f"{was} as of {format_time(when)}"
            step.kept, step.note = True, f"moved here from {was} since; kept"
        elif not delete_newer:
            step.kept, step.note = True, "created since; kept (delete_newer removes it)"
        steps.append(step)
    return steps


def _plan_folder_to(vault: Vault, under: str, when: int, to: str, *, delete_newer: bool, follow: bool) -> list[Step]:
    """``plan_folder`` into another folder ``to``: each note under ``under`` at ``when`` written at the same
    path relative to ``to`` (a note there now is replaced, its text staying in the history)."""
    if delete_newer or follow:
        flag = "delete_newer" if delete_newer else "follow"
        raise ConfigError(f"{flag} applies to the folder itself: restoring into another folder (to) leaves it alone")
    dest = nfc(to).strip("/")
    if not dest:
        raise ConfigError("to names the folder to restore into: give a folder path such as Archive/", argument="to")
    steps = []
    for rev in vault.ls(as_of=when, prefix=under):
        target = writable_note_path(f"{dest}/{rev.path[len(under) :]}", attachment=is_attachment(rev.path))
        text = _text(vault, rev)
        current, digest = _now(vault, target)
        origin = f"{rev.path} at revision {revision_id(rev)}, known at {format_time(rev.known_at)}"
        step = Step(target, text, current, digest, origin)
        if current is not None and current != text:
            step.note = f"replaces the note at {target} now (its text stays in the history)"
        steps.append(step)
    if not steps:
        raise NoteNotFound(f"no note was under {under or 'the vault'} as of {format_time(when)}", argument="as_of")
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
            text = _text(vault, before)
        step = Step(rev.path, text, current, digest, f"state before batch {batch_id}")
        if digest != rev.content_hash and not force:
            later = [r for r in vault.history(rev.path) if r.path == rev.path and r.batch_id > batch_id]
            since = "absent now" if not digest else f"now at {revision_id(later[-1])}" if later else "its file differs"
            left = f"at {revision_id(rev)}" if rev.content_hash else "absent"
            step.refused = f"changed since batch {batch_id}: {since}, the batch left it {left}; force overwrites it"
        steps.append(step)
    _pair_renames(vault, batch_id, steps)
    return steps


def _pair_renames(vault: Vault, batch_id: int, steps: list[Step]) -> None:
    """Undoing a rename is renaming back: say so on both steps (one batch records them as a rename)."""
    by_path = {s.path: s for s in steps}
    for rev in vault.written_by(batch_id):
        if rev.kind == "renamed" and rev.renamed_from:
            back, away = by_path.get(rev.renamed_from), by_path.get(rev.path)
            if back is None or away is None:
                continue
            if away.refused is not None and back.refused is None:  # half a rename undone would leave a copy
                back.refused = f"{rev.path} changed since batch {batch_id}: renaming it back would leave a copy"
            elif back.text is not None and back.text == away.current:
                back.note, away.note = f"renamed back from {rev.path}", f"renamed back to {rev.renamed_from}"
                back.moved = away.moved = True


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
        carried = (
            write_caller.carried()
        )  # another process's request: what is about to be written, in case this one dies
        if carried is not None and carried.note_steps is not None:
            carried.note_steps(todo)
        for step in todo:
            for _ in range(WRITE_TRIES):
                if _write(root, step.path, step.text, _now(vault, step.path)[1]):
                    break
                vault.sync([step.path])  # another writer got in: record it, then try again
            else:
                raise PathError(f"{step.path} kept changing ({WRITE_TRIES} tries); nothing more was written")
        done.summary = vault.sync(paths, source=source, detail=detail)
        _remove_emptied(root, [s.path for s in todo if s.text is None])
    return done


def _remove_emptied(root: str, deleted: list[str]) -> None:
    """The folders the deleted notes leave empty (an undone folder rename's new folder) are removed too, walking
    up while they are empty; a folder holding anything else stays (``vaultfs.remove_empty_folder``)."""
    folders = sorted({rel.rpartition("/")[0] for rel in deleted if "/" in rel}, key=lambda f: -f.count("/"))
    for rel in folders:
        while rel and vaultfs.remove_empty_folder(root, rel):
            rel = rel.rpartition("/")[0]


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
    data = text.encode("utf-8", "surrogateescape")  # an attachment's exact bytes (``_text``); a note's UTF-8
    try:
        if exists:

            def change(old: bytes) -> bytes:
                if content_hash(old) != expected:
                    raise NoteChanged(rel)
                return data

            vaultfs.edit(root, rel, _limit(rel), change)
        else:
            vaultfs.create(root, rel, data)
    except (NoteChanged, FileExistsError, FileNotFoundError):
        return False
    return True


def _unlink(root: str, rel: str, expected: str | None) -> bool:
    *parts, last = rel.split("/")
    try:
        with vaultfs.folder(root, parts) as where:
            if is_attachment(rel):
                found = digest(file_pieces(root, rel))[0]
            else:
                found = content_hash(vaultfs.read_note(root, rel, MAX_FILE_BYTES)[0])
            if found != expected:
                return False
            os.unlink(where.at(vaultfs.disk_name(where, last)), dir_fd=where.fd)
    except FileNotFoundError:
        return False
    return True


def _limit(rel: str) -> int:
    """How much of the file at ``rel`` a restore reads to check it still holds what was recorded."""
    return max(MAX_FILE_BYTES, max_attachment_bytes()) if is_attachment(rel) else MAX_FILE_BYTES

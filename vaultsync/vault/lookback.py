"""Looking back: the notes that were deleted, a past state of the vault as a folder, and who-changed-this-line.

Three read-only answers over a ``Vault``'s history (functions taking the vault, as ``restore`` does), each exact
as of its moment:

- ``deleted``: notes deleted in a window and still absent at its end, each with its last revision and the
  ``restore`` command that brings it back. A rename is not a deletion (the note lives on under its new name);
  a note deleted and then created again at its path (before the window's end) is not listed.
- ``checkout``: every note as of a moment written byte for byte into an empty folder outside the vault, through
  the safe write path (``disk.vaultfs``: no symlink followed, files made as a new note is made).
- ``blame``: each line of a note as of a moment with the revision that last changed it, following renames:
  revision to revision, ``difflib`` matches the lines, and a line keeps its origin while it is unchanged.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..disk import vaultfs
from ..errors import ConfigError, NoteNotFound, StoreError
from ..parsers import split_lines
from ..results import DeletedNote
from ..revisions import resolve_cutoff, revision_id
from ..times import TimeLike, as_micros, format_time

if TYPE_CHECKING:
    from ..store import Revision
    from .api import Vault


# ---------------------------------------------------------------- deleted


@dataclass(slots=True)
class Deleted:
    """A note deleted in a window and still absent at its end."""

    path: str
    deleted_at: int
    """When the store learned of the deletion (microseconds)."""
    deletion: Revision
    """The deletion itself (its tombstone)."""
    last: Revision | None
    """The note's last revision before the deletion (None when the store never held it: purged)."""

    @property
    def restore_command(self) -> str:
        """The command that writes the note back as it was just before its deletion."""
        last = self.last
        if last is not None and last.known_at >= self.deleted_at:  # recorded at one time (a lifted git commit)
            return f"vaultsync restore {_quoted(self.path)} --revision {revision_id(last)}"
        return f"vaultsync restore {_quoted(self.path)} --as-of {format_time(self.deleted_at - 1)}"

    def to_json(self) -> dict[str, Any]:
        last = self.last
        return DeletedNote(
            path=self.path,
            deleted_at=format_time(self.deleted_at),
            batch=self.deletion.batch_id,
            size=None if last is None else last.size,
            last_revision=None if last is None else revision_id(last),
            last_known_at=None if last is None else format_time(last.known_at),
            content_hash=None if last is None else last.content_hash,
            restore=self.restore_command,
        ).to_json()


def _quoted(path: str) -> str:
    """``path`` as a shell word (quoted when it holds anything but plain characters)."""
    plain = all(c.isalnum() or c in "/._-" for c in path)
    return path if plain else "'" + path.replace("'", "'\"'\"'") + "'"


def deleted(vault: Vault, since: TimeLike = None, until: TimeLike = None) -> list[Deleted]:
    """The notes deleted after ``since`` up to and including ``until`` (each open when None) that are still
    absent at ``until``, oldest deletion first; a note deleted twice in the window is listed once, at its last
    deletion. The rename tombstone at a note's old name is no deletion."""
    end = resolve_cutoff(vault, until).as_of if until is not None else vault.last_known_at
    start = as_micros(since, "since")
    if end is None or (until is None and start is not None and start >= end):
        return []  # an empty vault, or a window that starts after everything known: nothing deleted in it
    living = {path for path, _, _ in vault.listing(until if until is not None else end)}
    last_deletion: dict[str, Revision] = {}
    for rev in vault.changes(start if start is not None else -1, end):
        if rev.deleted and not rev.renamed_to and rev.path not in living:
            last_deletion[rev.path] = rev
    found = []
    for path, tomb in last_deletion.items():
        found.append(Deleted(path, tomb.known_at, tomb, vault.revision_before(path, tomb.batch_id)))
    return sorted(found, key=lambda d: (d.deleted_at, d.path))


# ---------------------------------------------------------------- checkout


@dataclass(slots=True)
class CheckedOut:
    """What ``checkout`` wrote."""

    folder: str
    as_of: int
    """The moment written (microseconds)."""
    notes: int
    """Files written: notes and attachments."""
    bytes: int
    left_out: list[str] = field(default_factory=list)
    """Attachments recorded by hash and size only (over the size limit then): not written."""

    def to_json(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "as_of": format_time(self.as_of),
            "notes": self.notes,
            "bytes": self.bytes,
            "left_out": self.left_out,
        }


def _empty_folder(vault: Vault, to: str | os.PathLike[str]) -> Path:
    """``to`` made ready to receive a checkout: an empty folder (made when missing) that is neither the vault
    nor inside it; ConfigError in one line otherwise."""
    target = Path(to).expanduser()
    if target.is_symlink():
        raise ConfigError(f"{target} is a symlink: give a real folder", argument="to")
    where = target.resolve()
    root = Path(vault.root).resolve()
    if where == root or where.is_relative_to(root):
        raise ConfigError(f"{target} is inside the vault {root}: give a folder outside it", argument="to")
    if where.exists():
        if not where.is_dir():
            raise ConfigError(f"{target} is not a folder", argument="to")
        if any(where.iterdir()):
            raise ConfigError(f"{target} is not empty: give a new or empty folder", argument="to")
    else:
        where.mkdir(parents=True)
    return where


def checkout(vault: Vault, to: str | os.PathLike[str], as_of: TimeLike = None) -> CheckedOut:
    """Write every note and attachment that existed as of ``as_of`` (default now; a vault revision id ``r12`` too)
    into the empty folder ``to``, each at its path then, byte for byte, as new files (``vaultfs.create``: folders made
    without following a symlink, the mode a new note gets). An attachment whose bytes were not kept is left out."""
    cut = resolve_cutoff(vault, as_of)
    moment = cut.as_of if cut.as_of is not None else vault.last_known_at
    if moment is None:
        raise NoteNotFound(f"vault '{vault.name}' has no history yet: nothing to check out")
    if vault.before_history(as_of):
        raise NoteNotFound(
            f"vault '{vault.name}' has no history as of {format_time(moment)}: "
            f"its first batch is at {format_time(vault.first_known_at)}",
            argument="as_of",
        )
    folder = _empty_folder(vault, to)
    notes = written = 0
    left_out = []
    for rev in vault.ls(as_of=as_of if cut.batch is not None else moment):
        pieces: list[bytes] = []
        try:
            vault.revision_bytes(rev, pieces.append)
        except StoreError:  # recorded by hash and size only
            left_out.append(rev.path)
            continue
        data = b"".join(pieces)
        vaultfs.create(folder, rev.path, data)
        notes, written = notes + 1, written + len(data)
    return CheckedOut(str(folder), moment, notes, written, left_out)


# ---------------------------------------------------------------- blame


@dataclass(slots=True)
class BlameLine:
    """One line of a note, with the revision that last changed it."""

    number: int
    """1-based."""
    text: str
    """The line without its ending."""
    origin: Revision

    def to_json(self) -> dict[str, Any]:
        o = self.origin
        return {
            "line": self.number,
            "text": self.text,
            "id": revision_id(o),
            "known_at": format_time(o.known_at),
            "path": o.path,
            "content_hash": o.content_hash,
        }


def lineage(vault: Vault, rev: Revision) -> list[Revision]:
    """The revisions that led to ``rev``, oldest first, following its renames back to its creation (another note
    that had one of its names before, or after, is no part of it; rename tombstones are left out)."""
    chain: list[Revision] = []
    name = rev.path
    for r in reversed(vault.history(rev.path)):
        if r.batch_id > rev.batch_id or r.path != name or r.deleted:
            continue  # later, another name's revision, or the tombstone a rename left at the old name
        chain.append(r)
        if r.kind == "renamed" and r.renamed_from:
            name = r.renamed_from
        elif r.kind == "created":
            break
    return chain[::-1]


def matched(old: list[str], new: list[str]) -> list[int | None]:
    """For each line of ``new``, the line of ``old`` it is unchanged from (None: new or changed), by ``difflib``;
    a block of new lines that could as well start one line later (its first line equals the line after it) is
    slid down as far as it goes, as git's diff does, so that a paragraph added between blank lines owns the
    blank line after it, not the one before."""
    match: list[int | None] = [None] * len(new)
    for tag, i1, i2, j1, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            match[j1 : j1 + (i2 - i1)] = range(i1, i2)
    j = 0
    while j < len(new):
        if match[j] is not None:
            j += 1
            continue
        end = j
        while end < len(new) and match[end] is None:
            end += 1
        while end < len(new) and match[end] is not None and new[j] == new[end]:
            match[j], match[end] = match[end], None
            j, end = j + 1, end + 1
            while end < len(new) and match[end] is None:  # slid into the next block of new lines: one block now
                end += 1
        j = end
    return match


def blame(vault: Vault, path: str, as_of: TimeLike = None) -> list[BlameLine]:
    """Each line of the note as of ``as_of`` (default now; a revision id of its history too) with the revision
    that last changed it: walking its revisions oldest first, a line matched unchanged (``matched``) keeps its
    origin, every other line takes the revision that brought it."""
    from .restore import find_revision

    rev = find_revision(vault, path, as_of=as_of) if as_of is not None else vault.read(path).revision
    lines: list[str] = []
    origins: list[Revision] = []
    for r in lineage(vault, rev):
        new = split_lines(vault.revision_text(r))
        origins = [r if k is None else origins[k] for k in matched(lines, new)]
        lines = new
    return [BlameLine(n, line.rstrip("\r\n"), o) for n, (line, o) in enumerate(zip(lines, origins), start=1)]

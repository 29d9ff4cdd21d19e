"""Finding a note in a view of the vault as of some time: under the name it had then, or the reason it is not there.

``Vault.read``, ``Vault.links`` and ``Vault.diff`` open a ``View`` and call these. ``history`` is the vault's own
``Vault.history`` (every revision of a note, following renames), which finds a note renamed since under its name
then; ``vault_name`` only goes into the messages.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from ..disk.attachments import is_attachment
from ..disk.paths import note_candidates, note_path
from ..errors import NoteDeleted, NoteNotFound
from ..parsers import split_lines
from ..parsers.attachment import TEXT_SUFFIXES
from ..revisions import lived_then, revision_id, revisions_known
from ..store import Revision, View
from ..store.view import no_history
from ..times import format_time

History = Callable[[str], list[Revision]]
"""A note path → every revision of the note, oldest first (``Vault.history``)."""


def lookup(view: View, path: str) -> Revision | None:
    """The revision (or tombstone) ``view`` has at ``path``, or at the first of its candidate spellings it has."""
    for rel in note_candidates(note_path(path)):
        rev = view.revision(rel)
        if rev is not None:
            return rev
    return None


def existing(view: View, path: str, vault_name: str, history: History) -> Revision:
    """The live revision of ``path`` in ``view``, or NoteNotFound saying when (and any rename: where the note
    went, or the name a note later at ``path`` had then)."""
    rev = lookup(view, path)
    if rev is None or rev.deleted:
        at = f" as of {format_time(view.as_of)}" if view.as_of is not None else ""
        extra = f" (it was renamed to {rev.renamed_to})" if rev is not None and rev.renamed_to else ""
        then = None if extra else lived(view, lambda: history(path))
        if then is not None:  # renamed here since: its name then
            extra = f" (the note later at {path} was {then.path} then)"
        if view.before_history and view.as_of is not None:
            why = no_history(vault_name, format_time(view.first_known_at()))
            raise NoteNotFound(f"note {path!r} did not exist{at}: {why}", argument="as_of")  # the time is wrong
        if rev is not None and not extra:  # a tombstone: when, and the last moment it could be read
            raise NoteDeleted(
                f"note {path!r} was deleted at {format_time(rev.known_at)} in vault '{vault_name}'; "
                f"read it as of {format_time(rev.known_at - 1)} to see it as it was before"
            )
        raise NoteNotFound(f"note {path!r} did not exist{at} in vault '{vault_name}'{extra}")
    return rev


def lived(view: View, lineage: Callable[[], list[Revision]]) -> Revision | None:
    """The note as it was at ``view``'s cutoff, under its name then (``lived_then``), from its ``lineage`` (every
    revision of it, following renames; NoteNotFound there: None)."""
    try:
        return lived_then(lineage(), view.batch)
    except NoteNotFound:
        return None


def applying(view: View, path: str, vault_name: str, history: History) -> Revision:
    """The revision of ``path`` that applies in ``view`` (at its ``valid_at``), or NoteNotFound saying why."""
    rev = view.applies(existing(view, path, vault_name, history))
    if rev is None:
        at = f" as of {format_time(view.as_of)}" if view.as_of is not None else ""
        raise NoteNotFound(
            f"no revision of note {path!r} known{at} in vault '{vault_name}' is valid at "
            f"{format_time(view.valid_at)} (see its history)"
        )
    return rev


def diff_sides(
    before: View,
    end: int | None,
    path: str,
    pins: list[Revision | str | None],
    lineage: list[Revision],
    vault_name: str,
) -> tuple[list[str], list[str], list[Revision | None]]:
    """The texts, labels and revisions (None: absent) of the two ends of ``Vault.diff``: ``before`` and ``before``
    at ``end``, each unless ``pins`` names a revision for it (exactly that one), or says (the label of an empty end)
    that the note did not exist at the revision id given for it. NoteNotFound when the note existed at neither."""
    texts: list[str] = []
    labels: list[str] = []
    revs: list[Revision | None] = []
    for view, pin in ((before, pins[0]), (before.at(end), pins[1])):
        if isinstance(pin, str):  # not there after the batch a revision id names
            texts.append("")
            labels.append(pin)
            revs.append(None)
            continue
        if pin is not None:  # a revision named by its id: exactly that one
            texts.append(view.content(pin))
            labels.append(f"{pin.path} @ {revision_id(pin)} ({format_time(pin.known_at)})")
            revs.append(pin)
            continue
        rev = lookup(view, path)
        if rev is None or rev.deleted:
            rev = lived(view, lambda: lineage) or rev
        rev = view.applies(rev)
        stamp = format_time(view.as_of) if view.as_of is not None else "now"
        if rev is None or rev.deleted:
            texts.append("")
            labels.append(f"{path} (absent {stamp})")
            revs.append(None)
        else:
            texts.append(view.content(rev))
            labels.append(f"{rev.path} @ {stamp}")
            revs.append(rev)
    if "(absent" in labels[0] and "(absent" in labels[1]:
        if lineage:  # the path is right, the times are not
            raise NoteNotFound(
                f"note {path!r} existed at neither time in vault '{vault_name}' ({revisions_known(lineage)})",
                argument="from",
            )
        raise NoteNotFound(f"note {path!r} existed at neither time in vault '{vault_name}'")
    return texts, labels, revs


def binary_change(revs: list[Revision | None]) -> str:
    """For a binary attachment (any but a note, a canvas or a base), the line saying its bytes changed between the
    two ends of a diff (sizes, and each content's first SHA-256 digits): a diff of lines says nothing of them; ""
    for a text file or the same bytes at both ends."""
    there = [r for r in revs if r is not None]
    if not there or not all(is_attachment(r.path) and not r.path.endswith(TEXT_SUFFIXES) for r in there):
        return ""
    facts = [None if r is None else (r.size or 0, r.content_hash or "") for r in revs]
    if facts[0] == facts[1]:
        return ""
    sizes = " → ".join("absent" if f is None else f"{f[0]:,}" for f in facts)
    hashes = " → ".join(f[1][:12] for f in facts if f is not None)
    return f"Binary file {there[-1].path} changed ({sizes} bytes, sha256 {hashes})\n"


def unified(texts: list[str], labels: list[str]) -> str:
    """The unified diff of two texts ('' when identical), a missing final newline marked as diff marks it."""
    lines = difflib.unified_diff(split_lines(texts[0]), split_lines(texts[1]), labels[0], labels[1])
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def tagged(revisions: list[Revision], tag: str) -> list[Revision]:
    """The revisions carrying ``tag`` (a leading ``#`` ignored; compared case-insensitively, as Obsidian does)."""
    wanted = tag.lstrip("#").casefold()
    return [r for r in revisions if any(t.casefold() == wanted for t in r.tags)]

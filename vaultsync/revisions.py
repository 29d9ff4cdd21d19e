"""Writes that know what they overwrite, and the one rule that names a revision: the expected-revision check,
the edits ``edit_note`` makes, and what a revision id given by a person means.

A revision is named in one of two ways, and every door takes both wherever it takes a revision:

- **a revision id** ``rN`` (``revision_id``: ``r`` and a batch's number, as history, changes and listings
  print it) names the vault right after batch N, nothing from a later batch. Given for one note, it names that
  note as it stood then: the revision batch N made, or the last one before it (``pick_revision``). The id a
  note's history prints for a revision (the batch that made it) is therefore that very revision, and an id
  from a vault-wide listing works for any note;
- **the start of a content hash** (8 to 64 hex digits; ``short_revision`` shows the first 8, more where two
  revisions of a note share them) names a text: the latest revision of the note with that content.

A write given an expected revision compares the bytes it is about to replace with it, inside the safe write
(``vaultfs.edit``), so an editor's save landing between a read and the write refuses the write and leaves the
file untouched; a revision id there means the text the note had after that batch (``expected_hash``).

``replace_section`` and ``replace_text`` are pure: text in, text out, or ``EditError`` saying why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .disk.digest import content_hash
from .errors import ConfigError, PathError, RevisionMismatch, UnknownRevision

MIN_PREFIX = 8
"""The shortest revision prefix accepted."""

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def revision_of(data: bytes) -> str:
    """The revision id of a note file's bytes (its content hash)."""
    return content_hash(data)


def mismatch(rel: str, current: str | None, expected: str) -> RevisionMismatch:
    now = "does not exist" if current is None else f"is at revision {current}"
    return RevisionMismatch(
        f"{rel} {now}, not the expected revision {expected}: it changed since it was read, and "
        f"nothing was written; read it again (read_note '{rel}': its content_hash is the current "
        "revision), then retry with that expected_revision"
    )


def expecting(rel: str, expected: str | None, vault: Any = None) -> Callable[[bytes], None] | None:
    """A check of the bytes about to be replaced by a write to ``rel`` (None when no revision is expected):
    ``expected`` as ``expected_hash`` takes it for the note in ``vault``, or without a vault, hex digits only."""
    if expected is None:
        return None
    # refused before anything is read or written
    wanted = check_revision_id(expected) if vault is None else expected_hash(vault, rel, expected)

    def check(old: bytes) -> None:
        if not revision_of(old).startswith(wanted):
            raise mismatch(rel, revision_of(old), expected)

    return check


def check_expected(value: str, argument: str = "expected_revision") -> str:
    """``value`` as an expected revision (a revision id ``r12``, or 8 to 64 hex digits, lower case), or ConfigError
    saying what to give."""
    if batch_named(value) is not None:
        return value.strip().lower()
    try:
        return check_revision_id(value, argument)
    except ConfigError:
        raise ConfigError(
            f"{value!r} is not a revision id: give one as a note's history and the changes show it (r12), "
            f"or {MIN_PREFIX} to 64 hex digits of its content hash",
            argument=argument,
        ) from None


def expected_hash(vault: Any, path: str, expected: str, argument: str = "expected_revision") -> str:
    """What a write's ``expected`` revision of the note at ``path`` requires its bytes' content hash to begin with:
    the hex digits as given, or, for a revision id ``rN``, the whole content hash of the note as it stood right after
    batch N (``Vault.revision``: an error saying why when it did not exist then)."""
    wanted = check_expected(expected, argument)
    if batch_named(wanted) is None:
        return wanted
    rev = vault.revision(path, wanted, argument)
    return str(rev.content_hash)


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, title) of each ATX heading outside fenced code blocks."""
    found, fence = [], None
    for i, line in enumerate(lines):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        m = _HEADING.match(line.rstrip("\r\n"))
        if m:
            found.append((i, len(m.group(1)), m.group(2).strip()))
    return found


def replace_section(text: str, heading: str, body: str) -> str:
    """``text`` with the body under ``heading`` (a heading path like "Plan > Risks", or "## Risks")
    replaced by ``body``; the heading line itself stays. The path must name exactly one heading."""
    wanted = [part.strip().lstrip("#").strip() for part in heading.split(">") if part.strip()]
    if not wanted:
        raise PathError("give a heading, e.g. 'Plan > Risks'")
    lines = text.splitlines(keepends=True)
    heads = _headings(lines)
    stack: list[tuple[int, str]] = []
    hits = []
    for index, (_line, level, title) in enumerate(heads):
        stack = [(lv, t) for lv, t in stack if lv < level] + [(level, title)]
        if [t for _, t in stack][-len(wanted) :] == wanted:
            hits.append(index)
    if len(hits) != 1:
        shown = ", ".join(" > ".join(t for t in [h[2]]) for h in heads[:20]) or "none"
        raise PathError(
            f"heading {heading!r} matches {len(hits)} sections (headings: {shown}); give its path, "
            "e.g. 'Parent > Child'"
        )
    line, level, _ = heads[hits[0]]
    end = next((h[0] for h in heads[hits[0] + 1 :] if h[1] <= level), len(lines))
    old = lines[line + 1 : end]
    blank = [not x.strip() for x in old]
    if all(blank):  # an empty section: the new body between its blank lines
        lead, trail = len(old), (len(old) if end < len(lines) else 0)
    else:
        lead, trail = blank.index(False), blank[::-1].index(False)
    text = body.strip("\r\n")
    after = "".join(old[len(old) - trail :]) if trail else ""
    body = "".join(old[:lead]) + text + "\n" + after if text else "".join(old[:lead])
    head = lines[line]
    if not head.endswith("\n"):
        head += "\n"
    return "".join(lines[:line]) + head + body + "".join(lines[end:])


def replace_text(text: str, old: str, new: str) -> str:
    """``text`` with its one occurrence of ``old`` replaced by ``new``."""
    if not old:
        raise PathError("the text to replace is empty")
    count = text.count(old)
    if count != 1:
        raise PathError(
            f"the text to replace occurs {count} times in the note; give a longer, exact excerpt that occurs once"
        )
    return text.replace(old, new, 1)


def rewrite_file(root: str, path: str, change: Callable[[bytes], bytes], tries: int = 20) -> str:
    """Replace the note file's bytes by ``change(old)`` through ``vaultfs.edit`` (mode kept, no symlink
    followed); when another writer got in meanwhile, ``change`` sees the new bytes (and its
    expected-revision check refuses them). Returns the vault-relative path."""
    from .disk import vaultfs
    from .disk.folder import MAX_FILE_BYTES
    from .disk.paths import writable_note_path
    from .errors import NoteChanged, NoteNotFound

    rel = writable_note_path(path)
    for _ in range(tries):
        try:
            vaultfs.edit(root, rel, MAX_FILE_BYTES, change)
            return rel
        except NoteChanged:
            continue
        except (FileNotFoundError, NotADirectoryError):
            raise NoteNotFound(f"{rel} does not exist in the vault folder") from None
    raise PathError(f"{rel} kept changing ({tries} tries); nothing was written, try again")


SHORT = MIN_PREFIX
"""A revision id as shown: this many hex digits of its content hash (more where a note's revisions share them)."""
_HEX = re.compile(r"[0-9a-f]+")


def short_revision(content_hash: str | None, length: int = SHORT) -> str | None:
    """The revision id shown for a content hash (None for a deletion, which has none)."""
    return content_hash[:length] if content_hash else None


def short_revisions(hashes: list[str | None]) -> list[str | None]:
    """The revision ids of one note's revisions: ``SHORT`` hex digits, more where two different ones share them."""
    distinct = sorted({h for h in hashes if h})
    length = SHORT
    while any(a[:length] == b[:length] for a, b in zip(distinct, distinct[1:])):
        length += 2
    return [short_revision(h, length) for h in hashes]


def check_revision_id(value: str, argument: str = "expected_revision") -> str:
    """``value`` as a revision id (lower case), or ConfigError saying it is none."""
    wanted = value.strip().lower()
    if len(wanted) < MIN_PREFIX or len(wanted) > 64 or not _HEX.fullmatch(wanted):
        raise ConfigError(
            f"{value!r} is not a revision id: give one as the note's history shows it ({MIN_PREFIX} to 64 "
            "hex digits of its content hash)",
            argument=argument,
        )
    return wanted


# ---------------------------------------------------------------- naming one revision of a note's history

_REVISION_ID = re.compile(r"[rR]([0-9]{1,18})")


def revision_id(revision: Any) -> str:
    """The id printed for one revision of a note's history: ``r`` and the number of the batch that made it
    (a note changes at most once a batch, so no two revisions of one history share it; ``undo`` takes the
    same number). As a cutoff it names the vault right after that batch, and so this revision of the note."""
    return f"r{revision.batch_id}"


def looks_like_revision(value: object) -> bool:
    """Whether ``value`` is written as a revision (``r12``, or 8 to 64 hex digits of its content) rather than
    a time: the doors that take a time of a note take its revision too."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    return bool(_REVISION_ID.fullmatch(text) or (MIN_PREFIX <= len(text) <= 64 and _HEX.fullmatch(text.lower())))


def pick_revision(history: list[Any], value: str, path: str, argument: str = "revision") -> Any:
    """The revision of ``history`` (one note's, renames followed back, oldest first) that ``value`` names (see the
    module docstring): for a revision id ``rN``, the note as it stood right after batch N (the revision batch N made,
    or the last before it; a tombstone when it had been deleted by then: the caller says so), the caller having
    checked that N is a batch of the vault (``resolve_cutoff``); for hex digits, the latest revision with that
    content. UnknownRevision when it names none; ConfigError when the digits begin two different contents."""
    text = value.strip()
    known = revisions_known(history)
    number = batch_named(text)
    if number is not None:
        then = [r for r in history if r.batch_id <= number]
        if not then:
            raise UnknownRevision(
                f"note {path!r} did not exist yet after batch {number} ({text}): its first revision is "
                f"{revision_id(history[0])} ({known})",
                argument=argument,
            )
        return then[-1]
    wanted = check_revision_id(text, argument)
    hits = [r for r in history if not r.deleted and (r.content_hash or "").startswith(wanted)]
    contents = {r.content_hash for r in hits}
    if len(contents) > 1:
        raise ConfigError(
            f"{text!r} begins the content of several revisions of {path!r} "
            f"({', '.join(revision_id(r) for r in hits)}): give its id (r12) or more hex digits",
            argument=argument,
        )
    if not hits and text.isdigit():  # 20250301: a date without its dashes, most likely
        from .times import ACCEPTED

        raise ConfigError(f"{text!r} is neither a time nor a revision of {path!r}: use {ACCEPTED}; or {known}")
    if not hits:
        raise UnknownRevision(f"note {path!r} has no revision {text!r} ({known})", argument=argument)
    return hits[-1]


def revisions_known(history: list[Any]) -> str:
    """The ids of a note's (latest) revisions, for a message about a revision it does not have."""
    ids = ", ".join(dict.fromkeys(revision_id(r) for r in history[-6:]))
    return f"{'its revisions' if len(history) <= 6 else 'its latest revisions'}: {ids}; see its history"


# ---------------------------------------------------------------- a revision id as a vault-wide cutoff


def batch_named(value: object) -> int | None:
    """The batch a vault-wide cutoff names when written as a revision id (``r12``: batch 12), else None (a time).
    Content-hash digits name one note's text, not a moment of the vault, so they are no cutoff."""
    if not isinstance(value, str):
        return None
    numbered = _REVISION_ID.fullmatch(value.strip())
    return int(numbered.group(1)) if numbered else None


CUTOFF_FORMS = "or a revision id (r12: the vault right after batch 12, nothing from later batches)"
"""How a vault-wide time argument says it takes a revision id too."""


@dataclass(frozen=True, slots=True)
class Cutoff:
    """A vault-wide knowledge cutoff as given: a time, or the batch a revision id names."""

    as_of: int | None
    """UTC microseconds (None: now); for a revision id, its batch's ``known_at``."""
    batch: int | None = None
    """For a revision id: exactly this batch is the last one seen, even where later batches share its time."""


def resolve_cutoff(vault: Any, value: Any, argument: str = "as_of") -> Cutoff:
    """``value`` (a ``TimeLike``, or a revision id ``r12``) as the ``Cutoff`` of ``vault``'s history; an id of no
    batch of the vault, or a malformed time, is ConfigError saying what to give."""
    from .times import as_micros

    number = batch_named(value)
    if number is None:
        try:
            return Cutoff(as_micros(value, argument))
        except ConfigError as exc:
            if isinstance(value, str):
                raise ConfigError(f"{exc}; {CUTOFF_FORMS}", argument=argument) from None
            raise
    info = vault.batch_info(number)
    if info is None:
        last = vault.last_batch_id
        latest = f"its latest is r{last}" if last else "it has no history yet"
        raise ConfigError(
            f"vault '{vault.name}' has no revision r{number}: {latest}, as changes and a note's history show",
            argument=argument,
        )
    return Cutoff(int(info["known_at"]), number)


def lived_then(lineage: list[Any], batch: int) -> Any:
    """The revision of a note's ``lineage`` (its history, renames followed back, oldest first) in force after
    ``batch``: under whatever name it had then; None when it did not exist then (not yet, or deleted or renamed
    away from the name asked about)."""
    then = [r for r in lineage if r.batch_id <= batch]
    return then[-1] if then and not then[-1].deleted else None

"""What is on disk: scanning the vault folder, observing given paths, reading a note file's bytes.

A file is read once, with its size checked first from ``fstat`` and then a plain ``read``, so
no large buffer is allocated per file.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import NotANote, ParseError
from . import vaultfs
from .ignore import recorded
from .paths import disk_path, is_hidden, is_note_path, is_visible_folder, nfc, relative

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 5 * 1024 * 1024
"""Files larger than this are not read as notes."""


SYMLINK = "a symlink, not followed (vaultsync reads only real files inside the vault)"
"""Why a symlinked note file is not read (import, watcher and write tools alike)."""


TWIN = (
    "its name differs from another file's only in Unicode normalisation (NFC/NFD) and a note has one name; "
    "the other is recorded: rename this one"
)
"""Why a file whose name is another's in another Unicode normalisation is not read (scan and watcher alike)."""


def twin_names(names: Iterable[str]) -> set[str]:
    """The names of a folder's entries left out because another entry has the same name in another Unicode
    normalisation (distinct files on Linux, one note name): of each such group the entry named in NFC is kept (else
    the first in code-point order), so import and the watcher record the same file."""
    names = [name for name in names if not name.isascii()]
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(nfc(name), []).append(name)
    out: set[str] = set()
    for normal, group in groups.items():
        if len(group) > 1:
            kept = normal if normal in group else min(group)
            out.update(name for name in group if name != kept)
    return out


def _too_large(size: int) -> str:
    return f"file is {size / 1e6:.1f} MB, over the {MAX_FILE_BYTES // 2**20} MB limit for a note"


@dataclass(slots=True)
class Present:
    """A file as found on disk (content read when needed) or as given (git blobs)."""

    size: int
    mtime_ns: int | None = None
    fs_path: str | None = None
    data: bytes | None = None
    root: str | None = None
    """The vault folder ``fs_path`` lies in: the file is read from it without following symlinks."""
    stream: Callable[[], Iterator[bytes]] | None = None
    """Given bytes too large to hold (a large git blob): read again, in pieces, each time it is called."""

    def read(self) -> bytes:
        """The file's bytes (ParseError when it grew past the limit since it was seen, or became a
        symlink; OSError as raised)."""
        if self.data is not None:
            return self.data
        assert self.fs_path is not None and self.root is not None
        try:
            data, _ = vaultfs.read_note(self.root, relative(self.root, self.fs_path), MAX_FILE_BYTES)
        except NotANote as exc:
            raise ParseError(str(exc)) from None
        if len(data) > MAX_FILE_BYTES:
            raise ParseError(_too_large(len(data)))
        return data


@dataclass(slots=True)
class Absent:
    """The path does not exist (any more)."""


@dataclass(slots=True)
class Unreadable:
    """The path exists but cannot be taken as a note."""

    reason: str


Observed = Present | Absent | Unreadable

Keep = Callable[[str, Observed], bool]
"""A scan's filter, called with each note file found: False leaves it out of the result."""


@dataclass
class FileProblem:
    """A file that could not be taken as a note, or a note stored with a warning, and why."""

    path: str
    reason: str
    content_hash: str | None = field(default=None, compare=False, repr=False)
    """A warning's note text (its hash): the same text's warning is told once (``vault.parse_warnings.Told``)."""
    renamed: bool = field(default=False, compare=False, repr=False)
    """A warning of a note only renamed (its text was stored, and warned about, under its old name)."""

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def decode(data: bytes) -> str:
    """The note text of a file's bytes, or ParseError saying what is wrong with them."""
    if len(data) > MAX_FILE_BYTES:
        raise ParseError(f"over the {MAX_FILE_BYTES // 2**20} MB limit for a note")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ParseError(f"contains NUL bytes (binary file?), first at byte {nul}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(f"invalid UTF-8 at byte {exc.start}") from None


def scan(root: Path, under: str = "", keep: Keep | None = None) -> tuple[dict[str, Observed], list[FileProblem]]:
    """Every recorded file below ``root`` (or below the folder ``under``), notes and attachments, by NFC
    vault-relative path.

    Dot-folders and dot-files are skipped, and so are the files ``ignore.recorded`` leaves out; symlinks are
    not recorded (see ``paths``): a symlinked folder is not entered, a symlinked file is named as a file that
    cannot be recorded. ``keep`` sees every file found and may leave it out (a full sync drops unchanged files
    as it goes, so they cost no memory).
    """
    found: dict[str, Observed] = {}
    errors: list[FileProblem] = []
    rules = recorded(root)
    real_root = str(root)  # fs paths below are root + relative parts: vaultfs walks them from root
    start = os.path.join(root, under) if under else str(root)
    stack = [start]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as exc:
            errors.append(FileProblem(relative(root, folder) or ".", f"cannot list folder: {exc.strerror}"))
            continue
        base = relative(root, folder)  # once per folder: relpath per file was half a no-change scan
        prefix = "" if base == "." else base + "/"
        twins = twin_names(entry.name for entry in entries if not is_hidden(entry.name))
        for entry in entries:
            if is_hidden(entry.name):
                continue
            if entry.name in twins:
                errors.append(FileProblem(prefix + entry.name, TWIN))
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
            except OSError:
                continue
            rel = nfc(prefix + entry.name)
            note = is_note_path(rel)
            if not rules.listed(rel, entry.name) or (not note and _linked_folder(entry.path)):
                continue
            obs = _observe_entry(real_root, entry, note)
            if isinstance(obs, Unreadable):
                errors.append(FileProblem(rel, obs.reason))
            if keep is None or keep(rel, obs):
                found[rel] = obs
    return found, errors


def _linked_folder(fs_path: str) -> bool:
    """A symlink to a folder: not entered, and not named either (a symlinked note file is named: ``SYMLINK``)."""
    return os.path.islink(fs_path) and os.path.isdir(fs_path)


def _observe_entry(root: str, entry: os.DirEntry[str], note: bool = True) -> Observed:
    """``observe_file`` for a listed entry: a plain regular file costs one ``lstat``, not three calls;
    a symlink is named, not followed."""
    try:
        if entry.is_symlink():
            return Unreadable(SYMLINK)
        plain = entry.is_file(follow_symlinks=False)
        st = entry.stat(follow_symlinks=False) if plain else None
    except OSError:
        plain, st = False, None
    if st is None or not plain:
        return observe_file(root, entry.path)
    if note and st.st_size > MAX_FILE_BYTES:
        return Unreadable(_too_large(st.st_size))
    return Present(size=st.st_size, mtime_ns=st.st_mtime_ns, fs_path=entry.path, root=root)


def observe_file(root: str, fs_path: str) -> Observed:
    """Stat one file below the vault folder ``root``: Present, Absent (also below a symlinked folder,
    which is not entered), or Unreadable with the reason (a symlink itself, as ``scan`` says)."""
    rel = relative(root, fs_path)
    try:
        st = vaultfs.stat_note(root, rel)
    except (FileNotFoundError, NotADirectoryError):
        return Absent()
    except NotANote:
        folder, _, _ = rel.rpartition("/")
        real_folder = folder == "" or vaultfs.kind(root, folder) == "folder"
        return Unreadable(SYMLINK) if real_folder and os.path.islink(fs_path) else Absent()
    except OSError as exc:
        return Unreadable(f"cannot read: {exc.strerror}")
    if st.st_size > MAX_FILE_BYTES and is_note_path(rel):  # an attachment's limit is the store's (``attachments``)
        return Unreadable(_too_large(st.st_size))
    return Present(size=st.st_size, mtime_ns=st.st_mtime_ns, fs_path=fs_path, root=root)


def observe_paths(
    root: Path, paths: Iterable[str], live: Iterable[str]
) -> tuple[dict[str, Observed], list[FileProblem]]:
    """Observe exactly the given vault-relative NFC paths (``paths.changed_path``: normalised once, by
    the caller); a folder stands for everything under it.

    ``live`` lists the notes that exist now (at least those below the given paths): those under a
    folder that vanished are observed too.
    """
    real_root = str(root)
    rules = recorded(root)
    live_paths = sorted(live)
    observed: dict[str, Observed] = {}
    errors: list[FileProblem] = []
    for rel in paths:
        fs_path = disk_path(root, rel)
        if vaultfs.kind(real_root, rel) == "folder":
            if is_visible_folder(rel):
                sub, sub_errors = scan(root, relative(root, fs_path))
                observed.update(sub)
                errors.extend(sub_errors)
        elif rules(rel) and (is_note_path(rel) or not _linked_folder(fs_path)):
            fs_path = _untwinned(fs_path, errors, rel)
            obs = observe_file(real_root, fs_path)
            observed[rel] = obs
            if isinstance(obs, Unreadable):
                errors.append(FileProblem(rel, obs.reason))
        # whatever is gone, every live note under a vanished folder is gone too
        prefix = rel + "/"
        at = bisect.bisect_left(live_paths, prefix)  # live_paths is sorted: those under prefix are contiguous
        while at < len(live_paths) and live_paths[at].startswith(prefix):
            path = live_paths[at]
            at += 1
            if path not in observed:
                observed[path] = observe_file(real_root, disk_path(root, path))
    return observed, errors


def _untwinned(fs_path: str, errors: list[FileProblem], rel: str) -> str:
    """The file a note path names when its folder also holds a file named the same in another Unicode normalisation
    (``twin_names``: the one ``scan`` keeps); each other one is named in ``errors``."""
    if rel.isascii():
        return fs_path
    folder, name = os.path.split(fs_path)
    try:
        with os.scandir(folder) as listing:
            same = [entry.name for entry in listing if nfc(entry.name) == nfc(name)]
    except OSError:
        return fs_path
    left_out = twin_names(same)
    if not left_out:
        return fs_path
    prefix = rel.rpartition("/")[0]
    errors.extend(FileProblem(f"{prefix}/{other}" if prefix else other, TWIN) for other in sorted(left_out))
    return os.path.join(folder, next(n for n in same if n not in left_out))


def files_containing(root: Path, strings: list[str]) -> list[str]:
    """Note files in the vault folder (as on disk now) that contain one of ``strings``, by path."""
    if not root.is_dir():
        return []
    observed, _ = scan(root)
    found = []
    for path, seen in sorted(observed.items()):
        if not isinstance(seen, Present) or not is_note_path(path):
            continue
        try:
            text = seen.read().decode("utf-8", "replace")
        except (OSError, ParseError):
            continue
        if any(s in text for s in strings):
            found.append(path)
    return found

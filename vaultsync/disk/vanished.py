"""A vanished vault is not an empty vault: the checks made before a sync may record deletions.

A vault folder that is missing, not a folder, unreadable, or on another device than when it was
registered (an unmounted share leaves its empty mount point behind) is *unavailable*: nothing is
recorded until it is back. A vault folder that is another folder than the one registered (another
inode: moved away and an empty one made in its place) records no deletion, whatever the vault's
size; when it holds the vault's notes it is taken as the vault folder from then on. A batch that
would delete more than ``MASS_DELETE_FRACTION`` of the live notes, and at least ``MASS_DELETE_MIN``
of them, is a *mass deletion*: refused unless the caller confirms it (renames do not count: they delete
nothing). A folder that cannot be listed during a scan keeps its notes alive (``sync.Plan`` leaves them out of
the deletions).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import MassDeletion, VaultUnavailable

MASS_DELETE_FRACTION = 0.5
"""A batch deleting more than this share of the live notes is a mass deletion (if also ``MASS_DELETE_MIN``)."""

MASS_DELETE_MIN = 20
"""A batch deleting fewer notes than this is never a mass deletion."""


def device_of(root: Path) -> int | None:
    """The device the vault folder lives on now (None when it cannot be reached)."""
    try:
        return os.stat(root).st_dev
    except OSError:
        return None


def inode_of(root: Path) -> int | None:
    """The vault folder's inode now, as a signed 64-bit integer (what a database column holds), or None."""
    try:
        ino = os.stat(root).st_ino
    except OSError:
        return None
    return ino - (1 << 64) if ino >= 1 << 63 else ino


def check_replaced(root: Path, deleted: int) -> None:
    """VaultUnavailable when a batch read from a replaced vault folder would delete notes."""
    if deleted:
        raise VaultUnavailable(
            f"the vault folder {root} is another folder than the one registered (replaced?) "
            f"and lacks {deleted} of its notes; nothing was recorded; confirm if you really "
            "deleted them",
            argument="allow_mass_delete",
        )


def root_problem(root: Path, registered_device: int | None) -> str | None:
    """Why the vault folder cannot be trusted to show the vault now (None: it can)."""
    try:
        st = os.stat(root)
    except FileNotFoundError:
        return f"the vault folder {root} is gone (renamed, evicted or unmounted?)"
    except OSError as exc:
        return f"the vault folder {root} cannot be reached: {exc.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"the vault folder {root} is not a folder"
    if registered_device is not None and st.st_dev != registered_device:
        return f"the vault folder {root} is on another device than when it was registered (unmounted?)"
    try:
        with os.scandir(root) as listing:
            next(listing, None)
    except OSError as exc:
        return f"the vault folder {root} cannot be read: {exc.strerror}"
    return None


def check_root(root: Path, registered_device: int | None) -> None:
    """VaultUnavailable when ``root_problem`` finds one."""
    problem = root_problem(root, registered_device)
    if problem is not None:
        raise VaultUnavailable(f"{problem}; nothing was recorded", argument="allow_mass_delete")


def is_mass_deletion(
    deleted: int, live: int, *, fraction: float = MASS_DELETE_FRACTION, minimum: int = MASS_DELETE_MIN
) -> bool:
    """Whether deleting ``deleted`` of ``live`` notes at once is a mass deletion."""
    return deleted >= minimum and deleted > live * fraction


def check_deletions(deleted: int, live: int) -> None:
    """MassDeletion when deleting ``deleted`` of ``live`` notes at once is a mass deletion."""
    if is_mass_deletion(deleted, live):
        raise MassDeletion(
            f"refusing to record {deleted} deletions of {live} live notes at once (the vault folder "
            "may have vanished for a moment: unmounted, evicted, or a permission error); nothing "
            "was recorded; confirm if you really deleted them",
            argument="allow_mass_delete",
        )


def git_head(root: Path) -> str | None:
    """Where the vault's git work tree stands now (its HEAD and the commit it names), or None: not a git work tree.

    Read from the files git keeps (``.git/HEAD``, the branch's ref or ``packed-refs``), without running git. Git
    moves HEAD once a checkout, a pull or a reset has written the work tree: a batch that finds it moved since the
    last one is the work of git, not a vanished folder.
    """
    git = next((folder / ".git" for folder in (root, *root.parents) if os.path.lexists(folder / ".git")), None)
    if git is None:
        return None  # not in a git work tree (the vault may be a folder of one: its parents are looked in)
    try:  # the vault folder may be unreadable (a failure the batch names): not git's work then
        if git.is_file():  # a linked work tree or a submodule: "gitdir: <path>"
            pointer = git.read_text(encoding="utf-8").strip()
            if not pointer.startswith("gitdir:"):
                return None
            git = (git.parent / pointer.removeprefix("gitdir:").strip()).resolve()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not head.startswith("ref:"):
        return head  # a detached HEAD names its commit
    ref = head.removeprefix("ref:").strip()
    common = git
    try:  # a linked work tree keeps its branches in the main repository ("commondir")
        common = (git / (git / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except OSError:
        pass
    for folder in dict.fromkeys((git, common)):
        try:
            return f"{ref} {(folder / ref).read_text(encoding='utf-8').strip()}"
        except (OSError, UnicodeDecodeError):
            pass
        try:
            packed = (folder / "packed-refs").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for line in packed.splitlines():
            if line.endswith(" " + ref):
                return f"{ref} {line.split(' ', 1)[0]}"
    return f"{ref} (no commit yet)"


RETRY_S = 1.0
"""While the vault folder is away, the watcher looks for it again this often."""


class Outage:
    """A watcher's memory of a vanished vault: said once when it begins, once when it ends."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def begin(self, reason: str) -> bool:
        """Remember ``reason``; True the first time (say it), False while the outage lasts."""
        first = self.reason is None
        self.reason = reason
        return first

    def end(self) -> bool:
        """Forget the outage; True if there was one (say it is over)."""
        was = self.reason is not None
        self.reason = None
        return was

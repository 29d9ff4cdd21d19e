"""Recording what changed: a scan of the vault folder (or some paths) as one atomic batch, its git history as
one batch a commit.

``Vault.sync`` and ``Vault.import_git`` hold the vault's writer lock and hand the work to a ``Recorder``: it checks
that the vault folder is still the one registered (``disk.vanished``), observes the files, plans the batch
(``sync.Plan``) and writes it through ``write_plan``, the one plan → batch path.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import write_caller
from ..disk import vanished
from ..disk.digest import content_hash
from ..disk.folder import Present, observe_paths, scan
from ..disk.paths import changed_path
from ..errors import VaultsyncError
from ..gitimport import Commit, GitHistory, GitImport, OnCommit, to_import
from ..store import Engine
from ..store.requests import mark_done
from ..sync import BatchSummary, LiveIndex, ParsePool, Plan, Progress, Twins, twins_on_disk, write_plan

if TYPE_CHECKING:
    from ..store.contract import Batch


class Recorder:
    """One vault's batches, for ``Vault`` (which holds ``lock.writing`` around every call)."""

    def __init__(self, store: Engine, vault_id: int, name: str, root: Path, parse_workers: int) -> None:
        self.store = store
        self.vault_id = vault_id
        self.name = name
        self.root = root
        self.parse_workers = parse_workers

    def sync(
        self,
        paths: Iterable[str] | None,
        *,
        known_at: int | None,
        strict: bool,
        source: str,
        progress: Progress | None,
        allow_mass_delete: bool,
        detail: str | None,
        hold: Callable[[str], bool] | None,
        checkout: bool = False,
    ) -> BatchSummary:
        """``Vault.sync``, its times parsed, under the writer lock."""
        replaced = self._check_root(allow_mass_delete)
        unchanged = 0
        if paths is None:  # a full scan: unchanged files are dropped as found, against a compact index
            index = LiveIndex(self.store.live_index(self.vault_id))
            observed, errors = scan(self.root, keep=index.keep)
            observed.update(index.unseen())
            unchanged = index.unchanged
        else:  # only what the batch touches: its paths and the live notes below those that are folders
            given = [rel for rel in map(changed_path, paths) if rel is not None]  # normalised once, here
            observed, errors = observe_paths(self.root, given, self.store.live_under(self.vault_id, given))
        live, states = self.store.plan_state(self.vault_id, observed)
        twins = None if paths is None else self._twins(observed, live)
        plan = Plan(
            observed,
            live,
            states,
            errors=errors,
            unchanged=unchanged,
            twins=twins,
            hold=None if paths is None else hold,
            settle=paths is not None and hold is not None,
        )
        guarded = None if allow_mass_delete else self._deletion_guard(plan, replaced, checkout)
        summary = self.write_plan(
            plan, known_at=known_at, source=source, strict=strict, progress=progress, detail=detail, on_write=guarded
        )
        if replaced:  # it holds the vault's notes: the vault folder from now on
            self._register_root()
        return summary

    def _twins(self, observed: dict[str, Any], live: dict[str, tuple[int, str]]) -> Twins | None:
        """For a partial sync that may create notes: where ``Plan`` looks for the far end of a move (the live
        notes with a new file's content, read before the batch)."""
        hashes = set()
        for path, obs in observed.items():
            if isinstance(obs, Present) and path not in live:
                try:
                    hashes.add(content_hash(obs.read()))
                except (OSError, VaultsyncError):
                    continue  # the batch names it
        if not hashes:
            return None  # nothing new: nothing can be the far end of a move
        return twins_on_disk(self.store.live_with_hashes(self.vault_id, hashes), observed, self.root)

    def _check_root(self, confirmed: bool) -> bool:
        """VaultUnavailable when the vault folder vanished (the first sync, or a ``confirmed`` one,
        registers the device and inode it has); True when it is another folder than the one registered
        (its batch may delete nothing: see ``disk.vanished``)."""
        registered, device = self.store.vault_device(self.vault_id), vanished.device_of(self.root)
        inode, known = vanished.inode_of(self.root), self.store.vault_inode(self.vault_id)
        if device is not None and (registered is None or confirmed):
            vanished.check_root(self.root, None)
            if (device, inode) != (registered, known):
                self.store.set_vault_device(self.vault_id, device, inode)
            return False
        vanished.check_root(self.root, registered)
        if known is None and inode is not None and registered is not None:  # registered before inodes were
            self.store.set_vault_device(self.vault_id, registered, inode)
            return False
        return inode != known

    def _register_root(self) -> None:
        """Take the vault folder as it is now (its device and inode) as the vault's folder."""
        device = vanished.device_of(self.root)
        if device is not None:
            self.store.set_vault_device(self.vault_id, device, vanished.inode_of(self.root))

    def _deletion_guard(
        self, plan: Plan, replaced: bool = False, checkout: bool = False
    ) -> Callable[[Any], None] | None:
        """A check run inside the batch, once renames are known: MassDeletion (or, in a replaced vault
        folder, VaultUnavailable for any deletion) rolls it back. A ``checkout`` (the vault's git HEAD moved:
        ``vanished.git_head``) in the registered folder may delete most notes."""
        if replaced:
            live = len(self.store.live_index(self.vault_id))

            def check(_writer: Any) -> None:
                deleted = len(plan.deletions) - len(plan.renames)
                vanished.check_deletions(deleted, live)
                vanished.check_replaced(self.root, deleted)

            return check
        if checkout or len(plan.deletions) < vanished.MASS_DELETE_MIN:
            return None
        live = len(self.store.live_index(self.vault_id))
        return lambda _writer: vanished.check_deletions(len(plan.deletions) - len(plan.renames), live)

    def import_git(self, *, strict: bool, progress: OnCommit | None) -> GitImport:
        """``Vault.import_git`` under the writer lock."""
        history = GitHistory(self.root)
        result = GitImport(BatchSummary(vault=self.name))
        pool = ParsePool(self.parse_workers)  # started by the first large batch, kept for the others
        try:
            imported = self.store.git_commits(self.vault_id)
            todo = to_import(history, imported, self.store.last_batch(self.vault_id))
            result.skipped = len(imported)
            for index, (parent, commit) in enumerate(todo, start=1):
                first = index == 1
                observed = history.observed(parent, commit, whole=first)
                last = self.store.last_batch(self.vault_id)
                when, last_at = commit.committed_at, None if last is None else last[0]
                if last_at is not None and when < last_at:
                    when, result.lifted = last_at, result.lifted + 1
                live = self.store.live_state(self.vault_id, None if first else list(observed))
                result.summary.merge(
                    self.write_plan(
                        Plan(observed, live, {}, full=first),
                        known_at=when,
                        source="git",
                        detail=commit.sha,
                        strict=strict,
                        on_write=functools.partial(_record_commit, commit),
                        workers=pool,
                    )
                )
                result.commits += 1
                if progress:
                    progress(index, len(todo), commit)
        finally:
            pool.close()
            history.close()
        return result

    def write_plan(
        self,
        plan: Plan,
        *,
        known_at: int | None,
        source: str,
        detail: str | None = None,
        strict: bool = False,
        progress: Progress | None = None,
        on_write: Callable[[Batch], None] | None = None,
        workers: ParsePool | None = None,
    ) -> BatchSummary:
        """The one plan → batch path (import, watch, writes, git backfill); the caller holds ``lock.writing``. The batch
        that carries out another process's write request (``write_caller.carrying``, its source) marks it done."""
        carried = write_caller.carried()
        if carried is not None and carried.source == source:
            on_write = _then(on_write, lambda batch: mark_done(batch, carried.request_id))
        return write_plan(
            self.store,
            self.vault_id,
            self.name,
            plan,
            known_at=known_at,
            source=source,
            detail=detail,
            caller=write_caller.caller(),
            strict=strict,
            workers=self.parse_workers if workers is None else workers,
            progress=progress,
            on_write=on_write,
        )


def _then(first: Callable[[Any], None] | None, second: Callable[[Any], None]) -> Callable[[Any], None]:
    """``first`` (if any), then ``second``: two additions to one batch."""
    if first is None:
        return second

    def both(batch: Any) -> None:
        first(batch)
        second(batch)

    return both


def _record_commit(commit: Commit, writer: Any) -> None:
    """Inside a ``--from-git`` batch: the commit it came from."""
    writer.record_git_commit(commit.sha, commit.committed_at)

"""Live sync: watch a vault, debounce changes, and record each flush as one atomic batch.

Usage::

    with Vault.open(db, root="~/notes") as vault, Watcher(vault, on_batch=print) as watcher:
        ...                      # batches are written in the background
        watcher.status()         # {"running": True, "observer": "inotify", "pending": 0, ...}

``step_ms`` is the quiet period (a set is flushed once no change arrived for that long) and
``debounce_ms`` the maximum wait (a set is flushed at the latest that long after its first change,
even while changes keep coming), as in watchfiles.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..disk import vanished
from ..errors import LockedError, MassDeletion, StoreError, VaultsyncError, VaultUnavailable
from ..retention import Policy
from ..sync import BatchSummary
from ..times import format_time
from ..vault import Vault
from ..vault.parse_warnings import Told
from .debounce import Debouncer, Pending, collapse
from .events import EVERYTHING, POLL_INTERVAL_S, ObserverFactory, start_observer
from .filling import VectorFiller
from .handoff import Desk
from .heartbeat import Heartbeat, default_beat_s, stopped
from .holding import HeldPaths
from .keeper import MAX_RETRY_S, LockKeeper
from .observed import ObservedFolder
from .pace import DEBOUNCE_MS, RECONCILE_S, STEP_MS
from .retaining import RETENTION_EVERY_S, Retainer
from .writer_role import WriterRole

logger = logging.getLogger(__name__)

OnBatch = Callable[[BatchSummary], None]
MAX_BACKOFF_S = 30.0

HOLD_MIN_S = 1.0
"""The shortest time a deletion no add joined is held back (see ``Watcher.hold_s``)."""


class Watcher:
    """Keeps a vault's store current in background threads; the only writer while it runs.

    ``start`` takes the vault's writer lock through ``role`` (a ``WriterRole``; one of its own when none
    is given: a second ``watch`` or ``import`` is refused), starts the
    observer, records everything that changed while nothing was watching (one catch-up batch), then
    flushes debounced sets of paths on its own thread. Every ``reconcile_s`` seconds (0 disables) a
    full scan, cheap when nothing changed, repairs events the OS never reported. A batch that fails
    (database busy, vault folder gone) keeps its paths dirty and is retried with a backoff.
    ``on_batch`` is called, on the watcher's thread, after each batch that wrote something. While it runs,
    its desk (``handoff.Desk``) carries out the writes other processes ask of the vault (``restore``,
    ``undo``, a second ``import``, a reader server's write tools); their batches are told to ``on_batch`` too.
    With a ``retention`` policy it thins the stored history by it every ``retention_every_s`` while no batch is
    due (``retaining.Retainer``).

    A move can reach the watcher in two flushes (an observer reports the new folder before the old
    one's removal, or a poll sees the removal first). A note created with the content of a live
    note whose file is gone is recorded as renamed from it (``Vault.sync``); a deletion that no add
    joined, and a copy of a note still on disk, are held back for ``hold_s`` and re-checked with
    every flush meanwhile, so an add arriving later still joins them into a rename.
    """

    def __init__(
        self,
        vault: Vault,
        *,
        step_ms: int = STEP_MS,
        debounce_ms: int = DEBOUNCE_MS,
        polling: bool = False,
        reconcile_s: float = RECONCILE_S,
        on_batch: OnBatch | None = None,
        observer_factory: ObserverFactory = start_observer,
        role: WriterRole | None = None,
        describe: Callable[[VaultsyncError], str] = str,
        heartbeat_s: float | None = None,
        retention: Policy | None = None,
        retention_every_s: float = RETENTION_EVERY_S,
    ) -> None:
        if step_ms <= 0 or debounce_ms <= 0:
            raise ValueError("step_ms and debounce_ms must be positive")
        self.vault = vault
        self.role = role or WriterRole(vault)
        self.step_ms, self.debounce_ms, self.polling = step_ms, max(debounce_ms, step_ms), polling
        self.reconcile_s = reconcile_s
        self.on_batch = on_batch
        self.describe = describe
        """How a refusal (a vanished vault, a mass deletion) is said in the log: in the words of the door."""
        self.heartbeat_s = default_beat_s() if heartbeat_s is None else heartbeat_s
        """How often its heartbeat is published for every reader of the store (``heartbeat``)."""
        self.heartbeat: Heartbeat | None = None
        self._in_flight: float | None = None
        """While a batch is written: when the oldest change it records happened (``time.monotonic()``)."""
        self._failed_since: float | None = None
        """When its batches began to fail in a row, for any reason (None: the last one was written)."""
        self._debouncer = Debouncer(step_ms / 1000, self.debounce_ms / 1000)
        self.folder = ObservedFolder(vault.root, observer_factory, polling)
        """The vault folder and its file-system observer."""
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._own_lock = False
        self.outage = vanished.Outage()
        self.keeper = LockKeeper(self.role)
        self._failing = 0
        """How many batches failed in a row (the first is said, the others only when one succeeds again)."""
        self._failing_since: float | None = None
        """When the batches began to fail in a row for a reason no outage the watcher waits out explains."""
        self.unwritten = 0
        """Paths still pending when the final batch could not be written (0: it was, or none were pending)."""
        self.batches = 0
        self.failures = 0
        self.last_batch_at: int | None = None
        self.last_latency_ms: float | None = None
        """The last batch's delay: from its burst's first change to its commit (``first_change``)."""
        self._since: float | None = None
        """Wall time of this watcher's last commit (at first: its start): a file modified before it is no change
        of the burst a batch records (a copy that kept its modification time, a catch-up's changes)."""
        self._warned = Told()  # the parse warnings told this session (once a text)
        self.last_error: str | None = None
        self._next_reconcile = 0.0
        self._desk: Desk | None = None
        self._held = HeldPaths()
        """Held paths (see ``Plan.held``) and until when each may be held."""
        self._flushing = False
        """Whether a batch is being written (the vector filler waits meanwhile)."""
        self.filler = VectorFiller(vault, busy=self._batch_due)
        """The vectors of a background embedder, filled on a thread of their own while no batch is due."""
        self.retainer = Retainer(vault, retention, retention_every_s)
        """The retention policy, applied every ``retention_every_s`` while no batch is due (None: history is kept)."""
        self._head: str | None = None
        """Where the vault's git work tree stood when the last burst was all recorded (``vanished.git_head``)."""

    def _batch_due(self) -> bool:
        """Whether a batch is due (paths wait for one, or held ones for their hold) or being written."""
        return self._flushing or bool(self._held) or self._queued()

    @property
    def vectors_filled(self) -> int:
        """Texts this watcher gave their vectors."""
        return self.filler.filled

    @property
    def hold_s(self) -> float:
        """How long an unpaired deletion waits for its add: the maximum wait, at least ``HOLD_MIN_S``, and
        for the polling observer long enough for two more walks of the vault."""
        floor = 2.5 * POLL_INTERVAL_S if self.polling or self.observer_kind == "polling" else HOLD_MIN_S
        return max(self.debounce_ms / 1000, floor)

    # ------------------------------------------------------------ life

    def start(self) -> None:
        """Lock the vault, start observing, write the catch-up batch, then run in the background."""
        if self._thread is not None:
            raise RuntimeError("this watcher is already running")
        self._debouncer = Debouncer(self.step_ms / 1000, self.debounce_ms / 1000)
        self._own_lock = self.role.take_for_watching()
        self._since = time.time()
        self._head = vanished.git_head(self.vault.root)
        self.heartbeat = Heartbeat(self.vault.lock, self.beat_facts, self.heartbeat_s).start()
        try:
            self.folder.start(self._debouncer.add)
            self._flush(None, "catch-up", raise_errors=True)
        except (OSError, StoreError) as exc:
            self.folder.stop()
            self._release()
            raise StoreError(f"could not start watching {self.vault.root}: {exc}") from exc
        except BaseException:
            self.folder.stop()
            self._release()
            raise
        self._stop.clear()
        self._next_reconcile = time.monotonic() + self.reconcile_s
        self._thread = threading.Thread(target=self._run, name="vaultsync-watcher", daemon=True)
        self._thread.start()
        self._desk = Desk(self.vault, on_batch=self._told).start()  # other processes' writes, carried out here
        self.filler.start()
        logger.info(
            "watching %s (%s): quiet period %d ms, max wait %d ms, reconcile %s",
            self.vault.root,
            self.observer_kind,
            self.step_ms,
            self.debounce_ms,
            f"every {self.reconcile_s:g} s" if self.reconcile_s > 0 else "off",
        )

    def stop(self) -> None:
        """Stop observing, record everything still unrecorded as one batch, join every thread, release the lock."""
        if self._thread is None:
            return
        if self._desk is not None:  # the request in hand is finished first: never half done
            self._desk.stop()
            self._desk = None
        self.filler.stop()  # after the run of texts in hand: what it filled is kept, the next writer fills the rest
        self._stop.set()
        self._debouncer.close()
        self._thread.join()
        self._thread = None
        try:
            self.folder.stop()
            # a full scan, cheap when little changed: it also covers events the OS had not delivered yet
            pending = self._debouncer.drain()
            waiting = len({*(pending.paths if pending is not None else ()), *self._held})
            if not self._flush(None, "final"):
                logger.error(
                    "the final batch could not be written (%d paths pending); the next start will catch them up",
                    waiting,
                )
                if self.outage.reason is None:  # a refusal (a vanished folder, a mass deletion) is no failure
                    self.unwritten = waiting
        finally:
            self._release()
        logger.info("stopped watching %s (%d batches written)", self.vault.root, self.batches)

    def __enter__(self) -> Watcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def observer_kind(self) -> str | None:
        return self.folder.kind

    def healthy(self) -> bool:
        """Running, and the observer alive (or the vault folder away or replaced: the watcher waits
        for it, recording nothing, and watches it again when it is back)."""
        if not self.running:
            return False
        if self.outage.reason is not None or self.folder.replaced():
            return True
        return self.folder.alive()

    def status(self) -> dict[str, Any]:
        pending, first = self._debouncer.snapshot()
        return {
            "running": self.running,
            "vault": self.vault.name,
            "root": str(self.vault.root),
            "observer": self.observer_kind,
            "pending": pending,
            "lag_ms": round((time.monotonic() - first) * 1000) if first is not None else 0,
            "batches": self.batches,
            "last_batch_at": format_time(self.last_batch_at),
            "last_latency_ms": None if self.last_latency_ms is None else round(self.last_latency_ms),
            "failures": self.failures,
            "last_error": self.last_error,
            "step_ms": self.step_ms,
            "debounce_ms": self.debounce_ms,
            "reconcile_s": self.reconcile_s,
            "vault_unavailable": self.outage.reason,
            "held": len(self._held),
            **self.keeper.status(),
        }

    # ------------------------------------------------------------ the flushing thread

    def _run(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            if backoff:
                if self._stop.wait(backoff):
                    return
            self.keeper.check()  # now and then: is the lock still held? (a PostgreSQL session may be lost)
            if self.keeper.lost:
                backoff = 0.1  # the keeper paces its own attempts
                took = self.keeper.retake()
                if self.keeper.holder is not None:  # another process records the vault now: this watcher's run of
                    # failed batches ends here, and taking the vault over again later is a hand-over, not a recovery
                    self._failing, self._failing_since, self._failed_since = 0, None, None
                if took:
                    backoff = 0.0 if self._flush_all("catch-up") else 0.5
                continue
            wait = None if self.reconcile_s <= 0 else max(0.0, self._next_reconcile - time.monotonic())
            wait = vanished.RETRY_S if wait is None else min(wait, vanished.RETRY_S)  # notice a vanished vault folder
            recheck = self.folder.recheck_at
            # a held deletion waits for the second look at the watches, and for a batch already queued (which
            # re-checks it: its add may be in it, or the scan a lost watch started)
            held_due = [due if recheck is None else max(due, recheck) for due in self._held.due_times()]
            held_due = [] if self._queued() else held_due
            for due in [*held_due, *([recheck] if recheck is not None else [])]:
                wait = max(0.0, min(wait, due - time.monotonic()))
            retain_s = self.retainer.wait_s()
            if retain_s is not None and not self._held and not self._queued():  # a burst first, then retention
                wait = min(wait, retain_s)
            pending = self._debouncer.get(timeout=wait)
            if self._stop.is_set():
                if pending is not None:
                    self._debouncer.put_back(pending)
                return
            if pending is not None:
                ok = self._flush(pending, "batch")
            elif self.folder.recheck_due() and self.outage.reason is None and not self.folder.replaced():
                # before a held deletion's end: the second look may find a watch lost, and the scan it starts
                # then finds where the notes went (a rename, not a deletion and a creation)
                self.folder.recheck(self._debouncer.add)
                continue
            elif self._held.expired() and self.folder.recheck_at is None and not self._queued():
                first = self._held.first if self._held.first is not None else time.monotonic()
                ok = self._flush(Pending(set(self._held), first, first), "batch")
            elif self.outage.reason is not None or self.folder.replaced():
                ok = self._flush(None, "check")
            elif self.reconcile_s > 0 and time.monotonic() >= self._next_reconcile:
                ok = self._flush_all("reconcile")
                if ok:
                    self._next_reconcile = time.monotonic() + self.reconcile_s
            elif self.retainer.due and not self._held and not self._queued():  # idle: not during a burst
                self.retainer.step()
                continue
            else:
                continue
            backoff = 0.0 if ok else min(MAX_BACKOFF_S, max(0.5, backoff * 2))
            if self.outage.reason is not None:
                backoff = min(backoff, vanished.RETRY_S)
            if not ok and self.vault.database_unreachable_s() > 0:  # try soon: it may be back any moment
                backoff = min(backoff, MAX_RETRY_S)

    @property
    def failing_s(self) -> float:
        """How long batches have failed in a row for a reason no outage the watcher waits out explains (0: they do
        not): not a vanished vault folder or a refused mass deletion, not an unreachable database (``--max-outage-s``
        bounds that), not a lost PostgreSQL lock being retaken."""
        if self._failing_since is None or self.outage.reason is not None or self.keeper.lost:
            return 0.0
        return time.monotonic() - self._failing_since

    def _queued(self) -> bool:
        """Whether paths wait in the debouncer for a batch."""
        return self._debouncer.snapshot()[0] > 0

    def _may_hold(self, path: str) -> bool:
        """Whether a deletion no add joined may wait for a later batch: within its hold, or while the observer's
        watches are yet to be looked at again (a folder moved into a new one may have lost its watch, and the scan
        that follows finds where its notes went)."""
        return self._held.may_hold(path) or self.folder.recheck_at is not None

    def _flush_all(self, reason: str) -> bool:
        """A full scan, which covers every pending path (kept pending if it fails)."""
        everything = self._debouncer.drain()
        ok = self._flush(None, reason)
        if not ok and everything is not None:
            self._debouncer.put_back(everything)
        return ok

    def beat_facts(self) -> dict[str, Any]:
        """What its heartbeat publishes (``heartbeat``): recording or failing, and how far behind the folder."""
        pending, first = self._debouncer.snapshot()
        firsts = [t for t in (first, self._in_flight, self._held.first) if t is not None]
        failing = self._failed_since is not None or self.outage.reason is not None or self.keeper.lost
        return {
            "mode": "watch",
            "state": "failing" if failing else "watching",
            "every_s": self.heartbeat_s,
            "pending": pending + len(self._held),
            "lag_s": round(time.monotonic() - min(firsts), 3) if firsts else 0.0,
            "failing_s": round(time.monotonic() - self._failed_since, 3) if self._failed_since is not None else 0.0,
        }

    def _flush(self, pending: Pending | None, reason: str, raise_errors: bool = False) -> bool:
        """Write one batch (``pending`` paths, or a full scan); False if it failed and must be retried."""
        self._in_flight = pending.first if pending is not None else time.monotonic()
        self._flushing = True  # the vector filler yields meanwhile
        try:
            ok = self._write(pending, reason, raise_errors)
        finally:
            self._in_flight = None
            self._flushing = False
        failing = self._failed_since is not None
        if ok:
            self._failed_since = None
        elif not failing:
            self._failed_since = time.monotonic()
        if failing != (not ok) and self.heartbeat is not None:
            self.heartbeat.poke()  # readers learn at once that it fails, or records again
        return ok

    def _write(self, pending: Pending | None, reason: str, raise_errors: bool) -> bool:
        """``_flush``'s batch."""
        paths = None if pending is None or EVERYTHING in pending.paths else collapse(pending.paths)
        if pending is not None and paths is None:
            reason = "rescan"  # the observer lost events: a full scan, now
        started = time.monotonic()
        if not raise_errors and reason != "final" and not self.vault.lock.held:  # it went with a lost session:
            self.keeper.lose("its database session ended")  # never borrowed for one batch, retaken for good
            if pending is not None:
                self._debouncer.put_back(pending)
            return False
        try:
            if self.outage.reason is not None or self.folder.replaced():
                if reason != "final":  # stopping: no observer is started again
                    self.folder.reattach(self._debouncer.add)
                paths = None  # back from an outage, or a new folder: a full scan, guarded
            first = pending.first if pending is not None else None
            if self._held.first is not None:  # the held burst goes with this batch: its delay counts from its start
                first = self._held.first if first is None else min(first, self._held.first)
            if paths is not None and self._held:
                paths = collapse({*paths, *self._held})  # re-checked: an add may join them now
            head = vanished.git_head(self.vault.root)
            checkout = head is not None and self._head is not None and head != self._head  # git wrote this burst
            summary = self.vault.sync(
                paths, source="watch", hold=None if paths is None else self._may_hold, checkout=checkout
            )
        except (VaultUnavailable, MassDeletion) as exc:
            if raise_errors:
                raise
            return self._vanished(exc, pending)
        except LockedError as exc:  # the lock went with a lost database session (and maybe to another process)
            if raise_errors:
                raise
            self.failures += 1
            self.last_error = str(exc)
            if reason == "final":
                logger.warning("final failed: %s", exc)
            else:
                self.keeper.lose(str(exc))
            if pending is not None:
                self._debouncer.put_back(pending)
            return False
        except Exception as exc:
            if raise_errors:
                raise
            self.failures += 1
            self.last_error = str(exc) if isinstance(exc, VaultsyncError) else f"{type(exc).__name__}: {exc}"
            kept = "" if reason == "final" else ", will retry" + (f" ({len(paths)} paths kept)" if paths else "")
            # the first failure of a run of them is said; the next ones (the database away) are not, until one succeeds
            logger.log(
                logging.DEBUG if self._failing else logging.WARNING, "%s failed%s: %s", reason, kept, self.last_error
            )
            self._failing += 1
            if self.vault.database_unreachable_s() > 0:
                self._failing_since = None  # an outage, bounded on its own
            elif self._failing_since is None:
                self._failing_since = time.monotonic()
            if pending is not None:
                self._debouncer.put_back(pending)
            return False
        self.last_error = None
        self._failing_since = None
        if self._failing:
            logger.warning("%s written: recording again after %d failed attempts", reason, self._failing)
            self._failing = 0
        self._held.keep(
            summary.held,
            everything=paths is None,
            hold_s=self.hold_s,
            first=first or started,
            unsettled=summary.unsettled,
        )
        self._debouncer.add(summary.unsettled)  # being written when read: recorded once they rest
        if not self._held:  # the burst is all recorded: a later move of HEAD is a new checkout
            self._head = head
        if paths is not None and self.folder.lost_watches(paths):
            self.folder.rewatch(self._debouncer.add)
        if self.outage.end():
            logger.warning("the vault folder %s is back; recording again", self.vault.root)
        latency_ms = self._delay_ms(first, summary)
        self._report(summary, reason, paths is not None, latency_ms)
        return True

    def _delay_ms(self, first: float | None, summary: BatchSummary) -> float | None:
        """From the burst's first change to the batch's commit, in ms (None: a full scan with no event and no change
        since the last commit). The first change is the earliest of the first event's arrival (``first``,
        monotonic) and the earliest modification time of a file the batch recorded, when that falls after this
        watcher's last commit: on a busy machine the events themselves can reach a low-priority process late, and
        the delay a person sees counts from the save."""
        now = time.time()
        starts = [] if first is None else [now - (time.monotonic() - first)]
        since = self._since
        if summary.known_at is not None:
            self._since = max(now, summary.known_at / 1e6)
        if summary.first_mtime_ns is not None and since is not None and summary.first_mtime_ns / 1e9 >= since:
            starts.append(summary.first_mtime_ns / 1e9)
        if not starts:
            return None
        end = now if summary.known_at is None else max(now, summary.known_at / 1e6)
        return max(0.0, (end - min(starts)) * 1000)

    def _vanished(self, exc: VaultsyncError, pending: Pending | None) -> bool:
        """Record nothing, keep the paths, say it once: the watcher retries until the vault is back."""
        self.failures += 1
        self.last_error = str(exc)
        if self.outage.begin(str(exc)):
            logger.warning(
                "%s; watching for %s to come back",
                self.describe(exc),
                "them" if isinstance(exc, MassDeletion) else "it",
            )
        if pending is not None:
            self._debouncer.put_back(pending)
        return False

    def _report(self, summary: BatchSummary, reason: str, partial: bool, latency_ms: float | None) -> None:
        for error in summary.errors:
            logger.warning("skipped %s: %s", error.path, error.reason)
        for warning in self._warned.untold(summary.warnings):  # once a text, none for a rename
            logger.warning("stored %s with a warning: %s", warning.path, warning.reason)
        looked = summary.changed + summary.unchanged + len(summary.errors) + len(summary.held) + len(summary.unsettled)
        scope = f"{looked} note{'s' * (looked != 1)}" if partial else "full scan"
        if summary.batch_id is None:
            logger.debug("%s: no change (%s, %d ms)", reason, scope, summary.seconds * 1000)
            return
        self.batches += 1
        self.filler.written()  # its new texts may wait for vectors
        self.last_batch_at = summary.known_at
        self.last_latency_ms = latency_ms if latency_ms is not None else summary.seconds * 1000
        summary.delay_ms = latency_ms
        after = f", {latency_ms:.0f} ms after the first change" if latency_ms is not None else ""
        logger.info(
            "%s %d: %d added, %d modified, %d renamed, %d deleted, %d errors (%s) in %d ms%s",
            reason,
            summary.batch_id,
            summary.added,
            summary.modified,
            summary.renamed,
            summary.deleted,
            len(summary.errors),
            scope,
            summary.seconds * 1000,
            after,
        )
        logger.debug("batch %d wrote %s", summary.batch_id, ", ".join(summary.paths))
        if self.on_batch is not None:
            try:
                self.on_batch(summary)
            except Exception:
                logger.exception("the on_batch callback failed")

    def _told(self, summary: BatchSummary) -> None:
        """A batch the desk wrote for another process: counted and told as the watcher's own."""
        self.batches += 1
        self.filler.written()
        self.last_batch_at = summary.known_at
        if self.on_batch is not None:
            try:
                self.on_batch(summary)
            except Exception:
                logger.exception("the on_batch callback failed")

    def _release(self) -> None:
        if self.heartbeat is not None:  # readers learn that nobody records the folder now
            self.heartbeat.stop(stopped(self.heartbeat_s))
            self.heartbeat = None
        if self._own_lock:
            self.role.release()
            self._own_lock = False


__all__ = ["Watcher"]

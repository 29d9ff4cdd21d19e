"""A watcher in the foreground (the ``watch`` command): ``watch`` runs one until told to stop, ``stop_on_signals``
tells it on SIGINT/SIGTERM, ``open_when_reachable`` waits for a database that is not up yet."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

from ..errors import StoreError, Unreachable, VaultsyncError
from ..retention import Policy
from ..vault import Vault
from .pace import DEBOUNCE_MS, MAX_FAILING_S, RECONCILE_S, STEP_MS
from .watcher import OnBatch, Watcher
from .writer_role import WriterRole

logger = logging.getLogger("vaultsync.live.watcher")  # the watcher's lines, under its name


def watch(
    vault: Vault,
    *,
    step_ms: int = STEP_MS,
    debounce_ms: int = DEBOUNCE_MS,
    polling: bool = False,
    reconcile_s: float = RECONCILE_S,
    on_batch: OnBatch | None = None,
    stop_event: threading.Event | None = None,
    role: WriterRole | None = None,
    describe: Callable[[VaultsyncError], str] = str,
    max_outage_s: float | None = None,
    max_failing_s: float | None = MAX_FAILING_S,
    retention: Policy | None = None,
) -> Watcher:
    """Watch until ``stop_event`` is set, then flush and return the stopped watcher (``describe``: how a
    refusal is said, in the words of the door that runs it).

    A vault folder that disappears is waited for (nothing is recorded meanwhile); raises StoreError
    if the file-system observer stops, the database stays unreachable for more than ``max_outage_s``, or batches
    keep failing for another reason for more than ``max_failing_s`` (watching stops after a final flush; what is
    pending is recorded by the next start's catch-up scan), and when told to stop with paths pending whose final
    batch could not be written.
    """
    stop_event = stop_event or threading.Event()
    watcher = Watcher(
        vault,
        step_ms=step_ms,
        debounce_ms=debounce_ms,
        polling=polling,
        reconcile_s=reconcile_s,
        on_batch=on_batch,
        role=role,
        describe=describe,
        retention=retention,
    )
    with watcher:
        while not stop_event.wait(1.0):
            if not watcher.healthy():
                raise StoreError(f"stopped watching {vault.root}: the file-system observer stopped")
            away = vault.database_unreachable_s()
            if max_outage_s is not None and away > max_outage_s:
                pending = watcher.status()["pending"]
                raise StoreError(
                    f"stopped watching {vault.root}: the database has been unreachable for {away:.0f} s "
                    f"(the limit is {max_outage_s:g} s{_why(watcher.last_error)}); {pending} changed "
                    f"path{'s' * (pending != 1)} pending, recorded by the next start's catch-up scan"
                )
            failing = watcher.failing_s
            if max_failing_s is not None and failing > max_failing_s:
                pending = watcher.status()["pending"]
                raise StoreError(
                    f"stopped watching {vault.root}: batches have failed for {failing:.0f} s (the limit is "
                    f"{max_failing_s:g} s): {watcher.last_error}; {_paths(pending)} pending, recorded by the next "
                    "start's catch-up scan"
                )
    if watcher.unwritten:
        raise StoreError(
            f"stopped watching {vault.root} with {_paths(watcher.unwritten)} pending: the final batch could not be "
            f"written ({watcher.last_error}); the next start's catch-up scan records them"
        )
    return watcher


def _paths(count: int) -> str:
    return f"{count} changed path{'s' * (count != 1)}"


def _why(error: object) -> str:
    return f"; {error}" if error else ""


def open_when_reachable(
    open_vault: Callable[[], Vault],
    stop_event: threading.Event,
    *,
    max_outage_s: float,
    say: Callable[[str], object],
    retry_s: float = 2.0,
) -> Vault | None:
    """``open_vault()`` once the database answers: while no server answers (``Unreachable``), say so once and try
    again every ``retry_s`` for up to ``max_outage_s`` (then the last ``Unreachable`` is raised); None when
    ``stop_event`` is set meanwhile. Any other refusal is raised at once."""
    started = time.monotonic()
    waiting = False
    while True:
        try:
            vault = open_vault()
        except Unreachable as exc:
            waited = time.monotonic() - started
            if waited >= max_outage_s:
                raise Unreachable(f"{exc} (waited {waited:.0f} s for it, the limit is {max_outage_s:g} s)") from None
            if not waiting:
                say(f"{exc}; waiting for it (up to {max_outage_s:g} s)")
                waiting = True
            if stop_event.wait(min(retry_s, max(max_outage_s - waited, 0.01))):
                return None
            continue
        if waiting:
            say(f"the database answers after {time.monotonic() - started:.0f} s")
        return vault


def stop_on_signals(stop_event: threading.Event) -> Callable[[], None]:
    """SIGINT/SIGTERM set ``stop_event`` (a second one aborts); returns a function restoring the handlers."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop_event.is_set():
            raise KeyboardInterrupt
        logger.info("%s received: flushing and stopping", signal.Signals(signum).name)
        stop_event.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


__all__ = ["open_when_reachable", "stop_on_signals", "watch"]

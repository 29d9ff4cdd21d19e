"""The writer's heartbeat: how every process reading a vault's store knows whether the vault is current.

The process holding a vault's writer lock publishes a few facts about itself where every reader of the store can
read them (``VaultLock.publish``: a file beside a SQLite database, the ``writers`` row on PostgreSQL, readable by
the least-privilege reader role), never in the vault's history (no batch, nothing an as-of answer reads):

- ``mode``: ``watch`` (a watcher) or ``import`` (a one-shot ``vaultsync import``);
- ``state``: ``watching``, ``failing`` (its batches fail, the vault folder is away, or it lost the lock),
  ``importing`` or ``stopped`` (the watcher stopped: nobody records the folder's changes now);
- ``pending`` and ``lag_s``: the changes it has not recorded yet, and the age of the oldest one;
- ``failing_s``: how long its batches have failed in a row; ``every_s``: how often it publishes.

A watcher publishes every ``every_s`` (``BEAT_S``, or ``$VAULTSYNC_HEARTBEAT_S``) and at once when it starts or
stops failing (at most once a second): one small write every few seconds whatever the rate of edits, never one per
event. ``currency`` is the one rule that reads them (``/ready``, ``vault_status``, ``vaultsync stats``): current
while the watcher's heartbeat is fresh (at most ``stale_after(every_s)`` old, by the clock of the database's server
on PostgreSQL), it records (``watching``) and its oldest unrecorded change is at most ``READY_LAG_S`` old. Nothing
published (no watcher ever ran, and no import is running): unknown (None).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..vault import Vault
    from ..vault.lock import VaultLock

logger = logging.getLogger(__name__)

BEAT_S = 5.0
"""How often a writer publishes its heartbeat (``$VAULTSYNC_HEARTBEAT_S`` overrides it): a dead watcher is found
within ``stale_after(5)``, about 17 s (three beats missed, and slack for a loaded machine or a slow database), well
inside what a load balancer's health check waits, for the cost of one small row update (PostgreSQL) or one
100-byte file (SQLite) every 5 s."""
MIN_GAP_S = 1.0
"""The shortest time between two heartbeats (a change of state is published at once, but no faster than this)."""
STALE_BEATS = 3
STALE_SLACK_S = 2.0
READY_LAG_S = 60.0
"""A vault whose oldest unrecorded change is older than this is not current."""
Published = tuple[dict[str, Any], float]
"""What was published, and its age in seconds (``VaultLock.beat``)."""


def default_beat_s() -> float:
    """``BEAT_S``, or ``$VAULTSYNC_HEARTBEAT_S`` (seconds) when set."""
    value = os.environ.get("VAULTSYNC_HEARTBEAT_S")
    try:
        return max(0.05, float(value)) if value else BEAT_S
    except ValueError:
        return BEAT_S


def stale_after(every_s: float) -> float:
    """How old a heartbeat published every ``every_s`` may be before its writer counts as gone (a few beats
    missed: a process killed, frozen, or cut off from the store)."""
    return STALE_BEATS * every_s + STALE_SLACK_S


@dataclass(frozen=True, slots=True)
class Currency:
    """Whether the vault is current, as its writer's heartbeat tells."""

    current: bool | None
    """True: a watcher records the folder's changes and is not behind; False: it is not; None: nothing was
    published (no watcher ever ran)."""
    state: str | None
    """``watching``, ``failing``, ``importing``, ``stopped``, or ``stale`` (no heartbeat for too long)."""
    heartbeat_age_s: float | None
    """How long ago the writer last published (None: never)."""
    lag_s: float | None
    """The age of the oldest change not recorded yet (0: none waits)."""
    pending: int | None
    """How many changes wait to be recorded (None: unknown, as during an import)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line for a person: e.g. "watching (current): heartbeat 1.2 s ago, 0 changes waiting"."""
        if self.state is None:
            return "none (no watcher ever ran)"
        said = "current" if self.current else "not current"
        age, lag = self.heartbeat_age_s or 0.0, self.lag_s or 0.0
        if self.state == "stopped":
            return f"stopped ({said}): the watcher stopped {age:.1f} s ago"
        if self.state == "importing":
            return f"importing ({said}): heartbeat {age:.1f} s ago, importing for {lag:.1f} s"
        waiting = f"{self.pending} changes waiting, the oldest for {lag:.1f} s"
        return f"{self.state} ({said}): heartbeat {age:.1f} s ago, {waiting}"


UNKNOWN = Currency(None, None, None, None, None)


def currency(published: Published | None) -> Currency:
    """The rule (see the module docstring) over what a writer published and how old it is."""
    if published is None:
        return UNKNOWN
    facts, age = published
    every = _number(facts.get("every_s"), BEAT_S)
    state = str(facts.get("state") or "stale")
    pending = facts.get("pending")
    lag = _number(facts.get("lag_s"), 0.0)
    waiting = pending is None or (isinstance(pending, int) and pending > 0) or lag > 0
    lag += age if waiting and state != "stopped" else 0.0  # still waiting, for all the reader knows
    if state != "stopped" and age > stale_after(every):
        state = "stale"
    current = state == "watching" and lag <= READY_LAG_S
    return Currency(
        current,
        state,
        round(age, 3),
        round(lag, 3),
        pending if isinstance(pending, int) else None,
    )


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


class Heartbeat:
    """Publishes ``facts()`` through ``lock`` every ``every_s`` on a thread of its own, and soon after ``poke``
    (no sooner than ``MIN_GAP_S`` after the last one). A heartbeat that cannot be published is skipped (readers
    then see it age, which is the truth: this writer cannot reach them)."""

    def __init__(self, lock: VaultLock, facts: Callable[[], dict[str, Any]], every_s: float) -> None:
        self.lock, self.facts, self.every_s = lock, facts, every_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.published = 0
        """Heartbeats published so far."""

    def start(self) -> Heartbeat:
        self._stop.clear()
        self._send(self.facts())
        self._thread = threading.Thread(target=self._run, name="vaultsync-heartbeat", daemon=True)
        self._thread.start()
        return self

    def poke(self) -> None:
        """Something readers should learn soon changed (failing began or ended)."""
        self._wake.set()

    def stop(self, last: dict[str, Any] | None) -> None:
        """Stop publishing; publish ``last`` (None: withdraw the heartbeat) while the lock is still held."""
        thread, self._thread = self._thread, None
        self._stop.set()
        self._wake.set()
        if thread is not None:
            thread.join()
        self._send(last)

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.is_set():
            self._wake.wait(max(0.0, last + self.every_s - time.monotonic()))
            if self._stop.is_set():
                return
            if self._wake.is_set():
                self._wake.clear()
                if self._stop.wait(max(0.0, last + MIN_GAP_S - time.monotonic())):
                    return
            last = time.monotonic()
            self._send(self.facts())

    def _send(self, facts: dict[str, Any] | None) -> None:
        try:
            self.lock.publish(facts)
            self.published += 1
        except Exception as exc:  # the store is away: readers see the heartbeat age
            logger.debug("could not publish the heartbeat: %s", exc)


@contextlib.contextmanager
def importing(vault: Vault, every_s: float | None = None) -> Iterator[None]:
    """While a one-shot import holding ``vault``'s writer lock runs: publish that it imports (the vault is not
    current meanwhile); afterwards the vault is as it was: never watched (nothing published), or watched no more
    (``stopped``: no watcher runs, or the import would have been handed to it)."""
    if not vault.lock.held:
        yield
        return
    every = default_beat_s() if every_s is None else every_s
    try:
        previous = vault.lock.beat()
    except Exception:
        previous = None
    watched = previous is not None and (previous[0].get("mode") == "watch" or bool(previous[0].get("watched")))
    started = time.monotonic()

    def facts() -> dict[str, Any]:
        return {
            "mode": "import",
            "state": "importing",
            "every_s": every,
            "watched": watched,
            "pending": None,
            "lag_s": round(time.monotonic() - started, 3),
        }

    beat = Heartbeat(vault.lock, facts, every).start()
    try:
        yield
    finally:
        beat.stop(stopped(every) if watched else None)


def stopped(every_s: float) -> dict[str, Any]:
    """What a watcher that stopped leaves published: nobody records the folder's changes now."""
    return {"mode": "watch", "state": "stopped", "every_s": every_s, "pending": 0, "lag_s": 0.0, "failing_s": 0.0}


__all__ = ["BEAT_S", "READY_LAG_S", "Currency", "Heartbeat", "currency", "default_beat_s", "importing", "stale_after"]

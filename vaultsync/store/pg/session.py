"""Losing the database and finding it again: what every long-lived process (``watch``, ``serve``, ``ui``) does when
its connection is lost (a restart, a failover, ``pg_terminate_backend``, a network drop).

psycopg marks a connection ``closed`` (and ``broken``) once an operation found it lost. ``PgDatabase`` opens a
lost connection again before its next transaction, and when the ``BEGIN`` of a transaction is what found it lost
(nothing was done yet) it tries once more on a new connection: the first request after the database is back
succeeds. A statement that fails later in a transaction is not repeated (the transaction is gone with the
session): its caller gets one line and the next request reconnects.

While the database cannot be reached, ``Reach`` lets a connection be tried at most every ``RETRY_S`` (growing
to ``MAX_RETRY_S``): the requests in between fail at once with one line saying since when, instead of each
waiting out a timeout. The loss is logged once when it begins and once when it ends, however many connections
of the process found it: the stores of one process on one database share their ``Reach`` (``Reach.of``; ``serve
--watch`` has a writer's store and a readers' store), and a connection found lost within ``SAME_OUTAGE_S`` of the
end of an outage belongs to that outage (it was cut by it, and is mended without a word).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any, ClassVar

from ...errors import StoreError, Unreachable

logger = logging.getLogger("vaultsync.store.pg")

RETRY_S = 0.25
"""While the database is away, the first wait before a connection is tried again (doubling each time)."""
MAX_RETRY_S = 2.0
"""The longest wait between two connection attempts while the database is away."""
CONNECT_TIMEOUT_S = 10
"""How long one connection attempt may take (``connect_timeout``), unless the connection string says."""
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}
"""TCP keepalives, unless the connection string says: a session across a dropped network is found lost in about
a minute instead of the system's two hours."""
SAME_OUTAGE_S = 30.0
"""A connection found lost this soon after the database came back was cut by the outage just ended: not news."""
LOST_STATES = ("08", "57P01", "57P02", "57P03")
"""SQLSTATEs (prefixes) of a connection the server ended or cannot give yet: connection exceptions, admin or crash
shutdown, "the database system is starting up"."""


def options(dsn: str) -> dict[str, Any]:
    """psycopg keyword arguments for ``connect``: ``connect_timeout`` and TCP keepalives where the connection string
    does not set them (keyword arguments would override it)."""
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(dsn)
    chosen: dict[str, Any] = {} if "connect_timeout" in given else {"connect_timeout": CONNECT_TIMEOUT_S}
    if "host" in given and not str(given["host"]).startswith("/"):  # TCP (a socket folder has no keepalives)
        chosen.update({k: v for k, v in KEEPALIVES.items() if k not in given})
    return chosen


def lost(raw: Any) -> bool:
    """Whether a psycopg connection is gone (closed, or found lost by its last operation)."""
    return raw is None or bool(raw.closed)


def is_loss(exc: BaseException) -> bool:
    """Whether an error says the session is gone or cannot be had now (not a refusal of the statement)."""
    import psycopg

    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith(LOST_STATES)


def said(exc: BaseException) -> str:
    """The driver's whole message in one line: a refused connection keeps "Connection refused" (its first line) and
    the hint after it, not only the hint."""
    primary = getattr(getattr(exc, "diag", None), "message_primary", None)
    if primary:
        return str(primary)
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    head = lines[0].removeprefix("connection failed: ").removeprefix("connection is bad: ").replace("FATAL:  ", "")
    rest = " ".join(lines[1:])
    return f"{head} ({rest[0].lower()}{rest[1:]})" if rest else head


class Reach:
    """Whether the database answered last time, for one store: says a loss once, its end once, and spaces the
    connection attempts while it lasts (``may_try``)."""

    _shared: ClassVar[weakref.WeakValueDictionary[str, Reach]] = weakref.WeakValueDictionary()
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, where: str) -> Reach:
        """The process's one ``Reach`` for the database ``where`` (its connection string without password)."""
        with cls._shared_lock:
            reach = cls._shared.get(where)
            if reach is None:
                reach = cls._shared[where] = cls(where)
            return reach

    def __init__(self, where: str) -> None:
        self.where = where
        self.since: float | None = None
        """``time.monotonic()`` when the database was found unreachable (None: it answers)."""
        self.why: str | None = None
        self.losses = 0
        """How many times the connection was lost (each outage counts once)."""
        self._next_try = 0.0
        self._wait = RETRY_S
        self._lock = threading.Lock()
        self._ended: float | None = None
        """``time.monotonic()`` when the last outage ended."""
        self._quiet = False
        """This outage is the tail of the last one (a connection it cut, found later): neither end is said."""

    @property
    def down(self) -> bool:
        return self.since is not None

    def seconds(self) -> float:
        """How long the database has been unreachable (0 while it answers)."""
        since = self.since
        return 0.0 if since is None else time.monotonic() - since

    def lost(self, why: str) -> None:
        """The connection was lost, or an attempt to connect failed: say it if it is news."""
        with self._lock:
            self.why = why
            if self.since is None:
                self.since = time.monotonic()
                self.losses += 1
                self._next_try, self._wait = 0.0, RETRY_S  # the first attempt right away
                ended = self._ended
                self._quiet = ended is not None and self.since - ended < SAME_OUTAGE_S
                if not self._quiet:
                    logger.warning("lost the connection to the database %s (%s); reconnecting", self.where, why)

    def failed(self, why: str) -> None:
        """An attempt to connect failed: the next one waits longer (up to ``MAX_RETRY_S``). The database is away
        again: that is news, even soon after it came back."""
        self.lost(why)
        with self._lock:
            if self._quiet:
                self._quiet = False
                logger.warning("lost the connection to the database %s (%s); reconnecting", self.where, why)
            self._next_try = time.monotonic() + self._wait
            self._wait = min(MAX_RETRY_S, self._wait * 2)

    def back(self) -> None:
        """A connection was made: say so if the database had been away."""
        if self.since is None:  # the usual case, after every transaction: no lock taken
            return
        with self._lock:
            if self.since is None:
                return
            self._ended = time.monotonic()
            away, self.since, self.why = self._ended - self.since, None, None
            quiet, self._quiet = self._quiet, False
        if not quiet:
            logger.warning("reconnected to the database %s after %.1f s", self.where, away)

    def check(self) -> None:
        """Before a connection attempt: StoreError at once, in one line, while the last failure is recent."""
        with self._lock:
            if self.since is None or time.monotonic() >= self._next_try:
                return
            away, why = time.monotonic() - self.since, self.why
        raise Unreachable(
            f"cannot use the database {self.where}: unreachable for {away:.0f} s ({why}); "
            "reconnecting, try again shortly"
        )


def connect(dsn: str, where: str, reach: Reach | None = None, *, application_name: str) -> Any:
    """A new autocommit session (StoreError in one line when none can be had); ``reach`` learns of the outcome."""
    import psycopg

    if reach is not None:
        reach.check()
    try:
        raw = psycopg.connect(dsn, autocommit=True, application_name=application_name, **options(dsn))
    except psycopg.Error as exc:
        why = said(exc)
        if reach is not None and is_loss(exc):
            reach.failed(why)
        if isinstance(exc, psycopg.OperationalError) and getattr(exc, "sqlstate", None) in (None, "57P03"):
            raise Unreachable(f"cannot use the database {where}: {why}") from None
        raise StoreError(f"the database {where} refused: {why}") from None
    if reach is not None:
        reach.back()
    return raw


__all__ = ["Reach", "connect", "is_loss", "lost", "options", "said"]

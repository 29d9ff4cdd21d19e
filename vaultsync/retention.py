"""Retention policies: which recorded moments of a vault's history to keep as the history ages.

A policy names, for each tier, the age up to which it applies, measured back from now::

    keep_all=1d hourly=7d daily=90d weekly=forever

- ``keep_all``: every batch younger than this is kept (every state the store ever answered stays);
- ``hourly``, ``daily``, ``weekly``: among batches older than the tier before, and younger than this, the
  last batch of each UTC hour, UTC day or ISO week (Monday 00:00 UTC) is kept: the vault's state at the end of
  that hour, day or week stays exact;
- the last tier's age, unless ``forever``, is a horizon: history older than that is forgotten, as
  ``purge --before`` forgets it (the state at the horizon stays).

A tier left out applies to nothing. The latest batch is always kept (it is the vault as it is now). Thinning
then merges every batch that is not kept into the next kept one (``store/thin.py``): asked about a moment that
was thinned away, the store answers with the state of the kept moment before it.

Pure: batches and times in, a ``Plan`` out; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import ConfigError

HOUR = 3_600_000_000
DAY = 24 * HOUR
WEEK = 7 * DAY
_UNITS = {"h": HOUR, "d": DAY, "w": WEEK}
TIERS = ("keep_all", "hourly", "daily", "weekly")
"""The tiers, youngest first; each but ``keep_all`` keeps one state per bucket of its name."""
BUCKET = {"hourly": HOUR, "daily": DAY, "weekly": WEEK}
_WEEK_SHIFT = 3 * DAY
"""1970-01-01 was a Thursday: shifting by three days puts every ISO week's Monday on a multiple of a week."""
FOREVER = None
EXAMPLE = "keep_all=1d hourly=7d daily=90d weekly=forever"
_TERM = re.compile(r"(\w+)=(forever|\d+[hdw])")


@dataclass(frozen=True, slots=True)
class Policy:
    """A retention policy: each tier's age limit in microseconds (``None``: forever; a tier left out: 0)."""

    keep_all: int | None = 0
    """Every batch younger than this is kept."""
    hourly: int | None = 0
    """Up to this age, the last batch of each UTC hour is kept."""
    daily: int | None = 0
    """Up to this age, the last batch of each UTC day is kept."""
    weekly: int | None = 0
    """Up to this age, the last batch of each ISO week is kept."""
    text: str = ""
    """The policy as written (normalized)."""

    def limits(self) -> list[tuple[str, int | None]]:
        """(tier, age limit) of the tiers that apply to something, youngest first; the last may be forever."""
        out: list[tuple[str, int | None]] = []
        floor = 0
        for tier in TIERS:
            limit = getattr(self, tier)
            if limit is None or limit > floor:
                out.append((tier, limit))
            if limit is None:
                break
            floor = max(floor, limit)
        return out

    @property
    def forgets(self) -> int | None:
        """The age beyond which history is forgotten (None: kept forever, thinned)."""
        limits = self.limits()
        return limits[-1][1] if limits else 0


def parse_policy(text: str) -> Policy:
    """A policy from its text (``EXAMPLE``); ConfigError, naming what is wrong, otherwise."""
    terms = [t for t in re.split(r"[\s,;]+", text.strip()) if t]
    if not terms:
        raise ConfigError(f"empty retention policy: write e.g. {EXAMPLE!r}", argument="policy")
    found: dict[str, int | None] = {}
    for term in terms:
        match = _TERM.fullmatch(term.lower())
        if match is None or match.group(1) not in TIERS:
            raise ConfigError(
                f"invalid retention term {term!r}: write tier=age with tiers {', '.join(TIERS)} and ages like "
                f"36h, 7d, 12w or forever, e.g. {EXAMPLE!r}",
                argument="policy",
            )
        tier, age = match.groups()
        if tier in found:
            raise ConfigError(f"retention tier {tier} given twice", argument="policy")
        found[tier] = None if age == "forever" else int(age[:-1]) * _UNITS[age[-1]]
    given = [t for t in TIERS if t in found]
    for younger, older in zip(given, given[1:]):
        young, old = found[younger], found[older]
        if young is None:
            raise ConfigError(f"retention tier {older} follows {younger}=forever, so it applies to nothing")
        if old is not None and old < young:
            raise ConfigError(f"retention ages grow tier by tier: {older} is shorter than {younger}")
    if all(v == 0 for v in found.values()):
        raise ConfigError("a retention policy that keeps nothing: give at least one tier a positive age")
    normalized = " ".join(f"{t}={_age_text(found[t])}" for t in given)
    return Policy(**found, text=normalized)


def _age_text(age: int | None) -> str:
    if age is None:
        return "forever"
    for unit, size in (("w", WEEK), ("d", DAY)):
        if age % size == 0 and age:
            return f"{age // size}{unit}"
    return f"{age // HOUR}h"


@dataclass(slots=True)
class Plan:
    """What a policy keeps of a vault's batches at one moment."""

    kept: list[int]
    """The batch ids kept, in order: every other batch is merged into the next kept one."""
    horizon: int | None
    """History before this time is forgotten (None: nothing is)."""
    batches: int
    """How many batches the vault has."""

    @property
    def thinned(self) -> int:
        """How many batches go."""
        return self.batches - len(self.kept)


def bucket_of(tier: str, known_at: int) -> int:
    """The bucket (hour, day or ISO week number since the epoch) a time falls in for a tier."""
    if tier == "weekly":
        return (known_at + _WEEK_SHIFT) // WEEK
    return known_at // BUCKET[tier]


def plan(policy: Policy, batches: Iterable[tuple[int, int]], now: int) -> Plan:
    """The batches ``policy`` keeps at ``now`` of ``batches`` ((id, known_at), ordered by id: known_at never
    decreases). A batch is kept when it is younger than ``keep_all``, or the last of its bucket in its tier, or
    the last of all; beyond a finite last tier only the state at the horizon stays."""
    rows = list(batches)
    limits = policy.limits()
    forgets = policy.forgets
    horizon = None if forgets is None else now - forgets
    last_of: dict[tuple[str, int], int] = {}
    kept: set[int] = set()
    at_horizon: int | None = None
    for batch_id, known_at in rows:
        if horizon is not None and known_at <= horizon:
            at_horizon = batch_id  # the last batch at or before the horizon: the state there stays
            continue
        age = now - known_at
        floor = 0
        for tier, limit in limits:
            if limit is None or age < limit:
                if tier == "keep_all":
                    kept.add(batch_id)
                elif age >= floor:
                    last_of[(tier, bucket_of(tier, known_at))] = batch_id
                break
            floor = limit
    kept.update(last_of.values())
    if at_horizon is not None:
        kept.add(at_horizon)
    if rows:
        kept.add(rows[-1][0])
    return Plan(sorted(kept), horizon if at_horizon is not None else None, len(rows))

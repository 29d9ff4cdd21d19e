"""Which migrations a database has: both engines record them by name, and a database from before names is read
by its shape.

A migration is named by its function's name without its number (``m009_moves`` is ``moves``): numbers changed
when branches merged (one commit's ``m009`` was ``write_requests``, a later one's ``moves``), so a number says
nothing about what a database holds; a name does. The set a database records is compared with this vaultsync's
list: what it lacks is applied, in list order, whatever number it had elsewhere.

A database written before names were recorded has only a count (SQLite's ``user_version``, PostgreSQL's
``vaultsync_schema`` rows without a name). Every schema this repository produced began with the same
``COMMON_PREFIX`` migrations on both engines; the ones after it were numbered differently on different commits,
so each of those is found by its shape (``PROBES``: the items it adds, or ``no X`` for one it drops). Those
migrations are safe to run again, so one whose items are missing is applied again even where it is recorded (a
repair). What remains missing after that is refused in one line (``shape.refuse_unless_whole``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import SchemaError
from .shape import Shape

COMMON_PREFIX = 8
"""The first eight migrations are the same, in the same order, in every schema either engine ever had."""


def name_of(step: Callable[[Any], None]) -> str:
    """``m009_moves`` -> ``moves``: a migration's identity, whatever its number."""
    return step.__name__.split("_", 1)[1]


@dataclass(frozen=True, slots=True)
class State:
    """A database's migrations beside this vaultsync's."""

    applied: list[str]
    """The known migrations the database has, in this vaultsync's order."""
    missing: list[str]
    """This vaultsync's migrations the database lacks (or whose items are missing), in order."""
    unknown: list[str]
    """Migrations the database records that this vaultsync does not know (a newer one wrote it)."""
    legacy: bool = False
    """The database records a count, not names (written before names were recorded)."""


def state(
    names: list[str], probes: Mapping[str, Iterable[str]], shape: Shape, recorded: list[str] | None, count: int
) -> State:
    """Compare a database with this vaultsync's ``names``: ``recorded`` names, or None with ``count`` (a database
    from before names); ``probes`` the items of each migration after ``COMMON_PREFIX`` (found in ``shape``; none: a
    migration no shape shows, which a database from before names lacks)."""

    def present(name: str) -> bool:
        return name not in probes or not unmet(probes[name], shape)

    legacy = recorded is None
    if recorded is None:
        recorded = names[: min(count, COMMON_PREFIX)]
        if count > COMMON_PREFIX:
            recorded += [name for name in names[COMMON_PREFIX:] if probes.get(name) and present(name)]
    has = set(recorded)
    applied = [name for name in names if name in has and present(name)]
    return State(
        applied=applied,
        missing=[name for name in names if name not in applied],
        unknown=[name for name in recorded if name not in names],
        legacy=legacy,
    )


def refuse_newer(where: str, found: State, *, count: int = 0, known: int = 0) -> None:
    """SchemaError when a newer vaultsync wrote the database (migrations this one does not know)."""
    if found.unknown:
        raise SchemaError(
            f"{where} was written by a newer vaultsync (it has migrations this one does not know: "
            f"{', '.join(found.unknown)}); upgrade vaultsync"
        )
    if count > known:
        raise SchemaError(f"{where} was written by a newer vaultsync (schema {count}); upgrade vaultsync")


def unmet(probe: Iterable[str], shape: Shape) -> list[str]:
    """What a migration's probe finds not so in ``shape``, sorted: each item it adds that is missing, and each one it
    drops (``no X``) that is still there (``X still there``)."""
    return sorted(
        f"{item[3:]} still there" if item.startswith("no ") else item
        for item in probe
        if (item[3:] in shape if item.startswith("no ") else item not in shape)
    )


def check_probes(names: list[str], probes: Mapping[str, Iterable[str]]) -> None:
    """Every migration after the common prefix is found by its shape (a test calls this for both engines)."""
    unprobed = [name for name in names[COMMON_PREFIX:] if name not in probes]
    assert not unprobed, f"migrations after the common prefix need a probe: {unprobed}"


def problems(
    found: State, actual: Shape, expected: Shape, probes: Mapping[str, Iterable[str]], *, on_write: bool
) -> list[str]:
    """What ``check`` reports of a schema: each migration it lacks (unless ``on_write``: the engine applies them when
    it is next opened for writing), with the items that show it; else each table, column, index or trigger missing."""
    from .shape import lacking

    if found.missing:
        if on_write:
            return []
        shown = {name: ", ".join(unmet(probes.get(name, ()), actual)) for name in found.missing}
        return [
            f"the schema lacks the migration {name}"
            + (f" ({shown[name]})" if shown[name] else "")
            + ": writers refuse it until it is migrated"
            for name in found.missing
        ]
    return [f"the schema lacks {item}" for item in lacking(actual, expected)]

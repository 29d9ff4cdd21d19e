"""Knowledge and validity times: parsing the accepted forms, storing as UTC microseconds."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any, overload

from .errors import ConfigError

ACCEPTED = (
    "YYYY-MM-DD (midnight UTC) or ISO 8601 with an explicit offset, e.g. 2024-03-01T12:00:00Z or "
    "2024-03-01T12:00:00+02:00"
)
FRACTION_DIGITS = 9
"""The most digits a fraction of a second may have (nanoseconds, as ``date +%N`` prints them). Times are kept to
the microsecond: digits beyond the sixth are dropped, which moves a time back to the microsecond it falls in, so
``known_at <= T`` and ``known_at > T`` answer for the truncated time exactly as for the time given (every batch
time is a whole microsecond)."""

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(
    rf"\d{{4}}-\d{{2}}-\d{{2}}[T ]\d{{2}}:\d{{2}}(:\d{{2}}(\.\d{{1,{FRACTION_DIGITS}}})?)?(Z|z|[+-]\d{{2}}:?\d{{2}})"
)
_OFFSET = re.compile(r"([+-])(\d{2}):?(\d{2})$")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def parse_time(value: str, what: str = "time") -> int:
    """Parse an accepted time form into UTC microseconds since the epoch.

    Anything else, including impossible dates, raises ConfigError naming the accepted forms.
    """
    text = str(value).strip()
    offset = _OFFSET.search(text)
    if offset and _DATETIME.fullmatch(text) and (int(offset.group(2)) >= 24 or int(offset.group(3)) >= 60):
        raise ConfigError(
            f"invalid {what} {value!r} (UTC offset {offset.group(1)}{offset.group(2)}:{offset.group(3)} "
            f"is not between -23:59 and +23:59): use {ACCEPTED}"
        )
    try:
        if _DATE.fullmatch(text):
            moment = dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)
        elif _DATETIME.fullmatch(text):
            moment = dt.datetime.fromisoformat(_to_micro(text.replace("z", "Z")))
        else:
            raise ValueError("unrecognised form")
        return to_micros(moment)
    except (ValueError, OverflowError) as exc:  # OverflowError: shifting by the offset leaves years 1-9999
        reason = "" if str(exc) == "unrecognised form" else f" ({exc})"
        raise ConfigError(f"invalid {what} {value!r}{reason}: use {ACCEPTED}") from None


def _to_micro(text: str) -> str:
    """``text`` with its fraction of a second cut to six digits (``FRACTION_DIGITS``: truncated, never rounded up)."""
    return re.sub(r"(\.\d{6})\d+", r"\1", text, count=1)


def to_micros(moment: dt.datetime) -> int:
    """An aware datetime as integer microseconds since the Unix epoch (UTC)."""
    delta = moment.astimezone(dt.UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> dt.datetime:
    """Integer microseconds since the epoch as an aware UTC datetime."""
    return _EPOCH + dt.timedelta(microseconds=micros)


@overload
def format_time(micros: int) -> str: ...
@overload
def format_time(micros: None) -> None: ...
def format_time(micros: int | None) -> str | None:
    """ISO 8601 in UTC with a trailing Z; microseconds shown only when present."""
    if micros is None:
        return None
    moment = from_micros(micros)
    spec = "microseconds" if moment.microsecond else "seconds"
    return moment.isoformat(timespec=spec).replace("+00:00", "Z")


RECENT_DAYS = 7
"""A window of changes asked without its start (``changes``, ``list_changes``) is this many days."""


def recent(until: int | None) -> int:
    """The start of the default window of changes: ``RECENT_DAYS`` before ``until`` (None: now)."""
    return (until if until is not None else now_micros()) - RECENT_DAYS * 86_400_000_000


def now_micros() -> int:
    """The current wall-clock time in UTC microseconds."""
    return to_micros(dt.datetime.now(dt.UTC))


def next_stamp(last: int | None) -> int:
    """A new batch's ``known_at``: now, or one microsecond after the vault's ``last`` batch when the clock reads
    no later than it (stepped back, or a second batch in the same microsecond), so batch times strictly grow."""
    now = now_micros()
    return now if last is None else max(now, last + 1)


TimeLike = str | int | dt.datetime | None
"""What the library accepts as a time: an accepted string form, UTC microseconds, an aware datetime, or None."""


EARLIEST = to_micros(dt.datetime.min.replace(tzinfo=dt.UTC))
"""0001-01-01T00:00:00Z in microseconds: the earliest time there is (as ``LATEST`` the latest)."""
LATEST = to_micros(dt.datetime.max.replace(tzinfo=dt.UTC))
"""9999-12-31T23:59:59.999999Z in microseconds."""


def as_micros(value: TimeLike, what: str = "time") -> int | None:
    """A ``TimeLike`` as UTC microseconds (None stays None); ``what`` names the argument in errors.

    Integer microseconds outside years 1 to 9999 (``EARLIEST``, ``LATEST``) are an impossible date: ConfigError.
    """
    if value is None:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if not EARLIEST <= value <= LATEST:
            shown = str(value) if len(str(value)) <= 30 else str(value)[:30] + "…"
            why = "microseconds since 1970 outside the years 1 to 9999"
            raise ConfigError(f"invalid {what} {shown} ({why}): use {ACCEPTED}")
        return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise ConfigError(f"{what} needs a time zone")
        return to_micros(value)
    if not isinstance(value, str):
        raise ConfigError(f"invalid {what} {value!r}: use {ACCEPTED}")
    return parse_time(value, what)


def validity(frontmatter: Mapping[str, Any] | None, warnings: list[str]) -> tuple[int | None, int | None]:
    """A note's validity interval from its frontmatter ``valid_from`` / ``valid_to`` (half-open; None: open).

    A value that is not an accepted time form is ignored, with a warning appended to ``warnings``.
    """
    out: list[int | None] = []
    for key in ("valid_from", "valid_to"):
        value = (frontmatter or {}).get(key)
        if value in (None, ""):
            out.append(None)
            continue
        try:
            out.append(parse_time(str(value), key))
        except ConfigError as exc:
            warnings.append(str(exc))
            out.append(None)
    return out[0], out[1]

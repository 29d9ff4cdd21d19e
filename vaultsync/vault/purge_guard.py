"""What ``Vault.purge`` refuses before it forgets anything: a cutoff in the future, and what the next sync would
store again (text still in a note file, a note file still on disk) unless the current revisions go too."""

from __future__ import annotations

from pathlib import Path

from ..disk.folder import files_containing
from ..errors import ConfigError
from ..store.purge import check_strings as purge_strings_checked
from ..times import TimeLike, as_micros, now_micros


def purge_cutoff(before: TimeLike) -> int | None:
    """``before`` in microseconds (None: not given); ConfigError when it is in the future."""
    when = as_micros(before, "before")
    if when is not None and when > now_micros():
        raise ConfigError("before is in the future: retention keeps what was visible at a past time", argument="before")
    return when


def check_current(root: Path, texts: list[str] | None, rel: str | None, also_current: bool) -> None:
    """ConfigError when, unless ``also_current``, a note file in ``root`` still contains one of ``texts`` or the note
    file ``rel`` is still there: the next sync would store it again."""
    if texts and not also_current:
        found = files_containing(root, purge_strings_checked(texts))
        if found:
            raise ConfigError(
                f"{len(found)} note file(s) in the vault still contain that text "
                f"({', '.join(found[:3])}{', …' if len(found) > 3 else ''}); the next sync "
                "would store it again: remove it from the files first, or purge the "
                "current revisions too",
                argument="also_current",
            )
    if rel is not None and not also_current and (root / rel).exists():
        raise ConfigError(
            f"the note file {rel} is still in the vault; the next sync would store it "
            "again: delete it first, or purge it anyway",
            argument="also_current",
        )

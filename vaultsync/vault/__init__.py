"""The library API and what it is made of: ``Vault`` (``api``) and the helpers it calls.

- ``api``: the ``Vault`` object every door (CLI, watcher, MCP server) calls;
- ``opener``: which database and vault a ``Vault.open`` names, and whether the folder may be recorded there;
- ``lock``: the vault's writer lock, across processes and in this one;
- ``recorder``: a scan of the folder, or a git history, recorded as batches;
- ``lookup``: a note in a view as of some time, or the reason it is not there;
- ``lookback``: deleted notes, a past state as a folder, who changed a line;
- ``restore``: a note, folder or batch brought back as one new batch;
- ``purge_guard``: what ``Vault.purge`` refuses before it forgets anything;
- ``pending``: write requests another process left unfinished, carried out whole or not at all;
- ``parse_warnings``: a note's parse warnings, told once per text.

Importing this package is cheap: ``Vault`` and ``Note`` load the store on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import Note, Vault

__all__ = ["Note", "Vault"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

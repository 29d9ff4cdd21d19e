"""What a connection has found of the database's schema: the relations a migration adds, asked once per connection.

A reader of this vaultsync reads a database that may not have taken every migration yet (``schema.READABLE_FROM``),
and picks its SQL by what is there (``ranking.compact``, ``postings.bucketed``, ``live.pgvector_schema``). Asking
the catalog on every search costs a round trip each; a migration never takes away what is looked for this way, so a
yes holds for the connection's life. A no is asked again: the database may be migrated while the connection is open.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

_SEEN: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
"""Each connection's answers found (psycopg connections; dropped with them)."""


def remembered(raw: Any, key: str, ask: Callable[[], Any]) -> Any:
    """``ask()``'s answer about the schema, asked of the database until it is not None, then remembered for the
    connection's life (what a migration adds is never taken away by a later one)."""
    seen = _SEEN.get(raw)
    if seen is not None and key in seen:
        return seen[key]
    found = ask()
    if found is not None:
        _SEEN.setdefault(raw, {})[key] = found
    return found


def has(raw: Any, relation: str) -> bool:
    """Whether the database (its ``search_path``) has ``relation``, a table or index some migration adds."""

    def ask() -> bool | None:
        return raw.execute("SELECT to_regclass(%s) IS NOT NULL", (relation,)).fetchone()[0] or None

    return bool(remembered(raw, f"relation {relation}", ask))

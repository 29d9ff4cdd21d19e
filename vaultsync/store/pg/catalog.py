"""What a connection has found of the database's schema: the relations a migration adds, asked once per connection.

A reader of this vaultsync reads a database that may not have taken every migration yet (``schema.READABLE_FROM``),
and picks its SQL by what is there (``ranking.compact``, ``postings.bucketed``). Asking the catalog on every search
costs a round trip each; a migration never takes away a relation looked for this way, so a yes holds for the
connection's life. A no is asked again: the database may be migrated while the connection is open.
"""

from __future__ import annotations

import weakref
from typing import Any

_SEEN: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
"""Each connection's relations found (psycopg connections; dropped with them)."""


def has(raw: Any, relation: str) -> bool:
    """Whether the database (its ``search_path``) has ``relation``, a table or index some migration adds."""
    seen = _SEEN.get(raw)
    if seen is not None and relation in seen:
        return True
    if not raw.execute("SELECT to_regclass(%s) IS NOT NULL", (relation,)).fetchone()[0]:
        return False
    _SEEN.setdefault(raw, set()).add(relation)
    return True

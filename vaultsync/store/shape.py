"""What a database's schema holds, as a set of items both engines describe alike, and what this vaultsync expects.

A shape is a frozenset of strings: ``table T``, ``column T.c``, ``index I``, ``trigger G`` (and, on SQLite,
``autoincrement T``). ``expected_shape.py`` holds the shape a fresh database of each engine has after every
migration (a test builds both and compares); ``lacking`` is what a database's shape misses of it. Extra items
are allowed (an optional extension's columns, an administrator's own index): only a missing one makes a schema
that this vaultsync cannot write, and the one line that refuses it names them.
"""

from __future__ import annotations

from typing import Any

from ..errors import SchemaError

Shape = frozenset[str]

SHOWN = 6
"""How many missing items a refusal names (the rest are counted)."""


def sqlite_shape(con: Any) -> Shape:
    """The shape of a SQLite database's main schema (an apsw connection)."""
    items: set[str] = set()
    for name, kind in con.execute("SELECT name, type FROM pragma_table_list WHERE schema = 'main'").fetchall():
        if kind not in ("table", "virtual") or name.startswith("sqlite_"):
            continue
        items.add(f"table {name}")
        items.update(f"column {name}.{row[1]}" for row in con.execute(f'PRAGMA table_info("{name}")').fetchall())
    for kind, name, sql in con.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE type IN ('index', 'trigger', 'table') AND sql IS NOT NULL"
    ).fetchall():
        if kind != "table":
            items.add(f"{kind} {name}")
        elif "AUTOINCREMENT" in sql.upper():
            items.add(f"autoincrement {name}")
    return frozenset(items)


PG_SHAPE = """
SELECT 'table ' || c.relname FROM pg_class c
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
UNION ALL
SELECT 'column ' || c.relname || '.' || a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
      AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'index ' || c.relname FROM pg_class c
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('i', 'I')
UNION ALL
SELECT 'trigger ' || t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
"""


def pg_shape(con: Any) -> Shape:
    """The shape of the PostgreSQL schema a connection's search_path selects (a psycopg connection)."""
    return frozenset(row[0] for row in con.execute(PG_SHAPE).fetchall())


def lacking(actual: Shape, expected: Shape) -> list[str]:
    """What ``actual`` misses of ``expected``, sorted (a missing table's columns go with it)."""
    missing = expected - actual
    tables = {item.split(" ", 1)[1] for item in missing if item.startswith("table ")}
    return sorted(
        item
        for item in missing
        if not (item.startswith("column ") and item.split(" ", 1)[1].split(".", 1)[0] in tables)
    )


def refuse_unless_whole(where: str, actual: Shape, expected: Shape) -> None:
    """SchemaError, in one line, when ``actual`` lacks any item of ``expected``."""
    missing = lacking(actual, expected)
    if not missing:
        return
    shown = ", ".join(missing[:SHOWN]) + (f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else "")
    raise SchemaError(
        f"{where}: its schema lacks {shown}, which this vaultsync needs: it was changed outside vaultsync, "
        "or by a version whose migrations this one cannot repair; restore it from a backup "
        "(or copy its vaults into a new database with a vaultsync that can still open it)"
    )

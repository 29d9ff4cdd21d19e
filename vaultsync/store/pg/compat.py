"""The SQLite engine's reads and writes, run on PostgreSQL: a connection with apsw's calling shape.

The read code of the store (``store/read.py``, ``view.py``, ``timeline.py``, ``provenance.py``) and the
batch writer (``write.py``) are written once, in SQL both engines speak, with apsw's conventions: ``?``
and ``:name`` parameters, ``execute(...).fetchone()``, ``last_insert_rowid()``. ``Con`` gives a psycopg
connection that shape, so those modules run unchanged and the answers of both engines come from the same
code. What is translated, and nothing else:

- parameters: ``?`` → ``%s``, ``:name`` → ``%(name)s`` (a literal ``%`` doubled);
- ``json_each(x)`` → ``json_array_elements_text(x::json)`` (its ``value`` column, as text; cast where a
  column named ``id`` or ``…_id`` is compared; ``c IN (SELECT value FROM json_each(x))`` → ``c = ANY(ARRAY(…))``),
  and SQLite's ``CROSS JOIN … ON`` (a join-order hint) → ``JOIN … ON``, ``INDEXED BY x`` dropped;
- ``LIMIT ?`` takes SQLite's -1 (no limit) as NULL; ``group_concat(x, char(10))`` is ``string_agg``;
- a few statements with no common form, replaced whole (``EXACT``) or in part (``PARTS``);
- ``INSERT`` into a table with an ``id`` gets ``RETURNING id``: ``last_insert_rowid()`` answers it.

A statement that does not translate fails loudly in PostgreSQL; the contract tests run every path.
"""

from __future__ import annotations

import functools
import re
from typing import Any

ID_TABLES = frozenset({"vaults", "batches", "dictionaries", "texts", "blobs", "notes", "chunks", "purges"})

EXACT: dict[str, str] = {
    "INSERT OR REPLACE INTO file_state (vault_id, path, size, mtime_ns, content_hash) VALUES (?,?,?,?,?)": (
        "INSERT INTO file_state (vault_id, path, size, mtime_ns, content_hash) VALUES (%s,%s,%s,%s,%s) "
        "ON CONFLICT (vault_id, path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, "
        "content_hash = excluded.content_hash"
    ),
    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?": (
        "SELECT 1 FROM pg_class WHERE oid = to_regclass(%s) AND relkind IN ('r', 'p')"
    ),
}
"""SQLite statements with no common form, by their exact text, and what runs instead."""

PARTS: dict[str, str] = {
    # search.snapshot.rows_source by docs: the rows of the given docs by the doc index (joined to the list,
    # the planner guesses 100 items and hashes every chunk row ever written: 60-90 ms a query on a long history)
    (
        "SELECT r.id, r.doc_id, r.note_id FROM (SELECT value FROM json_each(:docs)) j "
        "JOIN search_rows r INDEXED BY search_rows_by_doc ON r.doc_id = j.value WHERE r.vault_id = :v"
    ): (
        "SELECT r.id, r.doc_id, r.note_id FROM search_rows r WHERE r.doc_id = ANY(ARRAY(SELECT value::bigint "
        "FROM json_array_elements_text(:docs::json) AS value)) AND r.vault_id = :v"
    ),
    # the same for pg.ranking's candidate docs (a CTE the planner guesses at 200 rows)
    (
        "SELECT r.id, r.doc_id, r.note_id FROM (SELECT doc AS value FROM cand) j "
        "JOIN search_rows r INDEXED BY search_rows_by_doc ON r.doc_id = j.value WHERE r.vault_id = :v"
    ): (
        "SELECT r.id, r.doc_id, r.note_id FROM search_rows r WHERE r.doc_id = ANY(ARRAY(SELECT doc FROM cand)) "
        "AND r.vault_id = :v"
    ),
    "SELECT value FROM json_each(:docs)": (
        "SELECT value::bigint AS value FROM json_array_elements_text(:docs::json) AS value"
    ),
}
"""Parts of statements with no common form (``search.snapshot.DOCS_PARAM``: doc ids), replaced first."""

_IN_JSON = re.compile(r"(\w+)((?: NOT)?) IN \(SELECT value FROM json_each\((\?|:\w+)\)\)")
_JSON_EACH = re.compile(r"json_each\((\?|:\w+)\)")
_CROSS = re.compile(r"CROSS JOIN (\w+ \w+ ON)")
_INDEXED_BY = re.compile(r" INDEXED BY \w+")
_LIMIT = re.compile(r"LIMIT (\?|:\w+)")
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_INSERT = re.compile(r"^\s*INSERT INTO (\w+)", re.IGNORECASE)


def _in_list(match: re.Match[str]) -> str:
    """``x IN (SELECT value FROM json_each(?))``: the list's items as bigint for an id column, else text, as
    ``x = ANY(ARRAY(…))`` (``<> ALL`` when negated): the planner looks each item up by an index on ``x``
    rather than hashing a guessed 100 items against a scan of the whole table."""
    column, negated, param = match.groups()
    value = "value::bigint" if column == "id" or column.endswith("_id") else "value"
    test = "<> ALL" if negated else "= ANY"
    return f"{column} {test}(ARRAY(SELECT {value} FROM json_array_elements_text({param}::json) AS value))"


@functools.lru_cache(maxsize=1024)
def translate(sql: str) -> tuple[str, bool]:
    """The PostgreSQL text of an SQLite statement, and whether it returns the new row's id."""
    if sql in EXACT:
        return EXACT[sql], False
    out = sql.replace("%", "%%")
    for old, new in PARTS.items():
        out = out.replace(old, new)
    out = _IN_JSON.sub(_in_list, out)
    out = _JSON_EACH.sub(r"json_array_elements_text(\1::json)", out)
    out = _INDEXED_BY.sub("", out)  # first: ``CROSS JOIN t x INDEXED BY i ON`` is then a plain join too
    out = _CROSS.sub(r"JOIN \1", out)
    out = _LIMIT.sub(r"LIMIT NULLIF(\1, -1)", out)
    out = out.replace("group_concat(", "string_agg(").replace("char(10)", "chr(10)")
    out = out.replace("?", "%s")
    out = _NAMED.sub(r"%(\1)s", out)
    insert = _INSERT.match(out)
    returning = insert is not None and insert.group(1) in ID_TABLES and "RETURNING" not in out.upper()
    if returning:
        out = out.rstrip().rstrip(";") + " RETURNING id"
    return out, returning


class Con:
    """A psycopg connection in apsw's shape, for the engine-neutral store code (see the module docstring)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self._last_id: int | None = None

    def execute(self, sql: str, params: Any = ()) -> Any:
        text, returning = translate(sql)
        cursor = self.raw.execute(text, params)  # even (): the doubled % are read as one
        if returning:
            self._last_id = int(cursor.fetchone()[0])
        return cursor

    def executemany(self, sql: str, rows: Any) -> None:
        text, _ = translate(sql)
        with self.raw.cursor() as cursor:
            cursor.executemany(text, list(rows))

    def insert_many(self, sql: str, rows: list[tuple]) -> list[int]:
        """``sql`` (an INSERT of one row into a table with an ``id``) run for each of ``rows``, sent together
        (psycopg's pipeline): the new ids in order, as one statement each would have taken them."""
        text, returning = translate(sql)
        assert returning, f"not an INSERT returning an id: {sql}"
        if not rows:
            return []
        ids: list[int] = []
        with self.raw.cursor() as cursor:
            cursor.executemany(text, rows, returning=True)
            while True:
                ids.append(int(cursor.fetchone()[0]))
                if not cursor.nextset():
                    break
        self._last_id = ids[-1]
        return ids

    def last_insert_rowid(self) -> int:
        assert self._last_id is not None, "no INSERT returned an id on this connection"
        return self._last_id

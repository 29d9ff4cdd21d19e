"""Connection strings: which ``--db`` names PostgreSQL, and the same string with no credential in it.

The one place that decides both (cheap to import: a refused start imports nothing heavy). PostgreSQL is named by a
libpq connection URI, ``postgresql://…`` or ``postgres://…``, and by nothing else: anything else is a SQLite file's
path, ``a://b.db`` and ``host=db dbname=team`` too (libpq's keyword form is not taken: what is said here about
credentials holds for URIs), and so is SQLAlchemy's ``postgresql+psycopg://…``, which libpq does not read. A
connection URI may
carry a password (``postgresql://team:secret@db/x``, or ``?password=…``); nothing vaultsync stores, shows another
role or sends a client carries one. ``public`` drops the user info and every secret parameter (what
``pg_stat_activity``, the ``writers`` table, a lock file and a message get), ``command_line`` does it to a
process's arguments, and ``scrub`` to a message's text (what an MCP client is told).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TypeGuard
from urllib.parse import unquote

SCHEMES = ("postgresql://", "postgres://")

SECRET_PARAMS = frozenset({"password", "sslpassword", "user"})
"""Query parameters a libpq URI may carry that are credentials (a user name with them: they travel together)."""

_URI = re.compile(r"postgres(?:ql)?://(?:[^\s'\"]*[^\s'\":,;.)])?")


def is_dsn(value: object) -> TypeGuard[str]:
    """Whether ``value`` names a PostgreSQL database (a connection URI) rather than a SQLite file."""
    return isinstance(value, str) and value.startswith(SCHEMES)


def database(value: str | os.PathLike[str]) -> str | Path:
    """The database ``value`` names: a connection URI as it is (a ``Path`` would fold its ``//``), else a file."""
    return value if is_dsn(value) else Path(value)


def public(dsn: str) -> str:
    """``dsn`` without credentials: no ``user:password@``, no ``password=``/``sslpassword=``/``user=`` parameter."""
    scheme, sep, rest = dsn.partition("//")
    rest, hashed, fragment = rest.partition("#")
    rest, asked, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    kept = [p for p in query.split("&") if p and unquote(p.partition("=")[0]).lower() not in SECRET_PARAMS]
    return (
        f"{scheme}{sep}{authority.rpartition('@')[2]}{slash}{path}"
        + (f"?{'&'.join(kept)}" if kept else "")
        + (f"#{fragment}" if hashed else "")
    )


def command_line(argv: Sequence[str]) -> str:
    """A process's command line, each connection URI in it (``--db=URI`` too) without credentials."""
    return " ".join(_URI.sub(lambda m: public(m.group(0)), arg) for arg in argv)


def scrub(text: str) -> str:
    """A message for someone outside the machine: every connection URI in it becomes "the database"."""
    text = re.sub(r"the database " + _URI.pattern, "the database", text)
    return _URI.sub("the database", text)

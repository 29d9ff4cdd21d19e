"""The SQL statements the store's shared code runs, recorded on either engine, and their checked PostgreSQL forms.

The store's read and write code (``store/read.py``, ``write.py``, ``view.py``…) is written once, in SQLite's SQL,
and runs on PostgreSQL through ``store/pg/compat.py``, which rewrites each statement by its text. ``run_vault``
drives a small vault through the shared paths (import, edits, a rename and a deletion, every search mode, reads and
diffs at past times, links, changes, a purge, reindex, check); ``on_sqlite`` and ``on_postgres`` record what it ran:

- on SQLite, every statement apsw prepares on any connection opened meanwhile (``apsw.connection_hooks`` and
  ``exec_trace``), with the vaultsync function that ran it;
- on PostgreSQL, every statement handed to ``compat.translate``, with the function that handed it.

``FORMS`` (tests/store/sql_forms.json) holds the functions outside ``store/pg/`` that handed statements to compat,
each such statement with its PostgreSQL text, and what those functions ran on SQLite only (an engine's own branch).
tests/store/test_pg_sql_forms.py writes it from a run on a real server (``VAULTSYNC_WRITE_SQL_FORMS=1``) and fails
when it differs; tests/store/test_sql_forms.py checks, without a server, that every statement those functions run
on SQLite is there, and that compat still gives each the same text.

Its limit: a statement only the run does not reach (a branch of a shared function that this small vault never
takes) is not checked, and a statement of a shared function that PostgreSQL did not run is listed as SQLite's own:
the diff of the file says which.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ENGINE_OWN = ["vaultsync", "store", "pg"]
"""The PostgreSQL engine's own modules: their SQL is written for PostgreSQL (compat passes it through)."""
FORMS = Path(__file__).resolve().parents[1] / "store" / "sql_forms.json"
WRITE_ENV = "VAULTSYNC_WRITE_SQL_FORMS"

Recorded = dict[str, set[str]]
"""Each statement's text, with the modules that ran it."""

T0 = dt.datetime(2025, 3, 1, 9, 0, tzinfo=dt.UTC)


def _caller(skip: tuple[str, ...]) -> str:
    """The innermost vaultsync function on the stack (``module:qualname``), leaving out the modules ``skip``."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("vaultsync.") and not name.startswith(skip):
            return f"{name}:{frame.f_code.co_qualname}"
        frame = frame.f_back
    return "?"


@contextlib.contextmanager
def on_sqlite() -> Iterator[Recorded]:
    """Records the statements of every apsw connection opened inside the block."""
    import apsw

    seen: Recorded = {}

    def trace(cursor: Any, sql: str, bindings: Any) -> bool:
        seen.setdefault(sql.strip(), set()).add(_caller(()))
        return True

    def hook(con: Any) -> None:
        con.exec_trace = trace

    apsw.connection_hooks.append(hook)
    try:
        yield seen
    finally:
        apsw.connection_hooks.remove(hook)


@contextlib.contextmanager
def on_postgres(monkeypatch: Any) -> Iterator[Recorded]:
    """Records the statements handed to ``store/pg/compat.py``'s ``translate`` inside the block."""
    from vaultsync.store.pg import compat, ranking

    seen: Recorded = {}
    translate = compat.translate

    def recording(sql: str) -> tuple[str, bool]:
        seen.setdefault(sql.strip(), set()).add(_caller(("vaultsync.store.pg.compat",)))
        return translate(sql)

    monkeypatch.setattr(compat, "translate", recording)
    monkeypatch.setattr(ranking, "translate", recording)
    yield seen


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def run_vault(db: str | os.PathLike[str], root: Path) -> None:
    """A small vault through the store's shared paths (the same calls on either engine)."""
    from vaultsync import Vault

    write(root, "Projects/Atlas.md", "---\ntags: [project]\nstatus: open\n---\n# Atlas\n\nKickoff with [[Ana]].\n")
    write(root, "People/Ana.md", "# Ana\n\nWorks on [[Projects/Atlas|Atlas]]. #people\n")
    write(root, "Old.md", "# Old\n\nMoves to Archive.\n")
    write(root, "Doomed.md", "# Doomed\n\nsecret-token-42 here.\n")
    at: Callable[[int], dt.datetime] = lambda day: T0 + dt.timedelta(days=day)  # noqa: E731
    with Vault.open(db, root=root) as vault:
        vault.sync(known_at=at(0))
        write(root, "Projects/Atlas.md", "---\ntags: [project]\nstatus: done\n---\n# Atlas\n\n## Risks\n\nTight.\n")
        (root / "Archive").mkdir()
        os.replace(root / "Old.md", root / "Archive" / "Old.md")
        vault.sync(known_at=at(1))
        (root / "Doomed.md").unlink()
        vault.sync(known_at=at(2))
        vault.create_note("Inbox.md", "# Inbox\n\n- read [[Atlas#Risks]]\n")
        for mode in ("hybrid", "keyword", "vector"):
            for when in (None, at(0), at(1)):
                vault.search("atlas kickoff", as_of=when, mode=mode)
        vault.search("tight", prefix="Projects", tags=["project"], where={"status": "done"})
        for when in (None, at(0), at(1)):
            vault.ls(as_of=when)
            vault.listing(as_of=when)
            vault.links("Projects/Atlas.md", as_of=when)
        vault.read("Projects/Atlas.md", as_of=at(0))
        vault.read("Archive/Old.md")
        vault.history("Archive/Old.md")
        vault.diff("Projects/Atlas.md", at(0))
        vault.changes(at(0), at(2))
        vault.fates(["Doomed.md", "Old.md"], at(2))
        list(vault.export(as_of=at(1)))
        vault.stats()
        vault.purge(texts=["secret-token-42"])
        vault.reindex()
        vault.check()


_LIST = re.compile(r"\(\?(?:\s*,\s*\?)*\)")


def normal(sql: str) -> str:
    """A statement's text with each parenthesized list of placeholders, of any length, written ``(?, ...)``."""
    return _LIST.sub("(?, ...)", sql.strip())


def forms(on_sqlite: Recorded, on_postgres: Recorded) -> dict[str, Any]:
    """What ``FORMS`` holds, from a run of ``run_vault`` on each engine: the functions outside ``store/pg/`` that
    handed statements to compat, each such statement with its PostgreSQL text, and the statements those functions ran
    on SQLite only (on branches of their own, e.g. a savepoint that makes FTS5 write what it holds in memory)."""
    from vaultsync.store.pg.compat import translate

    functions = {f for by in on_postgres.values() for f in by if f.split(":")[0].split(".")[:3] != ENGINE_OWN}
    shared_pg = {normal(sql) for sql, by in on_postgres.items() if by & functions}
    return {
        "functions": sorted(functions),
        "postgres": {sql: translate(sql)[0] for sql in sorted(shared_pg)},
        "sqlite_only": sorted({normal(sql) for sql, by in on_sqlite.items() if by & functions} - shared_pg),
    }


def shared(recorded: Recorded, functions: set[str]) -> Recorded:
    """The recorded statements run by one of ``functions``."""
    return {sql: by for sql, by in recorded.items() if by & functions}


def load() -> dict[str, Any]:
    return json.loads(FORMS.read_text(encoding="utf-8"))


def dump(data: dict[str, Any]) -> None:
    FORMS.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

"""Attachments' bytes in the store, for both engines: each distinct content once, by its SHA-256, in parts.

An attachment revision is a ``notes`` row like a note's (path, kind, renames, tombstones, ``content_hash``) with no
chunks of its own text; its bytes live here, keyed by that hash (``m012_attachments``): ``attachment_bodies`` holds
one row per distinct content (its size, and whether its bytes were kept), ``attachment_parts`` the bytes in pieces
of at most ``attachments.PIECE``. Writing streams the file (a piece at a time, checked against its hash as it
goes: ``attachments.checked``), inside a savepoint; reading yields the pieces in order. The same SQL runs on both
engines (PostgreSQL's through ``pg/compat.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..disk.attachments import Body, checked, digest


@dataclass(frozen=True, slots=True)
class Stored:
    """What the store holds of one content."""

    size: int
    kept: bool
    """False: over the size limit when recorded, its bytes not kept."""


def info(con: Any, content_hash: str) -> Stored | None:
    """What the store holds of the content ``content_hash`` (None: nothing)."""
    row = con.execute("SELECT size, kept FROM attachment_bodies WHERE hash = ?", (content_hash,)).fetchone()
    return None if row is None else Stored(int(row[0]), bool(row[1]))


def store(con: Any, body: Body) -> None:
    """Store ``body`` once (nothing when its content is stored already), inside a savepoint: ``Changed`` when its
    bytes are not those hashed, and then nothing of it is stored."""
    if info(con, body.hash) is not None:
        return
    with _savepoint(con):
        row = con.execute(
            "INSERT INTO attachment_bodies (hash, size, kept) VALUES (?, ?, ?) RETURNING id",
            (body.hash, body.size, 1 if body.keep else 0),
        ).fetchone()
        if body.keep:
            for ord_, piece in enumerate(checked(body)):
                con.execute("INSERT INTO attachment_parts (body_id, ord, data) VALUES (?, ?, ?)", (row[0], ord_, piece))


def _savepoint(con: Any) -> Any:
    """A savepoint on either engine's connection (apsw's own; psycopg's nested transaction)."""
    raw = getattr(con, "raw", None)
    return con if raw is None else raw.transaction()


def pieces(con: Any, content_hash: str) -> Iterator[bytes]:
    """The stored bytes of ``content_hash``, piece by piece (one row in memory at a time)."""
    ord_ = 0
    while True:
        row = con.execute(
            "SELECT p.data FROM attachment_parts p JOIN attachment_bodies b ON b.id = p.body_id "
            "WHERE b.hash = ? AND p.ord = ?",
            (content_hash, ord_),
        ).fetchone()
        if row is None:
            return
        yield bytes(row[0])
        ord_ += 1


def problems(con: Any, vault_id: int) -> list[str]:
    """What ``check`` finds wrong with the vault's attachments: a revision whose content is not stored, a stored
    content whose pieces do not give back its hash and size (each read piece by piece)."""
    found = []
    for hash_, path, size, kept in con.execute(
        "SELECT DISTINCT n.content_hash, min(n.path), n.size, b.kept FROM notes n "
        "LEFT JOIN attachment_bodies b ON b.hash = n.content_hash "
        "WHERE n.vault_id = ? AND n.kind != 'deleted' AND n.path NOT LIKE '%.md' "
        "GROUP BY n.content_hash, n.size, b.kept ORDER BY 2",
        (vault_id,),
    ).fetchall():
        if kept is None:
            found.append(f"attachment {path}: its content {hash_} is not stored")
        elif kept and digest(pieces(con, hash_)) != (hash_, size):
            found.append(f"attachment {path}: its stored bytes do not match its content hash {hash_}")
    return found


__all__ = ["Stored", "info", "pieces", "problems", "store"]

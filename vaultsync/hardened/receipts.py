"""Provenance receipts: an HMAC, under the keystore's key, over what one answer of the server was.

A receipt rides on every ``read_note`` answer and every ``search_notes`` hit of a server whose manifest
names a ``keystore_path``. It is the compact object::

    {"v": "vaultsync-receipt-v2", "vault": "notes", "path": "Projects/Atlas.md", "revision": "9f2c41ab",
     "content_sha256": "9f2c41ab…", "as_of": "2024-01-15T00:00:00Z", "known_at": "2024-01-01T00:00:00Z",
     "key_id": "2026-11", "mac": "…64 hex digits…"}

Fields:

- ``vault``: the vault's name in the store.
- ``path``: the vault-relative path (Unicode NFC) the revision is stored under.
- ``revision``: the revision id the answer came from, as ``history``, ``changes`` and the tools show it: the
  first hex digits of ``content_sha256`` (8 of them, ``revisions.short_revision``). The store finds the
  revision by path, content hash and ``known_at``.
- ``content_sha256``: SHA-256 (hex) of that whole revision's UTF-8 text, which is the store's content hash
  (``content_hash`` in answers). For a whole ``read_note`` answer it is the SHA-256 of ``content``; for a
  page of a long note, or for a search hit (one chunk), it is the hash of the whole revision the text is
  part of, which is what a verifier can check against the store (``vaultsync receipt verify`` also checks
  the page or the hit's text against the stored revision when given the whole answer).
- ``as_of``: the knowledge cutoff the caller asked for, in the server's form (``format_time``: UTC,
  ``Z``), or null when the caller asked about now.
- ``known_at``: when the store learned that revision (its batch's ``known_at``), in the same form.
- ``key_id``: the key the MAC is made with (the keystore's current key when signed).

``mac`` is HMAC-SHA256 (hex) over the canonical message: the UTF-8 bytes of the compact JSON array
``[v, vault, path, revision, content_sha256, as_of, known_at, key_id]`` (that order,
``separators=(",", ":")``, non-ASCII kept as is). A JSON array of typed values has one reading, so no
two different receipts share a message; the version tag comes first so a later format cannot be
mistaken for this one, and the key id is signed so a receipt cannot be moved to another key.

Receipts signed before are ``vaultsync-receipt-v1``: the same fields, except that ``revision`` is the store's
numeric id of the revision (an integer); they verify as they did (their message has their own version tag).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ConfigError, ReceiptError
from ..times import parse_time
from .keystore import Keystore

VERSION = "vaultsync-receipt-v2"
V1 = "vaultsync-receipt-v1"
"""Receipts signed before revision ids were content-hash prefixes: ``revision`` is the store's numeric id."""
VERSIONS = (V1, VERSION)
FIELDS = ("v", "vault", "path", "revision", "content_sha256", "as_of", "known_at", "key_id", "mac")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX_ID = re.compile(r"[0-9a-f]{8,64}")


@dataclass(frozen=True, slots=True)
class Receipt:
    v: str
    vault: str
    path: str
    revision: str | int
    """The revision id (v2: hex digits of ``content_sha256``; v1: the store's numeric id)."""
    content_sha256: str
    as_of: str | None
    known_at: str
    key_id: str
    mac: str

    def message(self) -> bytes:
        """The canonical bytes the MAC is over (see the module docstring)."""
        return canonical(
            self.vault, self.path, self.revision, self.content_sha256, self.as_of, self.known_at, self.key_id, self.v
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def canonical(
    vault: str,
    path: str,
    revision: str | int,
    content_sha256: str,
    as_of: str | None,
    known_at: str,
    key_id: str,
    version: str = VERSION,
) -> bytes:
    fields = [version, vault, path, revision, content_sha256, as_of, known_at, key_id]
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def sign(
    keystore: Keystore, *, vault: str, path: str, revision: str, content_sha256: str, as_of: str | None, known_at: str
) -> Receipt:
    """A receipt for one answer, made with the keystore's current key."""
    key_id = keystore.current_id
    _, mac = keystore.sign(canonical(vault, path, revision, content_sha256, as_of, known_at, key_id))
    return Receipt(VERSION, vault, path, revision, content_sha256, as_of, known_at, key_id, mac)


def parse(data: object) -> Receipt:
    """A receipt from its JSON object; ReceiptError naming the first field that is missing or wrong."""
    if not isinstance(data, dict):
        raise ReceiptError(f"not a receipt: expected a JSON object with {', '.join(FIELDS)}")
    missing = [f for f in FIELDS if f not in data]
    if missing:
        raise ReceiptError(f"not a receipt: {missing[0]} is missing")
    extra = sorted(set(data) - set(FIELDS))
    if extra:
        raise ReceiptError(f"not a receipt: unknown field {extra[0]}")
    if data["v"] not in VERSIONS:
        raise ReceiptError(f"not a receipt this vaultsync reads: v is {data['v']!r}, not {VERSION!r}")
    for name in ("vault", "path", "known_at", "key_id"):
        if not isinstance(data[name], str) or not data[name]:
            raise ReceiptError(f"not a receipt: {name} must be a non-empty string")
    if data["v"] == V1:
        if not isinstance(data["revision"], int) or isinstance(data["revision"], bool) or data["revision"] < 1:
            raise ReceiptError(f"not a receipt: revision must be a positive integer in a {V1} receipt")
    elif not isinstance(data["revision"], str) or not _HEX_ID.fullmatch(data["revision"]):
        raise ReceiptError("not a receipt: revision must be a revision id (8 to 64 lowercase hex digits)")
    if data["as_of"] is not None and not isinstance(data["as_of"], str):
        raise ReceiptError("not a receipt: as_of must be a string or null")
    try:
        parse_time(data["known_at"])
    except ConfigError:
        raise ReceiptError("not a receipt: known_at must be a time like 2024-01-01T00:00:00Z") from None
    for name in ("content_sha256", "mac"):
        if not isinstance(data[name], str) or not _HEX64.fullmatch(data[name]):
            raise ReceiptError(f"not a receipt: {name} must be 64 lowercase hex digits")
    if data["v"] != V1 and not data["content_sha256"].startswith(data["revision"]):
        raise ReceiptError("not a receipt: revision must be the first hex digits of content_sha256")
    return Receipt(**{f: data[f] for f in FIELDS})

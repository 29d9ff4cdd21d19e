"""How stored texts are compressed: zlib, with a preset dictionary trained on the vault itself.

Short texts (a chunk is a few hundred bytes) compress poorly on their own; a 32 KB dictionary
of the vault's own writing lets each one refer to phrases seen before. A database trains its
dictionary once, from the first large batch, and keeps it in the append-only ``dictionaries``
table. Each stored body says how to read it:

- ``0x78 …``: plain zlib (a zlib stream's first byte);
- ``0x01`` + 8-byte dictionary key + raw deflate with that dictionary.
"""

from __future__ import annotations

import hashlib
import zlib

import apsw

DICT_BYTES = 32 * 1024
"""Deflate looks back at most 32 KB, so a longer dictionary would not help."""

MIN_SAMPLE = 64 * 1024
"""A batch needs this much new text before a dictionary is trained from it."""

_WITH_DICT = b"\x01"
_DICTS: dict[bytes, bytes] = {}
_PRIMED: dict[bytes, zlib._Compress] = {}
"""A compressor per large dictionary with the dictionary already loaded: ``pack`` copies it, which costs
less than half of loading 32 KB again for every text, and gives the same bytes."""

PRIME_MIN = 4096
"""Dictionaries at least this long are primed once (loading a short one is cheaper than a copy)."""

MEM_LEVEL = 8
"""zlib's default memory level. A primed compressor at memory level 9 is twice as large, and copying it cost more than
compressing: 1.2-3.3 against 0.9-1.1 CPU-s for the Hub's 28,390 texts (docs/performance-notes.md), for the same
size (4.31 MB). Any memory level decompresses the same way."""

# Link lists are small JSON arrays with the same keys over and over: a fixed dictionary of our own.
LINKS_DICT = (
    b'"kind":"markdown","line":"alias":"heading":"embed":true,"block":'
    b"https://github.com/https://www.youtube.com/https://obsidian.md/.png.jpg.md#"
    b'[{"target":"","kind":"wikilink","alias":"","line":1},{"target":"","kind":"wikilink","heading":"","line":2}]'
)


def content_key(text: str) -> bytes:
    """The one content hash of the store: the key under which a text (a chunk, a link list, an
    indexed search document) is stored once."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def key_of(dictionary: bytes) -> bytes:
    return hashlib.blake2b(dictionary, digest_size=8).digest()


def register(dictionary: bytes) -> bytes:
    """Make ``dictionary`` available to ``unpack`` in this process; return its key."""
    key = key_of(dictionary)
    _DICTS[key] = dictionary
    return key


LINKS_KEY = register(LINKS_DICT)


def load(con: apsw.Connection) -> bytes | None:
    """Register every dictionary the database holds; return the newest one's key (None: none yet)."""
    register(LINKS_DICT)
    key = None
    for (body,) in con.execute("SELECT body FROM dictionaries ORDER BY id"):
        key = register(body)
    return key


def refresh(con: apsw.Connection) -> None:
    """Register any dictionary the database holds that this process has not seen (cheap when none)."""
    for (key,) in con.execute("SELECT hash FROM dictionaries"):
        if bytes(key) not in _DICTS:
            load(con)
            return


def train(texts: list[str]) -> bytes | None:
    """A dictionary from a sample spread evenly over ``texts`` (None when there is too little text)."""
    encoded = [t.encode("utf-8", "surrogatepass") for t in texts if t.strip()]
    if sum(len(t) for t in encoded) < MIN_SAMPLE:
        return None
    picked: list[bytes] = []
    size = 0
    step = max(1, len(encoded) // 256)
    for data in encoded[::step]:
        piece = data[:1024]
        picked.append(piece)
        size += len(piece)
        if size >= DICT_BYTES:
            break
    return b"".join(picked)[-DICT_BYTES:]


def pack(text: str, key: bytes | None = None) -> bytes:
    """Compress ``text`` (with the registered dictionary ``key`` when given)."""
    data = text.encode("utf-8", "surrogatepass")
    if key is None:
        return zlib.compress(data, 6)
    primed = _PRIMED.get(key)
    if primed is not None:
        compressor = primed.copy()
    else:
        dictionary = _DICTS[key]
        compressor = zlib.compressobj(6, zlib.DEFLATED, -15, MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, dictionary)
        if len(dictionary) >= PRIME_MIN:
            _PRIMED[key] = compressor.copy()
    return _WITH_DICT + key + compressor.compress(data) + compressor.flush()


def unpack(body: bytes) -> str:
    """The text of a stored body, whichever way it was packed."""
    if body[:1] == _WITH_DICT:
        key = bytes(body[1:9])
        if key not in _DICTS:
            raise zlib.error(f"unknown compression dictionary {key.hex()}")
        decompressor = zlib.decompressobj(-15, _DICTS[key])
        data = decompressor.decompress(body[9:]) + decompressor.flush()
    else:
        data = zlib.decompress(body)
    return data.decode("utf-8", "surrogatepass")

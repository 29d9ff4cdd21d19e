"""Which embedder made the store's vectors, and replacing them all with another's (``reembed``)."""

from __future__ import annotations

import json
from collections.abc import Iterable

import apsw

from ...embed.embedders import DEFAULT_EMBEDDER, EMBEDDERS, Embedder, get_embedder, quantize
from ...embed.tokenizer import indexable, indexed_text
from ...errors import ProviderError
from ...parsers import ParsedNote
from ..codec import content_key, unpack
from .schema import LIVE_VECTORS_REBUILD, meta, set_meta


def check_embedder(con: apsw.Connection, embedder: Embedder) -> ProviderError | None:
    """Why ``embedder``'s vectors may not join the store's (None when they may)."""
    recorded = meta(con, "embedder_signature")
    if recorded is None or recorded == embedder.signature:
        return None
    return ProviderError(
        f"this store's vectors were made by embedder {recorded}, not {embedder.signature}; vectors "
        f"are never mixed: reembed the store with {embedder.embedder_id!r} to switch",
        remedy="reembed",
        remedy_args={"embedder": embedder.embedder_id},
    )


def unknown_embedder(name: str) -> ProviderError:
    return ProviderError(
        f"this store's vectors were made by embedder {name!r}, which this vaultsync does not have; "
        f"reembed the store with {DEFAULT_EMBEDDER!r} to switch",
        remedy="reembed",
        remedy_args={"embedder": DEFAULT_EMBEDDER},
    )


_QUERY_EMBEDDERS: dict[tuple[str, object], Embedder] = {}
"""One embedder per registry name (and factory) for the queries of this process: a model loads once,
not once per search."""


def query_embedder(con: apsw.Connection) -> Embedder:
    """The embedder that made the store's vectors (ProviderError when it is missing or has changed)."""
    name = store_embedder(con)
    if name not in EMBEDDERS:
        raise unknown_embedder(name)
    key = (name, EMBEDDERS[name])
    embedder = _QUERY_EMBEDDERS.get(key)
    if embedder is None:
        embedder = _QUERY_EMBEDDERS.setdefault(key, get_embedder(name))
    problem = check_embedder(con, embedder)
    if problem:
        raise problem
    return embedder


def store_embedder(con: apsw.Connection) -> str:
    """The registry name of the embedder whose vectors the store holds (recording the default if none)."""
    return meta(con, "embedder") or DEFAULT_EMBEDDER


def stored_text(title: str | None, aliases: str | None, heading_path: str, body: bytes) -> str:
    """The ``indexed_text`` of a stored chunk: its note's title and aliases (JSON), its heading path (JSON) and
    its packed text, as the columns hold them."""
    return indexed_text(title, json.loads(aliases or "[]"), json.loads(heading_path), unpack(body))


def doc_texts(con: apsw.Connection) -> Iterable[tuple[int, str]]:
    """Every indexed doc with its ``indexed_text``, regenerated from one chunk revision that uses it."""
    rows = con.execute(
        """SELECT r.doc_id, c.heading_path, t.body, n.title, n.aliases
           FROM (SELECT doc_id, min(id) AS id FROM search_rows GROUP BY doc_id) r
           JOIN chunks c ON c.id = r.id JOIN texts t ON t.id = c.text_id JOIN notes n ON n.id = c.note_id
           ORDER BY r.doc_id"""
    )
    for doc_id, heading_path, body, title, aliases in rows:
        yield doc_id, stored_text(title, aliases, heading_path, body)


def reembed(con: apsw.Connection, embedder: Embedder) -> int:
    """Replace every vector with ``embedder``'s, in one transaction; return how many docs were embedded (none for a
    background embedder: the old vectors go, the writer fills the new ones after, ``backfill``)."""
    with con:
        con.execute("DELETE FROM search_vectors")
        count = 0
        batch: list[tuple[int, str]] = []
        for doc in [] if embedder.background else list(doc_texts(con)):
            batch.append(doc)
            if len(batch) >= 512:
                write_vectors(con, embedder, batch)
                count, batch = count + len(batch), []
        write_vectors(con, embedder, batch)
        count += len(batch)
        con.execute(LIVE_VECTORS_REBUILD)
        set_meta(con, "embedder", embedder.embedder_id)
        set_meta(con, "embedder_signature", embedder.signature)
    return count


AHEAD: dict[tuple[str, str], bytes] = {}
"""(embedder signature, indexed_text) → quantized vector, computed ahead by parse workers
(``embed_ahead``) for the batch being written; ``write_vectors`` takes them out."""


_WORKER_EMBEDDERS: dict[str, Embedder] = {}
_WORKER_INDEXES: dict[str, apsw.Connection | None] = {}
"""In a parse worker: a read-only connection per database (None: it cannot be read here)."""
_WORKER_EMPTY: dict[str, int] = {}
"""In a parse worker: the ``data_version`` at which a database's committed search index was seen empty."""


def _known(db: str | None, keys: list[bytes]) -> set[bytes]:
    """Of ``keys``, those the committed search index of ``db`` already holds (its docs, with their vectors).

    Read in a parse worker, which sees the database as it was before the batch (the batch is not committed):
    a text the index already has is not embedded again, whatever note or revision it comes back in. An
    empty index (a fresh import) is not asked again until another commit changed the database (a worker
    kept from one batch to the next, ``sync.ParsePool``, sees the index grow); a database that cannot be
    read here is simply not consulted.
    """
    if not db or not keys:
        return set()
    if db not in _WORKER_INDEXES:
        try:
            con = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
            con.set_busy_timeout(5000)
            _WORKER_INDEXES[db] = con
        except apsw.Error:
            _WORKER_INDEXES[db] = None
    con = _WORKER_INDEXES[db]
    if con is None:
        return set()
    try:
        version = con.execute("PRAGMA data_version").fetchone()[0]
        if _WORKER_EMPTY.get(db) == version:
            return set()
        if not con.execute("SELECT 1 FROM search_docs LIMIT 1").fetchone():
            _WORKER_EMPTY[db] = version
            return set()
    except apsw.Error:
        return set()
    found: set[bytes] = set()
    for start in range(0, len(keys), 500):
        part = keys[start : start + 500]
        found.update(
            bytes(row[0])
            for row in con.execute(f"SELECT hash FROM search_docs WHERE hash IN ({','.join('?' * len(part))})", part)
        )
    return found


def embed_ahead(name: str, db: str | None, parsed: ParsedNote) -> tuple[str, dict[str, bytes]]:
    """In a parse worker: embedder ``name``'s vectors for a parsed note's indexed chunks that the index of
    database ``db`` lacks, so a large import embeds in parallel with writing (one thread per worker, the
    model loaded once per worker process). Only a speed-up: a miss is embedded as usual."""
    embedder = _WORKER_EMBEDDERS.get(name)
    if embedder is None:
        embedder = _WORKER_EMBEDDERS[name] = get_embedder(name)
        if hasattr(embedder, "threads"):
            embedder.threads = 1
    keep = indexable([c.text for c in parsed.chunks])
    texts = [
        indexed_text(parsed.title, parsed.aliases, c.heading_path, c.text) for c, k in zip(parsed.chunks, keep) if k
    ]
    keys = [content_key(t) for t in texts]
    known = _known(db, keys)
    if known:
        texts = [t for t, key in zip(texts, keys) if key not in known]
    return embedder.signature, dict(zip(texts, embed_quantized(embedder, texts))) if texts else {}


def take_ahead(payload: tuple[str, dict[str, bytes]]) -> None:
    signature, vectors = payload
    AHEAD.update(((signature, text), blob) for text, blob in vectors.items())


def embed_quantized(embedder: Embedder, texts: list[str]) -> list[bytes]:
    """The stored (quantized) vectors of ``texts``, already normalized (``indexed_text``): the embedder's own
    ``embed_quantized`` when it has one (the hashed embedder), else ``quantize`` of its vectors."""
    fast = getattr(embedder, "embed_quantized", None)
    if fast is not None:
        blobs = fast(texts)
    else:
        normalized = getattr(embedder, "embed_normalized", None)
        blobs = list(map(quantize, normalized(texts) if normalized is not None else embedder.embed_many(texts)))
    if len(blobs) != len(texts):
        raise ProviderError(f"embedder {embedder.embedder_id} returned {len(blobs)} vectors for {len(texts)} texts")
    return blobs


def write_vectors(con: apsw.Connection, embedder: Embedder, docs: list[tuple[int, str]]) -> None:
    """Embed and store the docs' ``indexed_text`` (already normalized: an embedder may skip that step)."""
    signature = embedder.signature
    blobs: list[bytes | None] = [AHEAD.pop((signature, t), None) for _, t in docs]
    texts = [t for (_, t), blob in zip(docs, blobs) if blob is None]
    if texts:
        computed = iter(embed_quantized(embedder, texts))
        blobs = [next(computed) if blob is None else blob for blob in blobs]
    rows = [(doc_id, blob) for (doc_id, _), blob in zip(docs, blobs) if blob is not None and any(blob)]
    con.executemany("INSERT INTO search_vectors (doc_id, embedding) VALUES (?, ?)", rows)

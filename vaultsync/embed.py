"""Pluggable embedders: a batch of texts in, vectors out, each embedder named by an id and a version."""

from __future__ import annotations

import math
import re
import struct
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

from .errors import ProviderError


class Embedder(ABC):
    """Turns texts into vectors. Subclasses set ``embedder_id``, ``version``, ``dims`` and ``embed_batch``."""

    embedder_id: str = ""
    version: str = "1"
    dims: int = 0
    batch_size: int = 256

    @abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector of ``dims`` floats per text, in order."""

    @property
    def signature(self) -> str:
        """What the store records: vectors of different signatures are never mixed."""
        return f"{self.embedder_id}/{self.version}/{self.dims}"

    def embed_many(self, texts: Iterable[str]) -> Iterator[list[float]]:
        iterator = iter(texts)
        while batch := list(islice(iterator, self.batch_size)):
            vectors = self.embed_batch(batch)
            if len(vectors) != len(batch) or any(len(v) != self.dims for v in vectors):
                raise ProviderError(f"embedder {self.embedder_id} returned vectors of the wrong shape")
            yield from vectors


_WORD = re.compile(r"\w+")


class HashEmbedder(Embedder):
    """Deterministic and offline: signed feature hashing of lower-cased words and adjacent word pairs.

    Text goes through the keyword index's normalization first (NFKC, CJK runs as character pairs),
    so a CJK query shares features with the text it appears in.
    """

    embedder_id = "hash"
    version = "2"
    dims = 128
    pair_weight = 0.5

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        from .search.text import normalize

        return [self._one(normalize(t)) for t in texts]

    def _one(self, text: str) -> list[float]:
        vec = [0.0] * self.dims
        words = _WORD.findall(text.lower())
        features = [(w, 1.0) for w in words]
        features += [(f"{a} {b}", self.pair_weight) for a, b in zip(words, words[1:])]
        dims = self.dims
        for feature, weight in features:
            h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
            vec[h % dims] += weight if (h >> 31) & 1 else -weight
        return vec


EMBEDDERS: dict[str, type[Embedder]] = {"hash": HashEmbedder}
"""Built-in embedders by name (``--embedder NAME``)."""

DEFAULT_EMBEDDER = "hash"


def get_embedder(name: str) -> Embedder:
    """An embedder by registry name; ProviderError naming the known ones otherwise."""
    try:
        return EMBEDDERS[name]()
    except KeyError:
        raise ProviderError(f"unknown embedder {name!r} (known: {', '.join(sorted(EMBEDDERS))})") from None


def quantize(vector: Sequence[float]) -> bytes:
    """A vector as int8 (scaled so its largest component is ±127), the form the store keeps.

    Cosine similarity ignores the scale, so only rounding is lost. An all-zero vector stays zero.
    """
    peak = max((abs(x) for x in vector), default=0.0)
    if peak == 0.0 or not math.isfinite(peak):
        return bytes(len(vector))
    scale = 127.0 / peak
    return struct.pack(f"{len(vector)}b", *(max(-127, min(127, round(x * scale))) for x in vector))


def dequantize(blob: bytes) -> list[int]:
    return list(struct.unpack(f"{len(blob)}b", blob))

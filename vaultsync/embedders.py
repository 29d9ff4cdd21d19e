"""The embedders by name: the registry (``EMBEDDERS``, ``get_embedder``), the built-in hashed embedder, and
``quantize``. Each implements ``provider.Embedder`` (a batch of texts in, vectors out), named by an id and a
version; ``minilm`` is the semantic extra (``semantic``)."""

from __future__ import annotations

import math
import re
import struct
import zlib
from collections import Counter
from collections.abc import Callable, Sequence

from .provider import Embedder
from .errors import ProviderError

__all__ = ["DEFAULT_EMBEDDER", "EMBEDDERS", "Embedder", "HashEmbedder", "get_embedder", "quantize"]


_WORD = re.compile(r"\w+")
_FEATURE_CACHES: dict[tuple[int, float, float], tuple[dict[str, list[tuple[int, float]]],
                                                      dict[tuple[str, str], tuple[int, float]]]] = {}
"""``HashEmbedder`` feature caches (words, word pairs) by (dims, trigram weight, pair weight)."""


class HashEmbedder(Embedder):
    """Deterministic and offline: signed feature hashing of lower-cased words, adjacent word pairs and
    the character trigrams of each word (``<word>`` → ``<wo``, ``wor``, ``ord``, ``rd>``), so that
    ``2hop`` meets ``2-hop`` and plurals meet singulars.

    Text goes through the keyword index's normalization first (NFKC, CJK runs as character pairs),
    so a CJK query shares features with the text it appears in. Weights are multiples of 1/4, so
    sums are exact and a text's vector never depends on the order of the work.
    """

    embedder_id = "hash"
    version = "3"
    dims = 128
    pair_weight = 0.5
    trigram_weight = 0.25
    _CACHE_LIMIT = 65_536
    """Entries per feature cache (words, word pairs), emptied when full: a cached word costs ~0.6 kB,
    so 500,000 let a large vault's vocabulary hold hundreds of MB; this bounds both caches near 50 MB."""

    def __init__(self) -> None:
        # shared by every instance with the same features: a word's features never change, and a process
        # that opens a vault per command (a replay, the tests) keeps what it learned; a lookup or an
        # insert is one dict operation (atomic under the GIL)
        self._words, self._pairs = _FEATURE_CACHES.setdefault((self.dims, self.trigram_weight, self.pair_weight),
                                                              ({}, {}))

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        from .tokenizer import normalize

        return [self._one(normalize(t)) for t in texts]

    def embed_normalized(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed_batch`` for texts already normalized (``indexed_text``): the same vectors, less work."""
        return [self._one(t) for t in texts]

    def _slot(self, feature: str, weight: float) -> tuple[int, float]:
        h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
        return h % self.dims, weight if (h >> 31) & 1 else -weight

    def _word(self, word: str) -> list[tuple[int, float]]:
        marked = f"<{word}>"
        merged: dict[int, float] = {}
        for slot, weight in [self._slot(word, 1.0)] + [self._slot(marked[i:i + 3], self.trigram_weight)
                                                       for i in range(len(marked) - 2)]:
            merged[slot] = merged.get(slot, 0.0) + weight
        found = list(merged.items())
        if len(self._words) > self._CACHE_LIMIT:
            self._words.clear()
        self._words[word] = found
        return found

    def _pair(self, pair: tuple[str, str]) -> tuple[int, float]:
        found = self._slot(f"{pair[0]} {pair[1]}", self.pair_weight)
        if len(self._pairs) > self._CACHE_LIMIT:
            self._pairs.clear()
        self._pairs[pair] = found
        return found

    def _one(self, text: str) -> list[float]:
        vec = [0.0] * self.dims
        words = _WORD.findall(text.lower())
        cache = self._words
        for word, count in Counter(words).items():
            features = cache.get(word) or self._word(word)
            for slot, weight in features:
                vec[slot] += count * weight
        pairs = self._pairs
        for pair, count in Counter(zip(words, words[1:])).items():
            slot, weight = pairs.get(pair) or self._pair(pair)
            vec[slot] += count * weight
        return vec


def _minilm() -> Embedder:
    from .semantic import MiniLMEmbedder  # imports nothing heavy until it embeds

    return MiniLMEmbedder()


EMBEDDERS: dict[str, Callable[[], Embedder]] = {"hash": HashEmbedder, "minilm": _minilm}
"""Built-in embedders by name (``--embedder NAME``); ``minilm`` needs the ``semantic`` extra."""

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
    if not vector:
        return b""
    peak = max(max(vector), -min(vector))
    if peak == 0.0 or not math.isfinite(peak):
        return bytes(len(vector))
    scale = 127.0 / peak
    return struct.pack(f"{len(vector)}b", *map(round, map(scale.__mul__, vector)))

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
from itertools import chain, repeat
from operator import add, mod, mul, rshift, sub

from ..errors import ProviderError
from .provider import Embedder

__all__ = ["DEFAULT_EMBEDDER", "EMBEDDERS", "Embedder", "HashEmbedder", "default_embedder", "get_embedder", "quantize"]


_WORD = re.compile(r"\w+")


class _Features(dict[str, list[int]]):
    """The word cache: a word → its features as slot codes (slot: add 1/4; ``dims`` + slot: take 1/4 away),
    each repeated once per quarter of its weight, computed on first use by ``compute``; emptied when full.

    Looked up with ``map(cache.__getitem__, words)``: a hit never leaves C, and ``Counter`` sums the codes in C too.
    """

    def __init__(self, compute: Callable[[str], list[int]], limit: int) -> None:
        super().__init__()
        self.compute, self.limit = compute, limit

    def __missing__(self, key: str) -> list[int]:
        found = self.compute(key)
        if len(self) >= self.limit:
            self.clear()
        self[key] = found
        return found


_FEATURE_CACHES: dict[tuple[int, float], _Features] = {}
"""``HashEmbedder`` word caches by (dims, trigram weight). Word pairs are not cached: a vault has far more
distinct pairs than a cache can hold, and a pair's CRC continues its first word's (see ``_one``)."""


class HashEmbedder(Embedder):
    """Deterministic and offline: signed feature hashing of lower-cased words, adjacent word pairs and
    the character trigrams of each word (``<word>`` → ``<wo``, ``wor``, ``ord``, ``rd>``), so that
    ``2hop`` meets ``2-hop`` and plurals meet singulars.

    Text goes through the keyword index's normalization first (NFKC, CJK runs as character pairs),
    so a CJK query shares features with the text it appears in. Weights are multiples of 1/4 (a text is
    summed as counts of quarters), so sums are exact and a text's vector never depends on the order of the work.
    """

    embedder_id = "hash"
    version = "3"
    dims = 128
    pair_weight = 0.5
    trigram_weight = 0.25
    _CACHE_LIMIT = 65_536
    """Entries in the word cache, emptied when full: a cached word costs well under 1 kB, so 500,000 let a large
    vault's vocabulary hold hundreds of MB; this bounds the cache near 30 MB."""

    def __init__(self) -> None:
        # shared by every instance with the same features: a word's features never change, and a process
        # that opens a vault per command (a replay, the tests) keeps what it learned; a lookup or an
        # insert is one dict operation (atomic under the GIL)
        key = (self.dims, self.trigram_weight)
        if key not in _FEATURE_CACHES:
            _FEATURE_CACHES[key] = _Features(self._word, self._CACHE_LIMIT)
        self._words = _FEATURE_CACHES[key]

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        from .tokenizer import normalize

        return [self._one(normalize(t)) for t in texts]

    def embed_normalized(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed_batch`` for texts already normalized (``indexed_text``): the same vectors, less work."""
        return [self._one(t) for t in texts]

    def _codes(self, feature: str, weight: float) -> list[int]:
        """One feature's slot code, repeated once per quarter of its weight (see ``_Features``)."""
        return [self._code(zlib.crc32(feature.encode("utf-8", "surrogatepass")))] * round(weight * 4)

    def _code(self, h: int) -> int:
        """A feature's CRC-32 as a slot code: its slot, plus ``dims`` when the feature counts negatively."""
        return h % self.dims + (0 if (h >> 31) & 1 else self.dims)

    def _word(self, word: str) -> list[int]:
        marked = f"<{word}>"
        codes = self._codes(word, 1.0)
        for i in range(len(marked) - 2):
            codes += self._codes(marked[i : i + 3], self.trigram_weight)
        return codes

    def embed_quantized(self, texts: Sequence[str]) -> list[bytes]:
        """``quantize`` of each ``embed_normalized`` vector, the same bytes, without the floats in between: a
        vector is its quarter counts × 0.25, and scaling by a power of two changes no rounding, so ``quantize``
        of the counts themselves gives what it gives of the vector."""
        return list(map(_quantize_counts, map(self._quarters, texts)))

    def _one(self, text: str) -> list[float]:
        return list(map(mul, self._quarters(text), repeat(0.25)))

    def _quarters(self, text: str) -> list[int]:
        """The vector of ``text`` in quarters (integers: weights are multiples of 1/4)."""
        words = _WORD.findall(text.lower())
        counted = Counter(chain.from_iterable(map(self._words.__getitem__, words)))
        if len(words) > 1:
            # a pair's feature is the CRC-32 of "first second": the CRC of "first " continued over "second"
            encoded = list(map(str.encode, words, repeat("utf-8"), repeat("surrogatepass")))
            heads = map(zlib.crc32, repeat(b" "), map(zlib.crc32, encoded[:-1]))
            crcs = list(map(zlib.crc32, encoded[1:], heads))
            # ``_code`` of each, in C: ``h % dims``, plus ``dims`` when bit 31 is clear (1 - (h >> 31) is 1)
            dims = self.dims
            pairs = list(
                map(
                    add,
                    map(mod, crcs, repeat(dims)),
                    map(mul, map(sub, repeat(1), map(rshift, crcs, repeat(31))), repeat(dims)),
                )
            )
            counted.update(pairs * round(self.pair_weight * 4))  # counted in C, once per quarter of the weight
        dims = self.dims
        codes = list(map(counted.get, range(2 * dims), repeat(0)))  # in C: no Python step per slot
        return list(map(sub, codes[:dims], codes[dims:]))


def _minilm() -> Embedder:
    from .semantic import MiniLMEmbedder  # imports nothing heavy until it embeds

    return MiniLMEmbedder()


EMBEDDERS: dict[str, Callable[[], Embedder]] = {"hash": HashEmbedder, "minilm": _minilm}
"""Built-in embedders by name (``--embedder NAME``); ``minilm`` needs the ``semantic`` extra."""

DEFAULT_EMBEDDER = "hash"
"""The embedder of a store whose search index does not name one (made before vectors were recorded)."""

EMBEDDER_ENV = "VAULTSYNC_EMBEDDER"


def default_embedder() -> str:
    """The embedder a new database's vectors are made with when none is asked for: ``$VAULTSYNC_EMBEDDER``, else
    the semantic model when its extra is installed (``minilm``: its vectors are filled after each batch, so an
    import stays as fast), else the built-in ``hash``."""
    import os

    from . import semantic

    chosen = os.environ.get(EMBEDDER_ENV, "").strip()
    if chosen:
        return chosen
    return "minilm" if semantic.installed() else DEFAULT_EMBEDDER


def get_embedder(name: str) -> Embedder:
    """An embedder by registry name; ProviderError naming the known ones otherwise."""
    try:
        return EMBEDDERS[name]()
    except KeyError:
        raise ProviderError(f"unknown embedder {name!r} (known: {', '.join(sorted(EMBEDDERS))})") from None


_STEPS: dict[int, list[int]] = {}
"""Peak → the int8 byte of each count ``-peak..peak`` under ``quantize`` (index ``d``; a negative ``d`` from the
end of the list, as Python indexes it)."""


_STEPS_LIMIT = 4096
"""Tables kept; emptied when full (a peak of p counts makes 2p + 1 entries; peaks of a few hundred are rare)."""


def _quantize_counts(counts: list[int]) -> bytes:
    """``quantize`` of a vector of integers (``HashEmbedder._quarters``), the same bytes: each count's byte looked
    up in a table made once per peak, instead of a multiplication and a ``round`` per component."""
    peak = max(max(counts), -min(counts))
    if peak == 0:
        return bytes(len(counts))
    table = _STEPS.get(peak)
    if table is None:
        if len(_STEPS) >= _STEPS_LIMIT:
            _STEPS.clear()
        scale = 127.0 / peak  # what ``quantize`` computes, so each byte is its round(scale * count)
        table = _STEPS[peak] = [round(scale * d) & 0xFF for d in [*range(peak + 1), *range(-peak, 0)]]
    return bytes(map(table.__getitem__, counts))


def quantize(vector: Sequence[float] | Sequence[int]) -> bytes:
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

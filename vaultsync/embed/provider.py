"""The embedding provider interface every embedder implements: a batch of texts in, vectors out
(the built-in embedders and the registry by name: ``embedders``; the semantic extra: ``semantic``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

from ..errors import ProviderError


class Embedder(ABC):
    """Turns texts into vectors. Subclasses set ``embedder_id``, ``version``, ``dims`` and ``embed_batch``."""

    embedder_id: str = ""
    version: str = "1"
    dims: int = 0
    batch_size: int = 256
    fuse: bool = False
    """Whether the default search mode fuses this embedder's vector ranking with the keyword ranking:
    only where that was measured not to make any evaluation set worse (docs/performance.md, "Search quality")."""
    similarity_floor: float | None = None
    """For an embedder that fuses: when no searched chunk holds a query's words, the default mode shows only the
    chunks at least this similar to the query (cosine), marked as similar in meaning with no word matching; None:
    no floor (every nearest chunk is shown)."""
    background: bool = False
    """Whether new texts get this embedder's vectors after their batch rather than inside it: filled by whichever
    process holds the vault's writer role, newest notes first (``store.search.backfill``), so that a model too
    slow to hold a batch up leaves a first import as fast as words alone. Search uses the vectors filled so far."""

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

"""Point-in-time hybrid search: keyword (FTS5 BM25) and vector (sqlite-vec) over the chunks visible at a cutoff."""

from __future__ import annotations

from .engine import DEFAULT_MODE, MODES, export, search
from .embedding import reembed
from .index import SearchIndexer, index_lag
from .schema import ensure_schema
from .text import TOKENIZE, indexed_text, normalize, parse_query

__all__ = ["DEFAULT_MODE", "MODES", "SearchIndexer", "TOKENIZE", "ensure_schema", "export", "index_lag",
           "indexed_text", "normalize", "parse_query", "reembed", "search"]

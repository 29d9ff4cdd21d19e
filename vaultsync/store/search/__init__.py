"""Point-in-time hybrid search, part of how the store answers: keyword (FTS5 BM25) and vector
(sqlite-vec) over the chunks visible at a cutoff, fused (``engine``); the index kept in step with
every batch (``index``); what is visible at a cutoff (``snapshot``). Reached through ``View.search``."""

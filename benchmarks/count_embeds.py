"""Texts a ``--from-git`` import embeds against the texts the index needs (the hashed embedder: which texts
are embedded does not depend on the embedder): parse workers' ahead-of-time embeddings plus those the
writer does inline, beside the distinct docs the index ends with.

    python benchmarks/count_embeds.py VAULT_REPO DB      # e.g. a clone of the Hub cut to its first 70 commits

The figures of benchmarks/results/import-i22.md (6,015 texts embedded in vain before, 25 after). It counts
by wrapping two functions of the search index in this process; nothing is changed on disk but DB.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from vaultsync.store.search import embedding
from vaultsync.store.search import index as search_index
from vaultsync.vault import Vault

counts = {"ahead": 0, "inline": 0}
_take_ahead = search_index.SearchIndexer.take_ahead
_write_vectors = search_index.write_vectors


def counting_write(con, embedder, docs):  # type: ignore[no-untyped-def]
    counts["inline"] += sum(1 for _, t in docs if (embedder.signature, t) not in embedding.AHEAD)
    return _write_vectors(con, embedder, docs)


def counting_take(payload):  # type: ignore[no-untyped-def]
    counts["ahead"] += len(payload[1])
    return _take_ahead(payload)


def main() -> None:
    root, db = Path(sys.argv[1]), Path(sys.argv[2])
    for p in db.parent.glob(db.name + "*"):
        p.unlink()
    search_index.SearchIndexer.take_ahead = staticmethod(counting_take)
    search_index.write_vectors = counting_write
    started = time.perf_counter()
    with Vault.open(db, root=root, parse_workers=2) as vault:
        result = vault.import_git()
        docs = vault._store.db.con.execute("SELECT count(*) FROM search_docs").fetchone()[0]  # the index's texts
    print(f"commits {result.commits}  texts embedded ahead {counts['ahead']}  inline {counts['inline']}  "
          f"docs in the index {docs}  seconds {time.perf_counter() - started:.1f}")


if __name__ == "__main__":
    main()

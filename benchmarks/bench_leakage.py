"""Leakage: how often does searching "as of T" return a top 5 that differs from the truth at T?

The obsidian-help history is imported from git (one batch per commit, each known at its committer time).
At random historical cutoffs, queries of one or two words taken from chunks visible then are answered by:

- the truth: a fresh FTS5 table over exactly the chunks ``export --as-of T`` prints;
- latest only: the current index, ignoring the cutoff;
- one global index of every chunk revision ever, top 20 / 50 / 100 / all, then keeping visible chunks;
- an index of the chunk revisions known by T (including those already replaced), then keeping visible ones;
- this store: ``search --as-of T --mode keyword``.

A query counts as differing when its top 5 (path, chunk id and text, in order) is not the truth's.
60 random cutoffs of 5 queries; quick: the sample vault with two batches, one cutoff of 3 queries.
"""

from __future__ import annotations

import random
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / "tests" / "support")
)  # search_truth: the independent ground truth
from search_truth import fresh_keyword, split_export  # noqa: E402

from benchmarks.harness import Figures  # noqa: E402
from benchmarks.inputs import bench_work, clone, quick_history_db, workdir  # noqa: E402
from vaultsync.embed.tokenizer import parse_query  # noqa: E402
from vaultsync.store.codec import content_key as doc_hash  # noqa: E402
from vaultsync.store.search.keyword import bm25, idf, phrase_freqs  # noqa: E402
from vaultsync.vault import Vault  # noqa: E402

TOP = 5


def build(work: Path) -> Path:
    db = work / "help-history.db"
    if db.exists():
        Vault.open(db, name="help").close()  # opening for writing brings an older index's schema up to date
        return db
    root = clone("obsidian-help.bundle", work / "help")
    with Vault.open(db, root=root, name="help") as vault:
        vault.import_git()
    return db


class Rows:
    """Every chunk revision of the vault in memory: doc, lifetime, and the stable order key."""

    def __init__(self, con, vault_id: int) -> None:
        self.by_doc: dict[int, list[tuple[int, int, int | None]]] = defaultdict(list)
        self.key: dict[int, tuple[str, int, str, bytes]] = {}
        self.length: dict[int, int] = {}
        self.life: dict[int, tuple[int, int | None]] = {}
        for row_id, doc_id, born, died, path, ord_, chunk_id, h, length in con.execute(
            """SELECT r.id, r.doc_id, r.born, r.died, n.path, c.ord, c.chunk_id, d.hash, d.length
               FROM search_rows r JOIN chunks c ON c.id = r.id JOIN notes n ON n.id = r.note_id
               JOIN search_docs d ON d.id = r.doc_id WHERE r.vault_id = ?""",
            (vault_id,),
        ):
            self.by_doc[doc_id].append((row_id, born, died))
            self.life[row_id] = (born, died)
            self.key[row_id] = (path, ord_, chunk_id, h)
            self.length[doc_id] = length

    def totals(self, counted) -> tuple[int, int]:
        """(rows, tokens) over the rows ``counted`` (a row predicate)."""
        n_rows = tokens = 0
        for doc_id, rows in self.by_doc.items():
            k = sum(1 for r in rows if counted(r))
            n_rows += k
            tokens += k * self.length[doc_id]
        return n_rows, tokens

    def rank(self, freqs: list[dict], counted, listed, totals: tuple[int, int]) -> list[tuple[float, int]]:
        """bm25 of every row ``listed`` matching, with statistics over the rows ``counted`` (row predicates)."""
        n_rows, tokens = totals
        idfs = [idf(n_rows, sum(sum(1 for r in self.by_doc[d] if counted(r)) for d in per)) for per in freqs]
        out = []
        docs = set().union(*freqs) if freqs else set()
        for doc_id in docs:
            f = [float(per[doc_id][0]) if doc_id in per else 0.0 for per in freqs]
            s = bm25(f, idfs, float(self.length[doc_id]), tokens / n_rows)
            out += [(s, r[0]) for r in self.by_doc[doc_id] if listed(r)]
        out.sort(key=lambda x: (x[0], self.key[x[1]][:2]))
        return out

    def visible(self, row_id: int, batch: int) -> bool:
        born, died = self.life[row_id]
        return born <= batch and (died is None or died > batch)

    def ident(self, row_id: int) -> tuple[str, str, bytes]:
        path, _, chunk_id, h = self.key[row_id]
        return path, chunk_id, h


def run(quick: bool) -> Figures:
    """The obsidian-help history, 60 cutoffs of 5 queries; quick: the sample vault's two batches, 1 cutoff of 3."""
    if quick:
        with workdir("leakage") as work:
            _, db, _ = quick_history_db(work)
            return measure(db, cutoffs=1, per_cutoff=3, seed=3)
    return measure(build(bench_work("leakage")), cutoffs=60, per_cutoff=5, seed=3)


def measure(db: Path, cutoffs: int, per_cutoff: int, seed: int) -> Figures:
    rng = random.Random(seed)
    systems = [
        "latest only",
        "global top 20",
        "global top 50",
        "global top 100",
        "global all",
        "known by cutoff",
        "this store",
    ]
    differs = {s: 0 for s in systems}
    total = 0
    with Vault.open(db, readonly=True) as vault:
        con = vault._store.db.con
        rows = Rows(con, vault.id)
        batches = con.execute("SELECT id, known_at FROM batches WHERE vault_id = ? ORDER BY id", (vault.id,)).fetchall()
        max_doc = con.execute("SELECT max(id) FROM search_docs").fetchone()[0]
        picks = sorted(rng.sample(batches[:-1], min(cutoffs, len(batches) - 1)))
        everything = rows.totals(lambda r: True)
        for batch, known_at in picks:
            header, chunks = split_export(vault.export(as_of=known_at))
            known_totals = rows.totals(lambda r, b=batch: r[1] <= b)
            for _ in range(per_cutoff):
                words: list[str] = []
                while not words:  # a chunk with words in it (some hold only a table, an image or front matter)
                    words = [w for w in re.findall(r"\w{3,}", rng.choice(chunks)["indexed_text"]) if not w.isdigit()]
                query = " ".join(rng.sample(words, min(len(words), rng.choice([1, 2]))))
                expression = parse_query(query).expression
                truth = [(p, c) for p, c, _ in fresh_keyword(header, chunks, expression, TOP)]
                by_key = {(c["path"], c["chunk_id"]): doc_hash(c["indexed_text"]) for c in chunks}
                truth_ids = [(p, c, by_key[(p, c)]) for p, c in truth]
                total += 1
                ours = vault.search(query, as_of=known_at, mode="keyword", limit=TOP).hits
                got = {"this store": [(h["path"], h["chunk_id"], doc_hash(by_text(chunks, h))) for h in ours]}
                now = vault.search(query, mode="keyword", limit=TOP).hits
                got["latest only"] = [(h["path"], h["chunk_id"], current_hash(con, h)) for h in now]
                freqs = [phrase_freqs(con, p.fts(), max_doc) for p in parse_query(query).phrases]
                ranked = rows.rank(freqs, lambda r: True, lambda r: True, everything)
                for n in (20, 50, 100, None):
                    top = ranked if n is None else ranked[:n]
                    got[f"global top {n}" if n else "global all"] = [
                        rows.ident(rid) for _, rid in top if rows.visible(rid, batch)
                    ][:TOP]
                known = rows.rank(freqs, lambda r, b=batch: r[1] <= b, lambda r, b=batch: r[1] <= b, known_totals)
                got["known by cutoff"] = [rows.ident(rid) for _, rid in known if rows.visible(rid, batch)][:TOP]
                for name in systems:
                    if got[name] != truth_ids:
                        differs[name] += 1
    figures: Figures = {"queries": total, "cutoffs": len(picks), "top": TOP}
    figures.update({f"differs_percent.{name}": round(100.0 * differs[name] / max(total, 1), 1) for name in systems})
    return figures


def by_text(chunks: list[dict], hit: dict) -> str:
    for c in chunks:
        if c["path"] == hit["path"] and c["chunk_id"] == hit["chunk_id"]:
            return c["indexed_text"]
    return ""


def current_hash(con, hit: dict) -> bytes:
    row = con.execute(
        """SELECT d.hash FROM search_rows r JOIN search_docs d ON d.id = r.doc_id JOIN chunks c ON c.id = r.id
           JOIN notes n ON n.id = r.note_id WHERE r.died IS NULL AND n.path = ? AND c.chunk_id = ?""",
        (hit["path"], hit["chunk_id"]),
    ).fetchone()
    return row[0] if row else b""

"""The keyword index's term dictionary on PostgreSQL (m016): each distinct term's id, kept in blocks of terms.

A history has tens of thousands of distinct terms of a few bytes each. One row per term (m013's ``search_terms``) paid
a tuple header and a line pointer (28 bytes) for a term of about 4, and a btree entry more: 1.9 MB for the Help vault's
first 200 commits' 25k terms. Here one row holds a block of up to ``2 * BLOCK`` terms in byte order (``COLLATE "C"``,
as FTS5 compares) and their ids in the same order, found by a unique btree on the block's lowest term (``first``; the
first block's is ''): 0.34 MB for the same terms. Nothing maps an id back to its term; ids are never reused or changed
(every doc's postings row holds them), new ones come from the sequence ``search_term_ids``.

- A term's id: the block with the greatest ``first <= term``, its arrays unnested.
- A prefix's ids: the blocks from the one covering the prefix up to those whose ``first`` is below the prefix's upper
  bound (the prefix with its last character incremented), their terms filtered by ``starts_with``, in byte order.
- Learning new terms (``Learner``): the blocks covering them locked (``FOR UPDATE``, in ``first`` order) and read
  again, the terms still missing given new ids; each block changed is written once, before the transaction commits
  (``Learner.flush``), split in blocks of ``BLOCK`` when it grew past ``2 * BLOCK`` terms. Writers adding terms take
  turns (``TURN``, an advisory lock held to the commit): the second finds the first's terms once it may go on, each
  term gets one id, and a batch learning note by note, locking a lower block after a higher one, cannot deadlock with
  another. A split committed between the lookup and the lock may still move a term to a block not locked: then the
  locks just taken are let go (a savepoint) and taken again.

Block boundaries fall only at terms of at most ``KEY_CHARS`` characters (a btree entry has a size limit): a longer term
stays inside a block. Blocks are updated in place (readers see the version of their snapshot): the table is not
append-only, unlike the revision tables.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from typing import Any

from ...errors import StoreError

TABLE = "search_term_blocks"
BLOCK = 128
"""Terms a block gets when built or split (a block is split when it passes twice as many). Measured once, by hand
(``benchmarks/pg_size.py`` gives this size's bytes), on the Help vault's
first 200 commits (25k terms, after ``VACUUM``): blocks of 64, 128, 256 and 512 terms take 0.57, 0.34, 0.37 and
0.39 MB, against 1.89 MB for one row per term (heap 1.15 MB, index 0.70 MB); past 2 kB a row's arrays go to TOAST,
compressed, which saves less than the smaller heap of 128."""
KEY_CHARS = 256
"""The longest term a block may begin with (the btree of ``first`` holds it whole)."""
TURN = "SELECT pg_advisory_xact_lock(hashtextextended('vaultsync/' || current_schema() || '/term_blocks', 0))"
"""Writers adding terms take turns: a transaction-level advisory lock of the schema's dictionary, taken before the first
block lock and held to the commit. Without it a batch that learns note by note can lock a lower block after a higher
one, and two writers (two vaults of one database) adding terms at once deadlock: PostgreSQL fails one batch. With it the
second waits for the first's commit (a long import keeps the other vaults' batches with new terms waiting until then);
a batch whose terms are all known takes no turn."""
ATTEMPTS = 64
"""How many times ``learn`` takes its locks again after splits by other writers moved its terms (each retry follows
another writer's commit)."""

CREATE = f"""
CREATE TABLE {TABLE} (
    first text COLLATE "C" NOT NULL,    -- the block's lowest term ('' for the first block)
    terms text[] COLLATE "C" NOT NULL,  -- its terms, in byte order
    ids   integer[] NOT NULL            -- their ids, in the same order
);
CREATE UNIQUE INDEX {TABLE}_by_first ON {TABLE} (first);
CREATE SEQUENCE search_term_ids AS integer;
"""

COVER = f'(SELECT c.first FROM {TABLE} c WHERE c.first <= {{}} COLLATE "C" ORDER BY c.first DESC LIMIT 1)'
"""SQL: the ``first`` of the block covering the term ``{}`` (an SQL text expression)."""

PAIRS = f'(SELECT u.term COLLATE "C" AS term, u.id FROM {TABLE} b, unnest(b.terms, b.ids) AS u(term, id))'
"""SQL: every (term, id) of the dictionary."""


def present(raw: Any) -> bool:
    """Whether the database keeps its terms in blocks (m016; before it, one row per term in ``search_terms``)."""
    from .catalog import has

    return has(raw, TABLE)


def find(raw: Any, terms: list[str]) -> dict[str, int]:
    """The ids of those of ``terms`` the dictionary holds."""
    if not terms:
        return {}
    sql = (
        f"SELECT u.term, u.id FROM {TABLE} b, unnest(b.terms, b.ids) AS u(term, id) "
        f"WHERE b.first IN (SELECT {COVER.format('q.t')} FROM unnest(%(t)s::text[]) AS q(t)) "
        "AND u.term IN (SELECT unnest(%(t)s::text[]))"
    )
    return {term: int(term_id) for term, term_id in raw.execute(sql, {"t": terms})}


def one(raw: Any, term: str) -> int | None:
    """The id of ``term`` (None: the dictionary lacks it), from its block alone."""
    found = raw.execute(
        f'SELECT u.id FROM (SELECT terms, ids FROM {TABLE} WHERE first <= %(t)s COLLATE "C" ORDER BY first DESC '
        "LIMIT 1) AS b, unnest(b.terms, b.ids) AS u(term, id) WHERE u.term = %(t)s",
        {"t": term},
    ).fetchone()
    return None if found is None else int(found[0])


def prefixed(raw: Any, prefix: str) -> list[int]:
    """The ids of every term starting with ``prefix`` (not empty), in the terms' byte order."""
    sql = (
        f"SELECT u.id FROM {TABLE} b, unnest(b.terms, b.ids) AS u(term, id) WHERE b.first >= {COVER.format('%(p)s')} "
        'AND (%(u)s::text IS NULL OR b.first < %(u)s) AND starts_with(u.term, %(p)s) ORDER BY u.term COLLATE "C"'
    )
    return [int(r[0]) for r in raw.execute(sql, {"p": prefix, "u": upper(prefix)})]


def upper(prefix: str) -> str | None:
    """The lowest string above every string starting with ``prefix`` (None: there is none), in code point order."""
    while prefix:
        last = ord(prefix[-1]) + 1
        if last == 0xD800:  # (surrogates are no characters: the next one is U+E000)
            last = 0xE000
        if last <= 0x10FFFF:
            return prefix[:-1] + chr(last)
        prefix = prefix[:-1]
    return None


def learn(raw: Any, terms: list[str]) -> dict[str, int]:
    """The ids of ``terms``, the new ones added and written at once (``Learner``), inside the caller's transaction."""
    learner = Learner(raw)
    learner.learn(terms)
    learner.flush()
    return {t: learner.ids[t] for t in terms}


class Learner:
    """One transaction's terms: their ids (``ids``), the new ones given ids at once and their blocks written at the end
    (``flush``, before the transaction commits), so that a block is rewritten once a transaction, not once per
    ``learn`` (each rewrite leaves a dead copy of the block behind until the next ``VACUUM``). The blocks that get new
    terms stay locked from ``learn`` to the commit, and so does the dictionary's turn (``TURN``), taken before the
    first of them."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.ids: dict[str, int] = {}
        """Every term learned so far, known or new."""
        self.held: dict[str, dict[str, int]] = {}
        """The blocks locked (by ``first``): their terms and ids, with the additions not yet written."""
        self.changed: set[str] = set()
        """The held blocks with additions (``flush`` writes them)."""
        self.turn = False
        """Whether this transaction holds the dictionary's turn (``TURN``)."""

    def learn(self, terms: list[str] | set[str]) -> None:
        """Add the ids of ``terms`` to ``ids``, giving the unknown ones new ids (written by ``flush``)."""
        unknown = sorted(set(terms).difference(self.ids))
        if not unknown:
            return
        self.ids.update(find(self.raw, unknown))
        missing = [t for t in unknown if t not in self.ids]
        if missing and not self.turn:  # (outside the savepoint below: its rollback would let the lock go)
            self.raw.execute(TURN)
            self.turn = True
        for _ in range(ATTEMPTS):
            if not missing:
                return
            try:
                with self.raw.transaction():
                    self._add(missing)
                    return
            except _Moved:
                continue
        raise StoreError("the term dictionary kept changing under this writer; try again")

    def _add(self, missing: list[str]) -> None:
        """Lock the blocks covering ``missing`` (sorted), then add those still missing to them."""
        raw = self.raw
        blocks = raw.execute(
            f"SELECT first, terms, ids FROM {TABLE} WHERE first IN "
            f"(SELECT {COVER.format('q.t')} FROM unnest(%s::text[]) AS q(t)) ORDER BY first FOR UPDATE",
            (missing,),
        ).fetchall()
        firsts = [b[0] for b in blocks]
        covering = {r[0] for r in raw.execute(f"SELECT DISTINCT {COVER.format('q.t')} FROM unnest(%s::text[]) AS q(t)",
                                              (missing,))}  # fmt: skip
        if not covering <= set(firsts):  # (read after the locks: a split committed meanwhile shows here)
            raise _Moved
        read = {
            first: self.held[first] if first in self.held else dict(zip(terms, ids)) for first, terms, ids in blocks
        }
        new: dict[str, list[str]] = {}
        for term in missing:
            first = firsts[bisect_right(firsts, term) - 1]
            if term in read[first]:
                self.ids[term] = read[first][term]
            else:
                new.setdefault(first, []).append(term)
        count = sum(len(ts) for ts in new.values())
        fresh = iter([int(r[0]) for r in raw.execute("SELECT nextval('search_term_ids') FROM generate_series(1, %s)",
                                                      (count,))])  # fmt: skip
        self.held.update(read)
        for first, added in new.items():
            for term in added:
                self.held[first][term] = self.ids[term] = next(fresh)
            self.changed.add(first)

    def flush(self) -> None:
        """Write the blocks given new terms, each split in blocks of ``BLOCK`` when it passed twice as many."""
        updates: list[tuple[list[str], list[int], str]] = []
        inserts: list[tuple[str, list[str], list[int]]] = []
        for first in sorted(self.changed):
            pairs = self.held[first]
            ordered = sorted(pairs)
            pieces = list(split(ordered)) if len(ordered) > 2 * BLOCK else [ordered]
            for i, piece in enumerate(pieces):
                if i == 0:
                    updates.append((piece, [pairs[t] for t in piece], first))
                else:
                    inserts.append((piece[0], piece, [pairs[t] for t in piece]))
        if updates:
            with self.raw.cursor() as cur:
                cur.executemany(f"UPDATE {TABLE} SET terms = %s::text[], ids = %s::integer[] WHERE first = %s", updates)
                cur.executemany(f"INSERT INTO {TABLE} (first, terms, ids) VALUES (%s, %s::text[], %s::integer[])",
                                inserts)  # fmt: skip
        self.changed.clear()
        self.held.clear()  # (the locks stay; the blocks are read again, split or not, by the next ``_add``)


class _Moved(Exception):
    """A split committed by another writer moved terms to a block this one has not locked."""


def split(terms: list[str]) -> Iterator[list[str]]:
    """Sorted ``terms`` in blocks of about ``BLOCK``, each but the first beginning at a term of ``KEY_CHARS`` or
    fewer characters."""
    size = BLOCK
    start = 0
    cut = size
    while cut < len(terms):
        if len(terms[cut]) <= KEY_CHARS:
            yield terms[start:cut]
            start = cut
            cut += size
        else:
            cut += 1
    yield terms[start:]


def create(raw: Any) -> None:
    """m016: the blocks, built from ``search_terms`` (its ids kept) when it is there, which is dropped; safe to run
    again."""
    if raw.execute("SELECT to_regclass(%s)", (TABLE,)).fetchone()[0] is None:
        raw.execute(CREATE)
        pairs: list[tuple[str, int]] = []
        if raw.execute("SELECT to_regclass('search_terms')").fetchone()[0] is not None:
            pairs = [(t, int(i)) for t, i in raw.execute('SELECT term, id FROM search_terms ORDER BY term COLLATE "C"')]
        terms = [t for t, _ in pairs]
        at = dict(pairs)
        rows = []
        for i, piece in enumerate(split(terms) if terms else [[]]):
            rows.append(("" if i == 0 else piece[0], piece, [at[t] for t in piece]))
        with raw.cursor() as cur:
            cur.executemany(f"INSERT INTO {TABLE} (first, terms, ids) VALUES (%s, %s::text[], %s::integer[])", rows)
        top = max(at.values(), default=0)
        raw.execute("SELECT setval('search_term_ids', %s, %s)", (max(top, 1), top > 0))
    raw.execute("DROP TABLE IF EXISTS search_terms")
    raw.execute(f"ANALYZE {TABLE}")


def clear(raw: Any) -> None:
    """Every term gone (a reindex): one empty first block left. Ids are not reused."""
    raw.execute(f"DELETE FROM {TABLE} WHERE first <> ''")
    raw.execute(f"UPDATE {TABLE} SET terms = '{{}}', ids = '{{}}'")

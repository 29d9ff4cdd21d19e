"""The default mode's ranking: BM25 candidates re-ranked by phrase, proximity and title/heading signals.

Every signal is a pure function of the query and of one chunk's ``indexed_text``, tokenized exactly as
FTS5 tokenizes it (``text.TOKENIZE``, through SQLite's own tokenizer), so it does not depend on the
cutoff: with BM25 exact at every cutoff (``keyword``), the re-ranked list is that of the same pipeline
over a fresh index of exactly the visible chunks.

For a query of tokens ``q`` (its phrases in order; ``n`` distinct tokens) and a chunk whose indexed text
is a *head* (its first three lines: title, aliases, heading path) and a *body* (the chunk's text):

* ``phrase``: the longest run of consecutive query tokens found consecutively, in order, in the body,
  as a share of the query's length (0 unless the run has at least two tokens);
* ``proximity``: the most distinct query tokens inside any window of ``WINDOW`` body tokens, as a share
  of ``n`` (0 for a one-token query);
* ``head``: the share of the ``n`` tokens found in the title, aliases or heading path;
* ``whole``: 1 when the query has at least two tokens and the indexed text holds all of them
  consecutively and in order (stopwords included: what FTS5's phrase query of the whole query,
  ``QueryTokens.whole``, matches), else 0.

A candidate's score is ``bm25 / best bm25 among the candidates`` (both as positive numbers) plus
``sum(WEIGHTS[s] * s)`` (for an embedder that fuses, ``vector`` is the cosine similarity as a share of the
best among the candidates, a negative one as 0, weighed ``QUESTION_VECTOR`` for a question in everyday words
and ``DESCRIPTION_VECTOR`` for another query of at least three tokens: ``vector_weight``), plus ``WHOLE`` for
a candidate holding the whole query: more than any other candidate can score, so such a chunk ranks above
every chunk that does not, whatever their BM25 scores. Higher is better, ties broken by path then chunk
position. The candidates are the ``POOL`` (or ``limit``, if more) best chunks by BM25, joined by the ``POOL``
(or ``limit``) best by BM25 among the chunks holding the whole query (``keyword.rank_default``), so that one
is never lost because common words gave other chunks a higher BM25.

For a question in everyday words (``everyday``), ``q`` is its content words: BM25 and the phrase,
proximity and head signals weigh those; ``whole`` is always of the query as typed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import apsw

from ...embed.tokenizer import TOKENIZE, KeywordQuery, indexed_text
from ..codec import unpack
from .keyword import Scored

POOL = 200
"""BM25 candidates re-ranked."""
WINDOW = 12
"""Tokens in the proximity window."""
WEIGHTS = {"phrase": 0.5, "proximity": 0.5, "head": 0.5, "vector": 1.0}
"""Weight of each signal beside the normalized BM25 score (whose best value is 1); ``vector`` (the cosine
similarity to the query, as a share of the best among the candidates) counts only for an embedder that fuses.
The text signals' weights were chosen on the Hub evaluation (``benchmarks/bench_quality.py``, a grid over 600
title, 358 anchor and 400 known-item queries): those that keep every set at least as good as BM25 alone on
recall@10 and MRR@10 and gain most on known-item success@1. (A share-of-query-words signal was tried and left
out: it made the anchor set worse.)"""

QUESTION_VECTOR = 8.0
"""The ``vector`` weight for a question in everyday words (``everyday.everyday``): what such a question means
is better told by the semantic model than by its words (they say "combine", the note says "merge"). Chosen on
the ``tune`` part of ``benchmarks/questions/everyday.jsonl`` with all-MiniLM-L6-v2 (``bench_questions.py``):
more weight kept raising @1 and @10 on the Help's questions, and the Hub's and the known-item, title and
anchor sets do not use it (they are not questions)."""

DESCRIPTION_VECTOR = 4.0
"""The ``vector`` weight for a query of at least ``DESCRIPTION_TOKENS`` tokens that is not a question in everyday
words (no question word, person or auxiliary): a description of what is wanted ("scribble comments on PDFs",
"writing formulas with LaTeX"), which often names none of the note's words either. Chosen on the ``tune`` part of
``benchmarks/questions/everyday.jsonl`` (all-MiniLM-L6-v2, the Hub's guides and the Help): 1 to 4 raised the
Hub's @10 from 0.63 to 0.74 and the Help's @1 from 0.62 to 0.66; 8 gained no more there and cost the Hub's anchor
set (link texts, which are such queries too) a second query at @1, 4 cost it one of 105."""
DESCRIPTION_TOKENS = 3
"""Fewer tokens is a name or a keyword search: the vector keeps its own weight (``WEIGHTS``)."""

WHOLE = (
    1.0
    + sum(w for k, w in WEIGHTS.items() if k != "vector")
    + max(WEIGHTS["vector"], QUESTION_VECTOR, DESCRIPTION_VECTOR)
)
"""Added to the score of a candidate holding the whole query in order: more than normalized BM25 (at most 1)
plus every weighted signal (the vector's at most its heavier weight) can give a candidate that does not (a
candidate whose body holds the whole query is itself one that does: ``phrase`` reaches 1 only there), so a
remembered phrase's holders come first for a question in everyday words too.

Its measured cost (``benchmarks/results/quality_i23.md``): on the Hub's anchor set, link texts that name a
note, 13 of 358 queries rank their note lower and none higher (success@1 0.559 to 0.533, MRR@10 0.627 to
0.609), each because other notes hold the link text verbatim (a release note naming the plugin, a list or
theme note using the words) while the named note does not, in its text, title, aliases or heading path;
no rule that keeps holders first can rank such a note above them. Applying the rule only from three
tokens would bring back the six two-word queries among them (0.539 / 0.617), and is not done: the rule
holds for every query of at least two tokens."""

SIGNALS = ("phrase", "proximity", "head", "whole")
_TOKENIZER = apsw.Connection(":memory:").fts5_tokenizer(TOKENIZE.split()[0], TOKENIZE.split()[1:])


def tokens(text: str) -> list[str]:
    """The tokens FTS5 indexes for ``text`` (already normalized, as ``indexed_text`` is)."""
    if not text:
        return []
    return _TOKENIZER(
        text.encode("utf-8", "surrogatepass"),
        apsw.FTS5_TOKENIZE_DOCUMENT,
        None,
        include_offsets=False,
        include_colocated=False,
    )


def token_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, token) of each token of ``text``, as character offsets."""
    if not text:
        return []
    data = text.encode("utf-8", "surrogatepass")
    found = _TOKENIZER(data, apsw.FTS5_TOKENIZE_DOCUMENT, None, include_colocated=False)
    if len(data) == len(text):
        return [(s, e, tok) for s, e, tok in found]
    out = []
    byte = char = 0  # byte offset -> character offset, counted from the last token's end
    for s, e, tok in found:
        if s < byte:
            byte = char = 0
        start = char + len(data[byte:s].decode("utf-8", "surrogatepass"))
        char, byte = start + len(data[s:e].decode("utf-8", "surrogatepass")), e
        out.append((start, char, tok))
    return out


@dataclass(frozen=True, slots=True)
class QueryTokens:
    """A query as FTS5 tokenizes it: the token sequence, and which positions are prefixes (``word*``)."""

    sequence: tuple[str, ...]
    prefix: tuple[bool, ...]

    @classmethod
    def of(cls, query: KeywordQuery) -> QueryTokens:
        seq: list[str] = []
        pre: list[bool] = []
        for phrase in query.phrases:
            found = tokens(phrase.text)
            seq += found
            pre += [False] * (len(found) - 1) + [phrase.prefix] if found else []
        return cls(tuple(seq), tuple(pre))

    def matcher(self) -> list[tuple[str, bool]]:
        return sorted(set(zip(self.sequence, self.prefix)))

    @property
    def whole(self) -> str | None:
        """The FTS5 phrase of every query token in order (``"a" + "b" + "c" *``), None for fewer than two tokens."""
        if len(self.sequence) < 2:
            return None
        return " + ".join(
            '"' + tok.replace('"', '""') + '"' + (" *" if pre else "") for tok, pre in zip(self.sequence, self.prefix)
        )

    def held_by(self, toks: Sequence[str]) -> bool:
        """True when ``toks`` hold the query's tokens consecutively and in order (a prefix token as a prefix)."""
        seq, pre, n = self.sequence, self.prefix, len(self.sequence)
        first, first_pre = seq[0], pre[0]
        if not first_pre:  # jump from one occurrence of the first token to the next (list.index runs in C)
            i, stop = -1, max(len(toks) - n + 1, 0)  # (a negative stop would count from the end)
            while True:
                try:
                    i = toks.index(first, i + 1, stop)
                except ValueError:
                    return False
                if all(toks[i + k] == seq[k] or (pre[k] and toks[i + k].startswith(seq[k])) for k in range(1, n)):
                    return True
        for i in range(len(toks) - n + 1):
            if toks[i] == first or (first_pre and toks[i].startswith(first)):
                if all(toks[i + k] == seq[k] or (pre[k] and toks[i + k].startswith(seq[k])) for k in range(1, n)):
                    return True
        return False


def _matches(toks: Sequence[str], distinct: list[tuple[str, bool]]) -> list[tuple[int, list[int]]]:
    """``(position, indexes of the distinct query tokens it is)`` of each token that is one (a prefix may add more
    than one), in order; tokens matching nothing are left out (most of a body: the signals only read the matches)."""
    exact = {w: i for i, (w, is_prefix) in enumerate(distinct) if not is_prefix}
    prefixes = [(w, i) for i, (w, is_prefix) in enumerate(distinct) if is_prefix]
    if not prefixes:
        return [(p, [exact[tok]]) for p, tok in enumerate(toks) if tok in exact]
    out = []
    for p, tok in enumerate(toks):
        found = [i for w, i in prefixes if tok.startswith(w)]
        if tok in exact:
            found.append(exact[tok])
        if found:
            out.append((p, found))
    return out


def signals(indexed_text: str, query: QueryTokens, whole: QueryTokens | None = None) -> dict[str, float]:
    """The text signals of one chunk (see the module docstring); ``whole``: the query as typed, when ``query``
    weighs fewer of its words (``everyday.content``): a chunk holding it whole still counts as holding it."""
    distinct = query.matcher()
    n = len(distinct)
    if n == 0:
        return dict.fromkeys(SIGNALS, 0.0)
    parts = indexed_text.split("\n", 3)
    head_toks = tokens("\n".join(parts[:3]))
    body_toks = tokens(parts[3]) if len(parts) > 3 else []
    head_found = {i for _, m in _matches(head_toks, distinct) for i in m}
    hits = _matches(body_toks, distinct)
    held = _whole(whole or query, head_toks + body_toks)
    return {
        # a chunk holding the query as typed holds its whole phrase, though a question weighs fewer of its words
        "phrase": 1.0 if held else _phrase(hits, query, distinct) / len(query.sequence),
        "proximity": _proximity(hits, n) / n if n > 1 else 0.0,
        "head": len(head_found) / n,
        "whole": held,
    }


def _whole(query: QueryTokens, toks: list[str]) -> float:
    return 1.0 if len(query.sequence) > 1 and query.held_by(toks) else 0.0


def _phrase(hits: list[tuple[int, list[int]]], query: QueryTokens, distinct: list[tuple[str, bool]]) -> int:
    """Longest run (at least 2) of consecutive query tokens appearing consecutively in the body (``hits``: the
    body's matching positions, ``_matches``)."""
    where: dict[int, list[int]] = {}
    for j, key in enumerate(zip(query.sequence, query.prefix)):
        where.setdefault(distinct.index(key), []).append(j)
    best = 0
    prev: dict[int, int] = {}
    last = -2
    for p, matched in hits:
        if p != last + 1:  # a token matching nothing came between: no run goes on
            prev = {}
        cur = {j: prev.get(j - 1, 0) + 1 for i in matched for j in where[i]}
        best = max(best, *cur.values())
        prev, last = cur, p
    return best if best >= 2 else 0


def _proximity(hits: list[tuple[int, list[int]]], n: int) -> int:
    """Most distinct query tokens within any ``WINDOW`` consecutive body tokens (``hits``: the body's matching
    positions; the best window ends on one of them)."""
    best = 0
    counts: dict[int, int] = {}
    first = 0  # the oldest match still inside the window
    for p, matched in hits:
        for i in matched:
            counts[i] = counts.get(i, 0) + 1
        while hits[first][0] <= p - WINDOW:
            for i in hits[first][1]:
                counts[i] -= 1
                if counts[i] == 0:
                    del counts[i]
            first += 1
        best = max(best, len(counts))
        if best == n:
            break
    return best


def vector_weight(question: bool, words: int) -> float:
    """The ``vector`` signal's weight for a query of ``words`` tokens: ``QUESTION_VECTOR`` for a ``question`` in
    everyday words, ``DESCRIPTION_VECTOR`` for another of at least ``DESCRIPTION_TOKENS`` tokens, else
    ``WEIGHTS["vector"]``."""
    if question:
        return QUESTION_VECTOR
    return DESCRIPTION_VECTOR if words >= DESCRIPTION_TOKENS else WEIGHTS["vector"]


def combine(
    bm25_scores: Sequence[float], found: Sequence[dict[str, float]], weight: float | None = None
) -> list[float]:
    """Final scores (higher is better) of candidates given their ``bm25()`` values (lower is better) and signals;
    a ``vector`` signal counts as a share of the best among the candidates (a negative similarity as none),
    weighed ``weight`` (``vector_weight``; default ``WEIGHTS["vector"]``)."""
    best = max((-s for s in bm25_scores), default=0.0)
    nearest = max((v.get("vector", 0.0) for v in found), default=0.0)
    share = (WEIGHTS["vector"] if weight is None else weight) / nearest if nearest > 0 else 0.0
    return [
        (-s / best if best > 0 else 0.0)
        + sum(WEIGHTS[k] * v.get(k, 0.0) for k in WEIGHTS if k != "vector")
        + share * max(v.get("vector", 0.0), 0.0)
        + WHOLE * v.get("whole", 0.0)
        for s, v in zip(bm25_scores, found)
    ]


def rerank(
    con: apsw.Connection,
    pool: list[Scored],
    query: KeywordQuery,
    cosines: dict[int, float] | None = None,
    typed: KeywordQuery | None = None,
    weight: float | None = None,
) -> list[tuple[Scored, dict[str, float]]]:
    """The BM25 candidates ``pool`` ordered by their final score (``Scored.score``), with their signals
    and ``bm25`` (the candidate's ``bm25()``); ``query`` is what is weighed, ``typed`` the query as typed
    (for ``whole``; default: ``query``), ``weight`` the ``vector`` signal's (``vector_weight``)."""
    if not pool:
        return []
    wanted = QueryTokens.of(query)
    whole = QueryTokens.of(typed) if typed is not None else None
    texts: dict[int, str] = {}
    keys: dict[int, tuple[str, int]] = {}  # the tie-break (``keyword.order_key``), read with the texts
    bodies: dict[int, str] = {}  # candidates sharing a text (copies, unchanged chunks) unpack it once
    for row_id, heading, text_id, body, title, aliases, path, ord_ in con.execute(
        """SELECT c.id, c.heading_path, c.text_id, t.body, n.title, n.aliases, n.path, c.ord FROM chunks c
               JOIN texts t ON t.id = c.text_id JOIN notes n ON n.id = c.note_id
               WHERE c.id IN (SELECT value FROM json_each(?))""",
        (json.dumps([s.row_id for s in pool]),),
    ):
        keys[row_id] = (path, ord_)
        if text_id not in bodies:
            bodies[text_id] = unpack(body)
        texts[row_id] = indexed_text(title, json.loads(aliases or "[]"), json.loads(heading), bodies[text_id])
    by_text = {text: signals(text, wanted, whole) for text in set(texts.values())}  # a pure function of the text
    found = [dict(by_text[texts[s.row_id]]) for s in pool]
    if cosines is not None:
        for s, sig in zip(pool, found):
            sig["vector"] = cosines.get(s.row_id, 0.0)
    final = combine([s.score for s in pool], found, weight)
    out = [(Scored(s.row_id, f), {"bm25": s.score, **sig}) for s, f, sig in zip(pool, final, found)]
    out.sort(key=lambda item: (-item[0].score, keys[item[0].row_id]))
    return out

"""The default mode's text signals read only the positions where a query token matches (and find the whole query by
jumping between occurrences of its first token): on any text and any query, they equal the signals computed by
walking every token, as the ranking first did (kept here as the reference)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vaultsync.store.search import signals as sig
from vaultsync.store.search.signals import QueryTokens, signals

WORDS = ["a", "ab", "abc", "b", "ba", "c", "d", "e"]


def dense_matches(toks: list[str], distinct: list[tuple[str, bool]]) -> list[list[int]]:
    exact = {w: i for i, (w, is_prefix) in enumerate(distinct) if not is_prefix}
    prefixes = [(w, i) for i, (w, is_prefix) in enumerate(distinct) if is_prefix]
    out = []
    for tok in toks:
        found = [i for w, i in prefixes if tok.startswith(w)]
        if tok in exact:
            found.append(exact[tok])
        out.append(found)
    return out


def dense_phrase(hits: list[list[int]], query: QueryTokens, distinct: list[tuple[str, bool]]) -> int:
    where: dict[int, list[int]] = {}
    for j, key in enumerate(zip(query.sequence, query.prefix)):
        where.setdefault(distinct.index(key), []).append(j)
    best = 0
    prev: dict[int, int] = {}
    for matched in hits:
        cur = {j: prev.get(j - 1, 0) + 1 for i in matched for j in where[i]}
        if cur:
            best = max(best, *cur.values())
        prev = cur
    return best if best >= 2 else 0


def dense_proximity(hits: list[list[int]], n: int) -> int:
    best = 0
    counts: dict[int, int] = {}
    for p, matched in enumerate(hits):
        for i in matched:
            counts[i] = counts.get(i, 0) + 1
        if p >= sig.WINDOW:
            for i in hits[p - sig.WINDOW]:
                counts[i] -= 1
                if counts[i] == 0:
                    del counts[i]
        best = max(best, len(counts))
        if best == n:
            break
    return best


def dense_held(query: QueryTokens, toks: list[str]) -> bool:
    seq, pre, n = query.sequence, query.prefix, len(query.sequence)
    return any(
        all(toks[i + k] == seq[k] or (pre[k] and toks[i + k].startswith(seq[k])) for k in range(n))
        for i in range(len(toks) - n + 1)
    )


def dense_signals(text: str, query: QueryTokens, whole: QueryTokens | None = None) -> dict[str, float]:
    distinct = query.matcher()
    n = len(distinct)
    parts = text.split("\n", 3)
    head_toks = sig.tokens("\n".join(parts[:3]))
    body_toks = sig.tokens(parts[3]) if len(parts) > 3 else []
    head_found = {i for m in dense_matches(head_toks, distinct) for i in m}
    hits = dense_matches(body_toks, distinct)
    typed = whole or query
    held = 1.0 if len(typed.sequence) > 1 and dense_held(typed, head_toks + body_toks) else 0.0
    return {
        "phrase": 1.0 if held else dense_phrase(hits, query, distinct) / len(query.sequence),
        "proximity": dense_proximity(hits, n) / n if n > 1 else 0.0,
        "head": len(head_found) / n,
        "whole": held,
    }


queries = st.lists(st.tuples(st.sampled_from(WORDS), st.booleans()), min_size=1, max_size=5).map(
    lambda pairs: QueryTokens(tuple(w for w, _ in pairs), tuple(p for _, p in pairs))
)
bodies = st.lists(st.sampled_from(WORDS + ["x"] * 24), max_size=80).map(" ".join)  # mostly tokens matching nothing


@given(
    query=queries,
    typed=st.none() | queries,
    head=st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join),
    body=bodies,
)
def test_sparse_signals_equal_the_dense_walk(
    query: QueryTokens, typed: QueryTokens | None, head: str, body: str
) -> None:
    text = f"{head}\n\n\n{body}"
    assert signals(text, query, typed) == dense_signals(text, query, typed)


def test_a_long_body_with_far_apart_matches() -> None:
    """Matches further apart than the window, a run broken by one other token, a run spanning the window."""
    body = " ".join(["a", "b"] + ["x"] * 20 + ["a", "x", "b", "c"] + ["y"] * 30 + ["a", "b", "c", "d"])
    for words in (("a", "b"), ("a", "b", "c"), ("b", "c", "d", "e"), ("c",)):
        query = QueryTokens(words, (False,) * len(words))
        assert signals(f"t\n\n\n{body}", query) == dense_signals(f"t\n\n\n{body}", query)
    query = QueryTokens(("a", "b", "c", "d"), (False,) * 4)
    assert signals(f"t\n\n\n{body}", query)["whole"] == 1.0
    pair = QueryTokens(("a", "b"), (False, False))
    for gap, together in ((sig.WINDOW - 2, 1.0), (sig.WINDOW - 1, 0.5)):  # b at a + gap + 1: inside the window or not
        text = "t\n\n\n" + " ".join(["a"] + ["x"] * gap + ["b"])
        assert signals(text, pair)["proximity"] == dense_signals(text, pair)["proximity"] == together

"""Questions in everyday words: which query words are function words, and the content a question asks about.

A person asks "how do I get back a note I deleted by accident"; the words that say what they want are *get
back*, *note*, *deleted*, *accident*. The others — pronouns, auxiliaries, question words, articles,
prepositions — are grammar: in the keyword index they are ordinary terms, and a rare one (``I`` and ``my``
stand in 2–3 % of the Help's chunks, rarer than ``tip``) weighs like content, so that an FAQ written in the
first person wins on "I" alone.

``content(query)`` is the query the default mode's BM25 and its signals (``signals``: phrase, proximity,
head) weigh: for a query **in everyday words** — at least ``MIN_TOKENS`` tokens, one of them a question or
person cue (``CUES``) — every bare word whose tokens are all function words (``FUNCTION_WORDS``) is left
out; a quoted phrase is kept whole, and so is any query whose words would all go. Everything else is the
query as typed. The whole query in order (``signals.QueryTokens.whole``) still puts a chunk holding it
first: a remembered phrase keeps its exact-phrase treatment.

It is a pure function of the query text, so every cutoff ranks with the same terms and the as-of contract of
``keyword`` (BM25 equal to a fresh index over the visible chunks) holds for it as for any query. Function
words are known for English (the tokenizer's tokens: ``don't`` is ``don`` + ``t``); a query in another
language is left as typed.
"""

from __future__ import annotations

from ...embed.tokenizer import KeywordQuery, Phrase
from .signals import tokens

MIN_TOKENS = 3
"""Fewer tokens is a name or a keyword search, not a question: it stays as typed."""

CUES = frozenset(
    """i me my mine myself we us our ours you your yours how what why where when which who whom whose
can could should would will do does did is are am was were shall may might must""".split()
)
"""Words that mark a query as asked in everyday words (a question word, a person, an auxiliary)."""

FUNCTION_WORDS = CUES | frozenset(
    """a an the this that these those it its itself he him his she her they them
their theirs there here be been being have has had having doing done get got getting gets
to of in on at for with from by into onto about as than then so if or and but not no nor also just too very
any some all each every other another such own same more most much many lot lots
s t d ll ve re m don doesn didn isn aren wasn weren won wouldn couldn shouldn haven hasn hadn cant
way want wanted wanna like need able anything something someone anyone thing things""".split()
)
"""English function words (and a few everyday fillers: *want to*, *is there a way*, *something*) as the
keyword index tokenizes them. Chosen on the ``tune`` part of ``benchmarks/questions/everyday.jsonl``."""


def function_word(token: str) -> bool:
    return token in FUNCTION_WORDS


def everyday(query: KeywordQuery) -> bool:
    """Whether ``query`` reads as a question in everyday words (see the module docstring)."""
    toks = [t for p in query.phrases for t in tokens(p.text)]
    return len(toks) >= MIN_TOKENS and any(t in CUES for t in toks)


def content(query: KeywordQuery) -> KeywordQuery:
    """The query the default mode weighs: ``query`` without its function words when it is in everyday words."""
    if not everyday(query):
        return query
    kept = tuple(
        p for p in query.phrases if " " in p.text.strip() or p.prefix or not all(map(function_word, tokens(p.text)))
    )
    return KeywordQuery(kept) if kept else query


def marked(query: KeywordQuery) -> KeywordQuery:
    """What a hit's snippet marks in the default mode: the words ``content`` weighs (a question's function words
    are not marked: they did not count), and the whole query as typed wherever a chunk holds it in order (a
    remembered phrase is marked whole, its function words too)."""
    weighed = content(query)
    if weighed is query:
        return query
    whole = Phrase(" ".join(p.text for p in query.phrases), query.phrases[-1].prefix)
    return KeywordQuery((*weighed.phrases, whole))

"""What the keyword index tokenizes: NFKC text with CJK runs as overlapping pairs, and safe FTS5 queries.

At the top level, not in ``store/search/``, because the hashed embedder (``embedders``) normalizes text
the same way and the store imports the embedders: under ``store/`` it would close an import cycle.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

TOKENIZE = "unicode61 remove_diacritics 2"
"""The FTS5 ``tokenize=`` argument of every keyword index (and of the ground truth anyone rebuilds)."""

TEXT_VERSION = 1
"""Bumped whenever ``indexed_text`` changes shape; a different stored version needs ``vaultsync reindex --full``."""

# Han, kana (with the prolonged sound mark and iteration marks), Hangul: scripts written without spaces
# between words, indexed as overlapping character pairs so that any partial phrase of two or more
# characters matches.
_CJK = (
    "\u3005-\u3007\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff\u3131-\u318e"
    "\U00020000-\U0002fa1f"
)
CJK_RUN = re.compile(f"[{_CJK}]+")


def _pairs(match: re.Match[str]) -> str:
    run = match.group(0)
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "


def normalize(text: str) -> str:
    """NFKC, then every CJK run written as its overlapping character pairs (``東京で`` → ``東京 京で``)."""
    if text.isascii():  # NFKC leaves ASCII as it is and no CJK run can occur: most chunks take this path
        return text
    return CJK_RUN.sub(_pairs, unicodedata.normalize("NFKC", text))


# A line that carries no searchable content of its own: blank, an ATX heading (its words are already in
# every chunk's heading path), or a thematic break (``---``, ``***``, ``___``), indented at most 3 spaces
# as CommonMark allows. (A setext heading's text line counts as content.)
_BARE_LINE = re.compile(
    r" {0,3}(?:#{1,6}(?:[ \t].*)?|(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})[ \t\r]*|[ \t\r]*"
)


def has_content(text: str) -> bool:
    """True when a chunk holds more than blank lines, headings and thematic breaks."""
    return not all(map(_BARE_LINE.fullmatch, text.split("\n")))  # a line that does not match stops it, in C


def indexable(texts: Sequence[str]) -> list[bool]:
    """Which of a note's chunks (texts in order) the search index holds: those with content.

    A note with no such chunk (only headings, say) keeps its non-blank chunks, so that it can still
    be found by its title; a note of blank lines only has nothing indexed.
    """
    flags = [has_content(t) for t in texts]
    if not any(flags):
        flags = [bool(t.strip()) for t in texts]
    return flags


def indexed_text(title: str | None, aliases: Sequence[str], heading_path: Sequence[str], text: str) -> str:
    """The one FTS5 column of a chunk: title, aliases and heading path beside the chunk's text."""
    head = [title or "", " ; ".join(aliases), " > ".join(heading_path)]
    return normalize("\n".join(head) + "\n" + text)


# ---------------------------------------------------------------- queries

_TERM = re.compile(r'"([^"]*)"|(\S+)')
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Phrase:
    """One FTS5 phrase of a query: the normalized text inside the quotes, and whether it is a prefix."""

    text: str
    prefix: bool = False

    def fts(self) -> str:
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + " *" if self.prefix else quoted


@dataclass(frozen=True, slots=True)
class KeywordQuery:
    """A user query as FTS5 phrases joined by OR (any term matches; BM25 ranks rows with more terms higher)."""

    phrases: tuple[Phrase, ...]

    @property
    def expression(self) -> str:
        """The FTS5 MATCH expression; never raises a syntax error."""
        return " OR ".join(p.fts() for p in self.phrases)

    @property
    def words(self) -> list[str]:
        """Plain words of the query, for snippets."""
        return [w for p in self.phrases for w in p.text.split() if w]


def parse_query(query: str) -> KeywordQuery:
    """Turn user text into FTS5 phrases that can never be a syntax error.

    Syntax: words are matched as words (``C++``, ``e-mail``, ``AND`` are just text); ``"two words"``
    matches the words next to each other; ``word*`` matches any word starting with ``word``. Any
    single word becomes the FTS5 query ``"word"`` on the normalized text.
    """
    phrases: list[Phrase] = []
    query = _CONTROL.sub(" ", query)  # FTS5 query strings end at NUL
    for match in _TERM.finditer(query):
        quoted, bare = match.group(1), match.group(2)
        prefix = False
        raw = quoted if quoted is not None else bare
        if bare is not None:
            raw = raw.replace('"', "")
            if raw.endswith("*") and len(raw.rstrip("*")) > 0:
                raw, prefix = raw.rstrip("*"), True
        text = " ".join(normalize(raw).split())
        if text:
            phrases.append(Phrase(text, prefix))
    return KeywordQuery(tuple(phrases))

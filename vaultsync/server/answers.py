"""Answers sized for an assistant: the compact shapes of ``search_notes``, ``list_notes``, ``note_history``
and ``list_changes``, built from what ``Vault`` returns.

Every character of an answer is context the assistant pays for and reads, so these answers carry what it
needs (path, heading path, lines, revision, time) once, and nothing it does not:

* a revision of a note's history is named by its id (``revision_id``: ``r`` and its batch, one revision
  each), its content by the short hash (``short_revision``: the first 8 hex digits of its content hash, more
  where two contents of one note share them); read_note, diff_note and restore_note take either back,
  expected_revision the hash;
* a search answer groups its hits by note (path, revision and time said once per note, notes in the order
  of their best hit) and gives each hit an excerpt around its match, all of them sized to fit about
  ``ANSWER_CHARS_PER_HIT`` characters a hit (``full_text=true``: the chunks' exact text instead);
  ``explain=true`` adds the ranking's scores and signals;
* a listing groups notes by folder, one row (name, revision, time) a note;
* times are said once each: an answer lists its distinct times (``times``) and rows name one by its index
  (a time costs ~15 tokens, and most rows of an answer share a few);
* fields that are null are left out (their schema says what absent means).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from ..excerpts import fit_excerpts
from ..results import SIMILAR_ONLY
from ..revisions import revision_id, short_revision, short_revisions
from ..times import format_time
from .models import Compact, RevisionRow

ANSWER_CHARS_PER_HIT = 480
"""A search answer's excerpts are sized so that the whole answer is about this many characters a hit."""
MAX_HIT_CHARS = 4_000
"""A hit's whole text (full_text, or a signing server's answer) is cut to at most this many characters."""
MAX_RESULT_CHARS = 120_000
"""Answers are cut to stay under about this many characters, and say so (truncated)."""

Hit = tuple[str, int, int, str]


class NoteHits(Compact):
    """The hits in one note, best first."""

    path: str = Field(description="Vault-relative path of the note")
    revision: str = Field(
        description="The note revision the hits come from (restore_note and expected_revision take it)"
    )
    time: int = Field(description="When vaultsync learned this revision: an index into the answer's times")
    hits: list[Hit] = Field(
        description="Each hit as [heading path ('A > B'; '' above the first heading), first line, "
        "last line, text]: the text is an excerpt around the match (spaces collapsed, '…' where "
        "cut) or, with full_text, the chunk's exact text"
    )


class Explained(Compact):
    """One hit's place in the ranking (explain=true), in rank order."""

    model_config = {"extra": "allow"}
    path: str
    lines: list[int]
    chunk_id: str
    score: float = Field(
        description="The mode's score: hybrid, higher is better; keyword, bm25 (lower is better); vector, cosine"
    )


TIMES = "Each distinct known_at (UTC) of the revisions in this answer, oldest first; rows name one by its index"


class SearchAnswer(Compact):
    """Search hits grouped by note, notes in the order of their best hit."""

    notes: list[NoteHits]
    times: list[str] = Field(description=TIMES)
    as_of: str | None = Field(default=None, description="The knowledge cutoff searched (absent: now)")
    truncated: bool | None = Field(default=None, description="True when hit texts were cut to keep the answer small")
    before_history: bool | None = Field(
        default=None,
        description="True when as_of is before the vault's first "
        "batch: the vault had no history then, so nothing could match (ask about "
        "first_batch or later)",
    )
    first_batch: str | None = Field(default=None, description="With before_history: when the vault's history starts")
    similar_only: bool | None = Field(default=None, description=SIMILAR_ONLY)
    explain: list[Explained] | None = Field(
        default=None,
        description="explain=true: every hit in rank order with its scores (keyword and vector ranks, signals)",
    )


def search_answer(result: Any, *, full_text: bool, explain: bool) -> SearchAnswer:
    """The compact answer to a search (``Vault.search``'s result)."""
    hits = result.hits

    times = Times([_time(h["known_at"]) for h in hits])

    def grouped(texts: list[str]) -> list[NoteHits]:
        groups: dict[str, NoteHits] = {}
        for hit, text in zip(hits, texts):
            group = groups.get(hit["path"])
            if group is None:
                group = groups[hit["path"]] = NoteHits(
                    path=hit["path"],
                    revision=short_revision(hit["content_hash"]) or "",
                    time=times.index(_time(hit["known_at"])),
                    hits=[],
                )
            group.hits.append((" > ".join(hit["heading_path"]), hit["lines"][0], hit["lines"][1], text))
        return list(groups.values())

    cut = False
    answer = SearchAnswer(notes=grouped([""] * len(hits)), times=times.values, as_of=_time(result.as_of))
    if result.before_history:
        answer.before_history, answer.first_batch = True, result.first_batch
    answer.similar_only = result.similar_only or None
    if full_text:
        hits, cut = fit_hits(hits)
        texts = [h["text"] for h in hits]
    else:
        texts = fit_excerpts(result.query, [h["text"] for h in hits], _budget(answer, len(hits)))
    answer.notes = grouped(texts)
    answer.truncated = cut or None
    if explain:
        answer.explain = [
            Explained(
                path=h["path"],
                lines=list(h["lines"]),
                chunk_id=h["chunk_id"],
                score=h["score"],
                **{k: h[k] for k in ("keyword", "vector", "signals") if h.get(k) is not None},
            )
            for h in hits
        ]
    return answer


def _budget(answer: SearchAnswer, hits: int) -> int:
    """Characters left for excerpts once the answer's other parts are counted."""
    shape = len(
        json.dumps(answer.model_dump(mode="json", exclude_none=True), ensure_ascii=False, separators=(",", ":"))
    )
    return max(ANSWER_CHARS_PER_HIT * hits - shape, 60 * hits)


def fit_hits(found: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """Search hits cut to about MAX_RESULT_CHARS in all (each text to MAX_HIT_CHARS), and whether any were cut."""
    hits, budget, cut = [], MAX_RESULT_CHARS, False
    for hit in found:
        hit = dict(hit)
        text = str(hit.get("text") or "")
        room = max(200, min(MAX_HIT_CHARS, budget))
        if len(text) > room:
            hit["text"], cut = text[:room] + " …[truncated]", True
        budget -= len(hit["text"]) + 300
        hits.append(hit)
        if budget <= 0:
            cut = cut or len(hits) < len(found)
            break
    return hits, cut


class NoteListAnswer(Compact):
    """A page of notes by path, grouped by folder."""

    folders: dict[str, list[tuple[str, str, int]]] = Field(
        description="Each folder's path (with a trailing '/'; '' for the vault's top folder) and its notes on this "
        "page, each as [file name, revision, time]: time is an index into times"
    )
    times: list[str] = Field(description=TIMES)
    as_of: str | None = Field(default=None, description="The knowledge cutoff listed (absent: now)")
    next_cursor: str | None = Field(default=None, description="Pass as cursor for the next page; absent on the last")
    before_history: bool | None = Field(
        default=None,
        description="True when as_of is before the vault's first batch: no note existed yet (see first_batch)",
    )
    first_batch: str | None = Field(default=None, description="With before_history: when the vault's history starts")


def note_list(revisions: list[Any], *, as_of: int | None, next_cursor: str | None) -> NoteListAnswer:
    times = Times([format_time(r.known_at) for r in revisions])
    folders: dict[str, list[tuple[str, str, int]]] = {}
    for r in revisions:
        folder, _, name = r.path.rpartition("/")
        folders.setdefault(folder + "/" if folder else "", []).append(
            (name, short_revision(r.content_hash) or "", times.index(format_time(r.known_at)))
        )
    return NoteListAnswer(folders=folders, times=times.values, as_of=format_time(as_of), next_cursor=next_cursor)


class Times:
    """The distinct times of an answer, oldest first, each named by its index (a time is ~15 tokens; most rows
    of a listing share a few)."""

    def __init__(self, values: list[str | None]) -> None:
        self.values = sorted({v for v in values if v})
        self._index = {v: i for i, v in enumerate(self.values)}

    def index(self, value: str | None) -> int:
        return self._index[value] if value else -1


class HistoryAnswer(Compact):
    path: str
    revisions: list[RevisionRow] = Field(description="Oldest first, following renames back to the first name")
    truncated: bool | None = Field(default=None, description="True when older revisions were left out (see limit)")


def history_answer(path: str, revisions: list[Any], truncated: bool) -> HistoryAnswer:
    ids = short_revisions([r.content_hash for r in revisions])
    rows = [
        RevisionRow(
            kind=r.kind,
            known_at=format_time(r.known_at),
            id=revision_id(r),
            revision=ids[i],
            path=r.path if r.path != path else None,
            renamed_from=r.renamed_from,
        )
        for i, r in enumerate(revisions)
    ]
    return HistoryAnswer(path=path, revisions=rows, truncated=truncated or None)


def change_rows(revisions: list[Any]) -> list[RevisionRow]:
    return [
        RevisionRow(
            kind=r.kind,
            known_at=format_time(r.known_at),
            id=revision_id(r),
            revision=short_revision(r.content_hash),
            path=r.path,
            renamed_from=r.renamed_from,
        )
        for r in revisions
    ]


def _time(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return format_time(int(value))

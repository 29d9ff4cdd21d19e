"""``parse_note``: one markdown-it parse per note, turned into chunks and note-level facts."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from typing import Any

from ..times import validity
from .chunks import build_chunks
from .engine import MD
from .frontmatter import load_frontmatter
from .limits import DEFAULT_LIMITS, ParseLimits, limits_env, over_limits
from .lines import line_offsets, split_lines
from .model import ParsedNote
from .tags import frontmatter_tags
from .tokens import TokenFacts, walk_tokens

__all__ = ["DEFAULT_MAX_CHUNK_CHARS", "parse_note", "split_lines"]

DEFAULT_MAX_CHUNK_CHARS = 2000
"""Default bound on a chunk's length in characters (a single longer line is kept whole)."""


def parse_note(
    text: str, path: str, max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS, limits: ParseLimits = DEFAULT_LIMITS
) -> ParsedNote:
    """Parse one note. Pure and deterministic; never raises on any ``str``.

    Args:
        text: The note's full text (any line endings).
        path: Vault-relative POSIX path; only used for the title fallback (file name without ``.md``).
        max_chunk_chars: Bound on chunk length in characters (values below 1 count as 1).
        limits: The most tags, links, section headings and chunks taken from the note (``limits``); a
            note over any of them is parsed up to them, with one warning (its text is always kept whole).

    Returns:
        A ``ParsedNote`` whose chunks, joined in order, give back ``text`` exactly.

    Chunking and chunk IDs are described in ``vaultsync.parsers.chunks``. Other choices:
    the title and heading paths are the headings' inline source text (``# A *b*`` gives
    ``A *b*``); links, tags and block ids inside code, HTML blocks and ``%%comments%%`` are not
    extracted; links are in line order; ``frontmatter_text`` has newlines normalised to ``\\n``;
    Markdown link targets are percent-decoded with ``#heading``/``#^block`` split off, except
    URLs with a scheme, which are kept whole.

    Example:
        >>> note = parse_note("# Atlas\\n\\nSee [[Plan#Goals|goals]] #project\\n", "Projects/Atlas.md")
        >>> note.title, note.tags, note.links[0].target, note.links[0].heading
        ('Atlas', ('project',), 'Plan', 'Goals')
    """
    lines = split_lines(text)
    offsets = line_offsets(lines)
    warnings: list[str] = []
    env = limits_env(limits)
    try:
        tokens = MD.parse(text, env)
    except Exception as exc:  # noqa: BLE001 - a parser bug must not lose the note
        tokens = []
        warnings.append(f"markdown parse failed, note kept as plain text: {type(exc).__name__}: {exc}"[:300])
    found = walk_tokens(tokens, len(lines))
    del tokens  # the largest part of a parse: not held while the chunks are built

    frontmatter: dict[str, Any] | None = None
    frontmatter_text: str | None = None
    if found.blocks and found.blocks[0].kind == "frontmatter":
        frontmatter_text = found.blocks[0].text
        frontmatter, warning = load_frontmatter(frontmatter_text)
        if warning is not None:
            warnings.append(warning)

    valid_from, valid_to = validity(frontmatter, warnings)
    block_ids = sorted(found.block_ids)
    over = over_limits(env)
    tags = list(islice(_tags(frontmatter, found), limits.tags + 1))
    if len(tags) > limits.tags:
        tags = tags[: limits.tags]
        over.add("tags")
    links = sorted(found.links[: limits.links], key=lambda link: link.line)
    if len(found.links) > limits.links:
        over.add("links")
    if sum(block.kind == "heading" for block in found.blocks) > limits.headings:
        over.add("headings")
    chunk_chars = max(1, max_chunk_chars)
    chunks = build_chunks(text, offsets, found.blocks, block_ids, chunk_chars, limits.headings)
    while len(chunks) > limits.chunks and chunk_chars < 4 * len(text):  # fewer, longer chunks
        chunk_chars *= 2
        chunks = build_chunks(text, offsets, found.blocks, block_ids, chunk_chars, limits.headings)
    if chunk_chars > max(1, max_chunk_chars):
        over.add("chunks")
    if over:
        warnings.append(_dense(over, limits, chunk_chars))
    return ParsedNote(
        title=_title(found, path),
        chunks=chunks,
        frontmatter=frontmatter,
        frontmatter_text=frontmatter_text,
        tags=_unique(tags),
        aliases=_unique(_aliases(frontmatter)),
        links=tuple(links),
        block_ids=_unique(block_id for _, block_id in block_ids),
        callouts=tuple(found.callouts),
        warnings=tuple(warnings),
        valid_from=valid_from,
        valid_to=valid_to,
    )


def _dense(over: set[str], limits: ParseLimits, chunk_chars: int) -> str:
    """The one warning of a note over its parse limits."""
    said = {
        "tags": f"its first {limits.tags:,} tags",
        "links": f"its first {limits.links:,} links",
        "headings": f"sections for its first {limits.headings:,} headings",
        "chunks": f"chunks of up to {chunk_chars:,} characters (at most {limits.chunks:,} chunks)",
    }
    kept = ", ".join(said[kind] for kind in ("tags", "links", "headings", "chunks") if kind in over)
    return f"a note this dense is recorded with {kept}; its text is kept whole and searchable"


def _title(found: TokenFacts, path: str) -> str:
    for block in found.blocks:
        if block.kind == "heading" and block.level == 1 and block.text.strip():
            return block.text.strip()
    name = path.rsplit("/", 1)[-1]
    return name[:-3] if name.lower().endswith(".md") else name


def _tags(frontmatter: dict[str, Any] | None, found: TokenFacts) -> Iterable[str]:
    if frontmatter:
        for key in ("tags", "tag"):
            if key in frontmatter:
                yield from frontmatter_tags(frontmatter[key])
    for _, tag in sorted(found.tags, key=lambda item: item[0]):
        yield tag


def _aliases(frontmatter: dict[str, Any] | None) -> Iterable[str]:
    if not frontmatter:
        return
    for key in ("aliases", "alias"):
        value = frontmatter.get(key)
        for item in value if isinstance(value, list) else [value]:
            if item is None or isinstance(item, (dict, list)):
                continue
            alias = str(item).strip()
            if alias:
                yield alias


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))

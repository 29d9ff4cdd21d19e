"""Property tests for the Markdown parser: exact partition, bounded chunks, stable chunk IDs."""

from __future__ import annotations

import doctest
import importlib
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultsync.parsers import ParsedNote, parse_note, split_lines
from vaultsync.parsers.engine import MD

BOUNDS = (1, 40, 200, 2000)
HEX16 = re.compile(r"[0-9a-f]{16}")


def check_chunks(text: str, note: ParsedNote, bound: int) -> None:
    """Every structural promise about chunks, for one parse."""
    chunks = note.chunks
    assert "".join(c.text for c in chunks) == text
    lines = split_lines(text)
    assert (len(chunks) == 0) == (text == "")
    expected_start = 1
    for chunk in chunks:
        assert chunk.text
        assert chunk.line_start == expected_start
        assert chunk.line_end >= chunk.line_start
        assert "".join(lines[chunk.line_start - 1 : chunk.line_end]) == chunk.text
        if len(chunk.text) > bound:
            assert chunk.line_start == chunk.line_end, f"multi-line chunk over {bound}: {chunk!r}"
        assert HEX16.fullmatch(chunk.chunk_id)
        assert chunk.kind in {"frontmatter", "heading", "text", "code", "table", "callout"}
        expected_start = chunk.line_end + 1
    assert expected_start == len(lines) + 1
    assert len({c.chunk_id for c in chunks}) == len(chunks)


def check_cuts_between_blocks(text: str, note: ParsedNote, bound: int) -> None:
    """A chunk boundary falls inside a top-level block only when that block alone is over the bound."""
    lines = split_lines(text)
    cuts = [c.line_start - 1 for c in note.chunks[1:]]
    for token in MD.parse(text):
        if token.level == 0 and token.map:
            start, end = token.map
            inside = [cut for cut in cuts if start < cut < end]
            if inside:
                assert len("".join(lines[start:end])) > bound, (token.type, start, end, inside)


# --- a Markdown-ish strategy -------------------------------------------------------------

WORD = st.one_of(
    st.text("abcdefghijklmnopqrstuvwxyzABC0123456789", min_size=1, max_size=8),
    st.sampled_from(
        [
            "[[Note]]",
            "[[Note#Head|alias]]",
            "![[pic.png]]",
            "#tag",
            "#a/b",
            "`code [[x]]`",
            "[md](other.md#h)",
            "^blk-1",
            "数据",
            "日本語",
            "é",
            "\t",
            "  ",
            "\x0c",
            "\u2028",
            "\x85",
            "**bold**",
            "_it_",
            "&amp;",
            "\\#",
            "%%c%%",
        ]
    ),
)
INLINE = st.lists(WORD, min_size=1, max_size=12).map(" ".join)
LONG_LINE = st.integers(10, 120).map(lambda n: ("long " * n).strip())
PARAGRAPH = st.lists(st.one_of(INLINE, LONG_LINE), min_size=1, max_size=4)
FENCE = st.tuples(
    st.sampled_from(["```", "~~~", "```python"]),
    st.lists(st.one_of(INLINE, st.just("# not a heading"), st.just("[[in fence]]"), LONG_LINE), max_size=12),
).map(lambda t: [t[0], *t[1], t[0][:3]])
LIST = st.lists(INLINE, min_size=1, max_size=8).map(lambda items: [f"- {i}" for i in items])
TABLE = st.lists(INLINE, min_size=1, max_size=8).map(
    lambda rows: ["| a | b |", "| - | - |", *(f"| {r} | x |" for r in rows)]
)
QUOTE = st.tuples(st.sampled_from(["", "[!note] ", "[!tip]- Title ", "[!WARNING]"]), st.lists(INLINE, max_size=4)).map(
    lambda t: [f"> {t[0]}".rstrip(), *(f"> {line}" for line in t[1])]
)
BODY_BLOCK = st.one_of(PARAGRAPH, FENCE, LIST, TABLE, QUOTE, st.just(["    indented code #x [[y]]"]))
"""Blocks that never change the heading structure around them."""
BODY = st.lists(BODY_BLOCK, max_size=6).map(lambda blocks: [line for b in blocks for line in [*b, ""]])

ANY_BLOCK = st.one_of(
    BODY_BLOCK,
    st.builds(lambda n, t: [f"{'#' * n} {t}"], st.integers(1, 7), INLINE),
    st.builds(lambda t, u: [t, u], INLINE, st.sampled_from(["===", "---", "- - -"])),
    st.just(["---", "tags: [x, y]", "---"]),
    st.just(["---", "bad: [yaml", "---"]),
    st.just(["```", "unclosed fence"]),
    st.just(["%%", "comment [[x]]"]),
    st.just(["[^1]: a footnote [[f]]", "    continued"]),
    st.just(["<div>", "[[html]]", "</div>"]),
    st.just(["[ref]: http://example.org"]),
    st.just([""]),
)


@st.composite
def markdownish(draw: st.DrawFn) -> str:
    lines = [line for block in draw(st.lists(ANY_BLOCK, max_size=15)) for line in block]
    endings = draw(st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=len(lines), max_size=len(lines)))
    text = "".join(line + end for line, end in zip(lines, endings))
    return text[:-1] if text and draw(st.booleans()) else text


# --- exact partition, bounds, determinism --------------------------------------------------


@settings(max_examples=300)
@given(text=st.text(), bound=st.sampled_from(BOUNDS))
def test_any_text_round_trips(text: str, bound: int) -> None:
    check_chunks(text, parse_note(text, "n.md", bound), bound)


@settings(max_examples=200)
@given(
    text=st.text(alphabet=st.sampled_from("\r\n\x0c\u2028\x85\x00 #>-|`[]!^%ab"), max_size=200),
    bound=st.sampled_from(BOUNDS),
)
def test_control_heavy_text_round_trips(text: str, bound: int) -> None:
    check_chunks(text, parse_note(text, "n.md", bound), bound)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(text=markdownish(), bound=st.sampled_from(BOUNDS))
@pytest.mark.slow
def test_markdownish_round_trips_within_bound(text: str, bound: int) -> None:
    note = parse_note(text, "n.md", bound)
    check_chunks(text, note, bound)
    check_cuts_between_blocks(text, note, bound)
    assert parse_note(text, "n.md", bound) == note


def test_line_cutting_matches_markdown_it() -> None:
    text = "a\r\nb\rc\nd\x0ce\u2028f\x85g\n\nh"
    assert split_lines(text) == ["a\r\n", "b\r", "c\n", "d\x0ce\u2028f\x85g\n", "\n", "h"]
    note = parse_note("# A\x0c\u2028x\r# B\r\n", "n.md")
    assert [(c.heading_path, c.line_start, c.line_end) for c in note.chunks] == [
        (("A\x0c\u2028x",), 1, 1),
        (("B",), 2, 2),
    ]


# --- stable IDs --------------------------------------------------------------------------


@st.composite
def sectioned_note(draw: st.DrawFn) -> tuple[list[tuple[int, str]], list[list[str]], str]:
    """Unique headings with levels, a body per section (index 0 is the text before any heading)."""
    names = draw(st.lists(st.text("abcdefghij", min_size=1, max_size=6), min_size=1, max_size=7, unique=True))
    levels = draw(st.lists(st.integers(1, 4), min_size=len(names), max_size=len(names)))
    bodies = draw(st.lists(BODY, min_size=len(names) + 1, max_size=len(names) + 1))
    ending = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return list(zip(levels, names)), bodies, ending


def render(headings: list[tuple[int, str]], bodies: list[list[str]], ending: str, frontmatter: bool) -> str:
    lines = ["---", "kind: test", "---"] if frontmatter else []
    lines += bodies[0]
    for (level, name), body in zip(headings, bodies[1:]):
        lines += [f"{'#' * level} {name}", "", *body]
    return "".join(line + ending for line in lines)


def ids_by_section(note: ParsedNote) -> dict[tuple[str, ...], list[str]]:
    out: dict[tuple[str, ...], list[str]] = {}
    for chunk in note.chunks:
        key = ("<frontmatter>",) if chunk.kind == "frontmatter" else chunk.heading_path
        out.setdefault(key, []).append(chunk.chunk_id)
    return out


def paths(headings: list[tuple[int, str]]) -> list[tuple[str, ...]]:
    """The heading path of each heading, computed independently of the parser."""
    stack: list[tuple[int, str]] = []
    out = []
    for level, name in headings:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, name))
        out.append(tuple(n for _, n in stack))
    return out


@pytest.mark.slow
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    note=sectioned_note(),
    new_body=BODY,
    which=st.integers(0),
    frontmatter=st.booleans(),
    bound=st.sampled_from((40, 200, 2000)),
)
def test_editing_one_section_keeps_other_ids(note, new_body, which, frontmatter, bound) -> None:  # type: ignore[no-untyped-def]
    headings, bodies, ending = note
    which %= len(bodies)
    before = parse_note(render(headings, bodies, ending, frontmatter), "n.md", bound)
    edited = [*bodies[:which], new_body, *bodies[which + 1 :]]
    after = parse_note(render(headings, edited, ending, frontmatter), "n.md", bound)
    old, new = ids_by_section(before), ids_by_section(after)
    all_paths = paths(headings)
    assert [c.heading_path for c in before.chunks if c.kind == "heading"] == all_paths
    assert [c.heading_path for c in after.chunks if c.kind == "heading"] == all_paths
    touched = () if which == 0 else all_paths[which - 1]
    for key in old.keys() | new.keys():
        if key != touched:
            assert old.get(key) == new.get(key), key


@pytest.mark.slow
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(note=sectioned_note(), which=st.integers(0), bound=st.sampled_from((40, 2000)))
def test_renaming_a_heading_changes_only_its_subtree(note, which, bound) -> None:  # type: ignore[no-untyped-def]
    headings, bodies, ending = note
    which %= len(headings)
    level, name = headings[which]
    renamed = [*headings[:which], (level, name + "-renamed"), *headings[which + 1 :]]
    old = ids_by_section(parse_note(render(headings, bodies, ending, False), "n.md", bound))
    new = ids_by_section(parse_note(render(renamed, bodies, ending, False), "n.md", bound))
    old_path = paths(headings)[which]
    subtree = {p for p in paths(headings) if p[: len(old_path)] == old_path}
    for key, ids in old.items():
        if key in subtree:
            assert not set(ids) & {i for v in new.values() for i in v}, key
        else:
            assert new[key] == ids, key


def test_ids_follow_heading_path_and_block_id_not_position() -> None:
    base = parse_note("# A\n\none\n\n# B\n\ntwo ^keep\n", "n.md")
    moved = parse_note("intro\n\nmore intro\n\n# A\n\none, longer now\n\nand more\n\n# B\n\ntwo ^keep\n", "n.md")
    assert base.chunks[-1].chunk_id == moved.chunks[-1].chunk_id
    assert base.chunks[0].chunk_id == next(c.chunk_id for c in moved.chunks if c.heading_path == ("A",))
    split = parse_note("# B\n\n" + "x" * 50 + "\n\ntwo ^keep\n", "n.md", 40)
    assert split.chunks[-1].chunk_id == base.chunks[-1].chunk_id  # block id, not part number


def test_duplicate_block_ids_and_headings_stay_unique() -> None:
    text = "# H\n\na ^x\n\nb ^x\n\n# H\n\na ^x\n"
    note = parse_note(text, "n.md", 1)
    check_chunks(text, note, 1)


# --- never raises, odd frontmatter ---------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        ">" * 5000 + " deep",
        "- " * 3000 + "x",
        "[" * 5000 + "]" * 5000,
        "*" * 10000,
        "---\na: &a [*a]\n---\n",
        "---\n" + "a: [" * 3000 + "\n---\n",
        "---\nx: 2024-02-30\ny: !!python/object:os.system ls\n---\n",
        "---\na: !!binary aGk=\nb: .nan\n? [k]\n: v\n---\n",
        "\x00" * 10 + "\n# \x00\n",
    ],
)
def test_never_raises_on_hostile_input(text: str) -> None:
    note = parse_note(text, "n.md", 40)
    check_chunks(text, note, 40)


def test_alias_bomb_is_refused_not_expanded() -> None:
    yaml_lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    yaml_lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    note = parse_note("---\n" + "\n".join(yaml_lines) + "\n---\nbody\n", "n.md")
    assert note.frontmatter is None
    assert note.warnings and "invalid YAML frontmatter" in note.warnings[0]


@pytest.mark.parametrize("module", ["note", "lines", "wikilinks", "tags", "frontmatter"])
def test_docstring_examples_run(module: str) -> None:
    result = doctest.testmod(importlib.import_module(f"vaultsync.parsers.{module}"))
    assert result.attempted > 0 and result.failed == 0


# --- the real corpus, read at run time -----------------------------------------------------


@pytest.mark.corpus
def test_obsidian_help_corpus(help_clone: Path) -> None:
    """Every English note of the Help vault at HEAD, from the session's clone of the bundle (conftest.py)."""
    clone = help_clone / ".git"
    listing = (
        subprocess.run(
            ["git", "--git-dir", str(clone), "ls-tree", "-r", "-z", "HEAD", "en/"], check=True, capture_output=True
        )
        .stdout.decode("utf-8")
        .split("\0")
    )
    blobs = [(entry.split("\t", 1)[1], entry.split()[2]) for entry in listing if entry.endswith(".md")]
    assert len(blobs) > 100
    batch = subprocess.run(
        ["git", "--git-dir", str(clone), "cat-file", "--batch"],
        check=True,
        capture_output=True,
        input="".join(f"{sha}\n" for _, sha in blobs).encode(),
    ).stdout
    pos = 0
    for path, _ in blobs:
        header_end = batch.index(b"\n", pos)
        size = int(batch[pos:header_end].split()[2])
        text = batch[header_end + 1 : header_end + 1 + size].decode("utf-8")
        pos = header_end + 2 + size
        for bound in (200, 2000):
            note = parse_note(text, path, bound)
            check_chunks(text, note, bound)
            check_cuts_between_blocks(text, note, bound)
            assert note.title and not note.warnings, path


def test_inserting_into_a_long_list_keeps_most_chunk_texts() -> None:
    """Content-defined cut points: one inserted line changes the pieces around it, not every
    piece after it (greedy packing would shift every later cut, so every later text would change)."""
    import random
    import statistics

    rng = random.Random(7)
    words = ["sync", "graph", "calendar", "kanban", "tasks", "excalidraw", "dataview", "git", "outliner", "zotero"]
    items = [f"- [[{rng.choice(words)} {rng.choice(words)} {i}]] by author{rng.randrange(999)}\n" for i in range(300)]
    before = "# Plugins\n\n" + "".join(items)
    old_chunks = parse_note(before, "P.md").chunks
    old = {c.text for c in old_chunks}
    changed_counts = []
    for _ in range(40):
        at = rng.randrange(len(items))
        after = "# Plugins\n\n" + "".join(items[:at] + ["- [[a freshly inserted plugin]] by someone\n"] + items[at:])
        changed_counts.append(sum(1 for c in parse_note(after, "P.md").chunks if c.text not in old))
    assert statistics.median(changed_counts) <= 2 and max(changed_counts) <= 5, changed_counts
    assert len(old_chunks) >= 12

"""Snippets mark what FTS5 matched, whole tokens only; the oracle is FTS5's own ``highlight()``."""

from __future__ import annotations

import apsw
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vaultsync.embed.tokenizer import TOKENIZE, parse_query
from vaultsync.store.search.snippets import _addresses, snippet

WORDS = [
    "ate",
    "create",
    "states",
    "sync",
    "notes",
    "Ünïcode",
    "unicode",
    "e-mail",
    "email",
    "café",
    "cafe",
    "C++",
    "x2",
    "2x",
    "don't",
    "_under_",
    "a",
    "at",
    "ATE",
    "naïve",
]
SEPARATORS = [" ", "  ", "\n", "\n\n", ", ", "-", ".", "'", "(", ")", "*", "_", "/", " — "]

text_st = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), min_size=1, max_size=80).map(
    lambda parts: "".join(w + s for w, s in parts)
)
query_st = st.lists(
    st.one_of(st.sampled_from(WORDS), st.sampled_from(["cre*", "st*", '"sync ate"', '"e mail"'])),
    min_size=1,
    max_size=3,
).map(" ".join)


def fts5_highlight(text: str, query: str) -> str | None:
    """FTS5's highlight() of ``text`` for the query, marks as ``**``; None when the query does not match it."""
    con = apsw.Connection(":memory:")
    con.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{TOKENIZE}')")
    con.execute("INSERT INTO t (rowid, body) VALUES (1, ?)", (text,))
    row = con.execute(
        "SELECT highlight(t, 0, '**', '**') FROM t WHERE t MATCH ?", (parse_query(query).expression,)
    ).fetchone()
    con.close()
    return row[0] if row else None


def highlighted(text: str, query: str) -> str:
    """FTS5's highlight() of ``text`` for the query, marks as ``**``, spaces collapsed."""
    marked = fts5_highlight(text, query)
    return " ".join((text if marked is None else marked).split())


@settings(max_examples=300, deadline=None)
@given(text=text_st, query=query_st)
@pytest.mark.slow
def test_marks_are_fts5s_matches_whole_tokens(text: str, query: str) -> None:
    got = snippet(text, parse_query(query), width=10_000)  # the whole text: compare every mark
    assert got == highlighted(text, query)


@settings(max_examples=300, deadline=None)
@given(text=text_st, query=query_st, width=st.integers(10, 200))
def test_an_excerpt_starts_and_ends_between_tokens_and_is_never_empty(text: str, query: str, width: int) -> None:
    assume("*" not in text)  # so that the marks can be taken out again
    got = snippet(text, parse_query(query), width=width)
    if text.strip():
        assert got.strip("…")
    inner = got.removeprefix("…").removesuffix("…")
    # the excerpt's own marks are FTS5's marks of the excerpt's text: no token was cut at its edges
    assert inner == highlighted(inner.replace("**", ""), query)


def test_the_issue_query_marks_words_not_insides_of_words() -> None:
    got = snippet("It was created when states changed; the sync ate my notes.", parse_query("sync ate my notes"))
    assert "cre**ate**d" not in got and "st**ate**s" not in got
    assert "**sync** **ate** **my** **notes**" in got


def test_a_match_inside_the_notes_own_bold_is_not_marked_again() -> None:
    text = "- **Budget:** 40k for the Q3 plan.\n- __Budget__ again, and a budget outside."
    got = snippet(text, parse_query("budget"), width=10_000)
    assert "****" not in got and "____" not in got and "**__" not in got
    assert got.startswith("- **Budget:** 40k") and "__Budget__ again" in got and "a **budget** outside" in got
    # a bold run holding more than the match: still shown as the note has it
    assert snippet("**the Budget plan** and more", parse_query("budget")) == "**the Budget plan** and more"


def test_a_question_in_the_default_mode_marks_what_counted(tmp_path) -> None:
    """The snippet of a question marks the words that weighed (not "I", "the"); the whole query where a chunk
    holds it as typed (a remembered phrase, function words and all)."""
    from vaultsync.vault import Vault

    root = tmp_path / "vault"
    root.mkdir()
    (root / "App.md").write_text(
        "# App\n\nI have enabled 2FA. Will I lose my notes if I delete the app from the phone?\n", encoding="utf-8"
    )
    (root / "Recipe.md").write_text("# Recipe\n\nCan I keep an older copy of the recipe? Cook it.\n", encoding="utf-8")
    with Vault.open(tmp_path / "db.sqlite", root=root) as vault:
        vault.sync()
        hit = vault.search("how do I delete the app", limit=1).hits[0]
        assert hit["path"] == "App.md"
        assert "**delete**" in hit["snippet"] and "**app**" in hit["snippet"]
        assert "**I**" not in hit["snippet"] and "**the**" not in hit["snippet"]
        typed = vault.search("how do I delete the app", mode="keyword", limit=1).hits[0]
        assert "**I**" in typed["snippet"]  # the keyword mode matches (and marks) the query as typed
        remembered = vault.search("can I keep an older copy", limit=1).hits[0]
        assert "**Can I keep an older copy** of the recipe" in remembered["snippet"]


def test_a_links_address_is_not_marked_its_text_is() -> None:
    """Seen searching "remote": ``(**Remote**%20Work%20Policy.md)``. Inline links and images, autolinks, bare URLs
    and reference definitions keep their address (a title included) unmarked; link text and wiki links are marked."""
    remote = parse_query("remote")
    got = snippet("See the [Remote Work Policy](Remote%20Work%20Policy.md) for details.", remote)
    assert got == "See the [**Remote** Work Policy](Remote%20Work%20Policy.md) for details."
    text = (
        "A ![remote desk](img/remote.png) and <https://remote.example.com/x> or <remote@example.com>, "
        "https://example.com/remote-work. [[Remote Work|remote rules]] and [team][r].\n\n[r]: https://remote.io/t"
    )
    got = snippet(text, remote, width=10_000)
    assert got.count("**") == 2 * 3, got
    assert "![**remote** desk](img/remote.png)" in got and "[[**Remote** Work|**remote** rules]]" in got
    for address in ("<https://remote.example.com/x>", "<remote@example.com>", "https://example.com/remote-work."):
        assert address in got
    assert got.endswith("[r]: https://remote.io/t")
    # a link whose address holds the only match: its text shown, nothing marked
    lorem = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. "
    only = lorem * 3 + "Read [it](Remote.md)."
    assert snippet(only, remote, width=60) == "…eiusmod tempor. Read [it](Remote.md)."


def test_the_excerpt_is_cut_around_a_match_outside_addresses() -> None:
    """Long addresses ahead of the prose match no longer take the excerpt: it is cut around the prose, and its
    lead-in does not start inside an address."""
    links = " ".join(f"[doc{i}](https://example.com/a/long/path/remote-work/section-{i}/index.html)" for i in range(4))
    text = f"Links: {links} The remote work policy says three days a week at home, core hours ten to four."
    got = snippet(text, parse_query("remote"))
    assert got == "…The **remote** work policy says three days a week at home, core hours ten to four."
    assert snippet(text, parse_query("remote"), mark=False) == got.replace("**", "")


LINKS = [
    "[{0}]({1}%20{2}.md)",
    "![{0} {1}]({2}.png)",
    '[{0}](https://example.com/{1}/{2} "{2}")',
    "<https://{0}.example.com/{1}>",
    "https://example.com/{0}/{1}-{2}",
    "[[{0}|{1} {2}]]",
    "\n[{0}]: https://{1}.io/{2}\n",
]
ascii_words = [w for w in WORDS if w.isascii() and w.isalnum()]
linked_text_st = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)).map("".join),
        st.tuples(st.sampled_from(LINKS), st.lists(st.sampled_from(ascii_words), min_size=3, max_size=3)).map(
            lambda t: t[0].format(*t[1]) + " "
        ),
    ),
    min_size=1,
    max_size=40,
).map("".join)


def _unmarked_in(text: str, marked: str, spans: list[tuple[int, int]]) -> str:
    """FTS5's highlight of ``text`` (``marked``, spaces kept) without the marks that overlap ``spans``."""
    out, pos, i, start = [], 0, 0, None
    marks = []
    while i < len(marked):
        if marked.startswith("**", i):
            if start is None:
                start = pos
            else:
                marks.append((start, pos))
                start = None
            i += 2
            continue
        pos, i = pos + 1, i + 1
    keep = [(s, e) for s, e in marks if not any(a < e and s < b for a, b in spans)]
    pos = 0
    for s, e in keep:
        out += [text[pos:s], "**", text[s:e], "**"]
        pos = e
    out.append(text[pos:])
    return " ".join("".join(out).split())


@settings(max_examples=200, deadline=None)
@given(text=linked_text_st, query=query_st)
def test_marks_are_fts5s_matches_outside_addresses(text: str, query: str) -> None:
    assume("*" not in text)
    marked = fts5_highlight(text, query)
    want = _unmarked_in(text, marked, _addresses(text)) if marked is not None else " ".join(text.split())
    assert snippet(text, parse_query(query), width=10_000) == want


def test_a_search_answer_does_not_mark_a_links_address(tmp_path) -> None:
    """Through the vault's search (the answer the CLI, the MCP tools and the page show)."""
    from vaultsync.vault import Vault

    root = tmp_path / "vault"
    root.mkdir()
    (root / "Hiring.md").write_text(
        "# Hiring\n\nNew staff read the [Remote Work Policy](Remote%20Work%20Policy.md) first.\n", encoding="utf-8"
    )
    with Vault.open(tmp_path / "db.sqlite", root=root) as vault:
        vault.sync()
        for mode in ("keyword", "hybrid"):
            (hit,) = vault.search("remote", mode=mode, limit=5).hits
            assert "[**Remote** Work Policy](Remote%20Work%20Policy.md)" in hit["snippet"], hit["snippet"]

"""The page's server-side pieces without a browser: note HTML that cannot carry code, and word diffs.

The HTML check parses the output with the standard library's parser (not ours) and allows only the
tags and attributes a rendered note may have; hypothesis feeds it Markdown built from hostile pieces.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from hypothesis import given
from hypothesis import strategies as st

from vaultsync.ui.render import render, word_diff

ALLOWED_TAGS = {
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "em",
    "strong",
    "s",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "a",
    "span",
    "br",
    "hr",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "section",
    "sup",
    "div",
}
ALLOWED_ATTRIBUTES = {"class", "href", "data-path", "data-heading", "title", "rel", "target", "start", "id", "style"}
PIECES = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "</svg>",
    "[x](javascript:alert(1))",
    "[x](JAVASCRIPT:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](data:text/html,<script>alert(1)</script>)",
    "![i](data:image/svg+xml;base64,PHN2Zz4=)",
    "![i](http://example.com/i.png)",
    "[[Note]]",
    '[[Note|a" onclick="alert(1)]]',
    "[[#H]]",
    "![[Note#H]]",
    "<a href='javascript:alert(1)'>a</a>",
    "<iframe src=x></iframe>",
    "`<b>`",
    "```\n<b>\n```",
    "<div style='x'>",
    '"',
    "'",
    "<",
    ">",
    "&",
    "\n",
    "\n\n",
    "# ",
    "- ",
    "| a | b |\n|---|---|\n| c | d |",
    "%%c%%",
    "[^1]",
    "[^1]: note",
    "<!-- c -->",
    "<style>*{}</style>",
    "[x](vbscript:y)",
    "[x](file:///etc)",
    "[x](<javascript:alert(1)>)",
    "[x]: javascript:alert(1)\n\n[x]",
    "word",
    " ",
]


class Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS:
            self.problems.append(f"tag {tag}")
        for name, value in attrs:
            if name not in ALLOWED_ATTRIBUTES or (name == "style" and tag != "td" and tag != "th"):
                self.problems.append(f"attribute {name} on {tag}")
            if name == "style" and value and not value.startswith("text-align:"):
                self.problems.append(f"style {value}")
            in_page = value is not None and re.fullmatch(r"#(fn|fnref)?[0-9:]*", value)  # footnotes
            if name == "href" and not in_page and not (value or "").lower().startswith(("http:", "https:", "mailto:")):
                self.problems.append(f"href {value}")


def check(html: str) -> list[str]:
    checker = Checker()
    checker.feed(html)
    checker.close()
    return checker.problems


def resolve(link: dict) -> str | None:
    return "Note.md" if (link.get("target") or "").startswith("Note") else None


@given(st.lists(st.sampled_from(PIECES), max_size=25).map("".join))
def test_rendered_notes_hold_no_code(markdown: str) -> None:
    html = render(markdown, resolve)
    assert check(html) == [], html


def test_the_hostile_pieces_come_out_as_text() -> None:
    html = render("\n\n".join(PIECES), resolve)
    assert check(html) == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'class="wikilink" href="#" data-path="Note.md"' in html
    assert "a&quot; onclick=&quot;alert(1)" in html  # an alias is text, never an attribute
    assert "example.com" not in html.replace('title="http://example.com/i.png"', "")  # images are not loaded
    assert check('<a href="javascript:x">') == ["href javascript:x"]  # the checker itself can fail


@given(st.text(alphabet="ab \n.", max_size=40), st.text(alphabet="ab \n.", max_size=40))
def test_a_word_diff_gives_back_both_texts(before: str, after: str) -> None:
    runs = word_diff(before, after)
    assert "".join(t for op, t in runs if op != "+") == before
    assert "".join(t for op, t in runs if op != "-") == after
    assert all(t for _, t in runs) and all(a[0] != b[0] for a, b in zip(runs, runs[1:]))


def test_a_word_diff_marks_whole_words_and_keeps_the_rest() -> None:
    runs = word_diff(
        "Keep this line.\nWe use lighthouse beacons now.\n", "Keep this line.\nWe use mesh radio relays now.\n"
    )
    assert runs == [
        ["=", "Keep this line.\nWe use "],
        ["-", "lighthouse beacons"],
        ["+", "mesh radio relays"],
        ["=", " now.\n"],
    ]
    assert word_diff("same\n", "same\n") == [["=", "same\n"]]

"""``parsers.destinations`` gives markdown-it's own results: on generated input, on the destinations of a real
vault (the Obsidian Help clone, read at run time), and through ``parse_note`` on its notes with the most links."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt, helpers
from markdown_it.common.normalize_url import normalizeLink

from vaultsync.disk.folder import decode
from vaultsync.parsers import parse_note
from vaultsync.parsers.destinations import normalize_link, parse_link_destination
from vaultsync.parsers.engine import MD

MARKDOWN_IT = MarkdownIt()


def _same(string: str, pos: int, maximum: int) -> None:
    ours, theirs = parse_link_destination(string, pos, maximum), helpers.parseLinkDestination(string, pos, maximum)
    assert (ours.ok, ours.pos, ours.str) == (theirs.ok, theirs.pos, theirs.str), (string, pos, maximum)


@pytest.mark.parametrize(
    "string",
    [
        "<My Note.md>",
        "<a\\>b>",
        "<a\nb>",
        "<a<b>",
        "<open",
        "<>",
        "<a\\",
        "a(b)c",
        "a(b",
        "a)b",
        "(" * 33 + ")" * 33,
        "(" * 32 + ")" * 32,
        "a\\ b",
        "a\\)b",
        "a\\",
        "a b",
        "a\x7fb",
        "a\tb",
        "&amp;x",
        "a\\(b",
        "é/ü",
        "",
    ],
)
def test_destinations_read_as_markdown_it_reads_them(string: str) -> None:
    for maximum in range(len(string) + 2):
        for pos in range(min(maximum, len(string)) + 1):
            _same(string, pos, maximum)


def test_generated_destinations_read_as_markdown_it_reads_them() -> None:
    rnd = random.Random(20261202)
    alphabet = "<>()\\ \n\t\x01\x7fab.%é/:#?@&=[]`'\"AZ09-_~"
    for _ in range(40_000):
        string = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 16)))
        pos = rnd.randint(0, len(string))
        _same(string, pos, rnd.choice([len(string), rnd.randint(pos, len(string) + 2)]))


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com",
        "https://example.com/a/b?c=d&e=f#g",
        "http://x-y.b.c/p:q@r",
        "HTTPS://Example.com/",
        "https://a..b/",
        "https://a./x",
        "https://" + "a" * 64 + ".com/",
        "https://" + ".".join(["abc"] * 90) + "/x",
        "https://host:8080/x",
        "https://user@host/x",
        "https://[::1]/x",
        "https://bücher.de/",
        "https://x/{{repo}}",
        "https://x/a b",
        "//host/x",
        "mailto:a@b.c",
        "obsidian://open?vault=a",
        "javascript:alert(1)",
        "My%20Note.md",
        "My Note.md",
        "Note.md#Heading",
        "100%",
        "100%2",
        "%zz",
        "a/b/../c",
        "?q",
        "#h",
        "",
        "Örnek.md",
    ],
)
def test_normalized_as_markdown_it_normalizes(url: str) -> None:
    assert normalize_link(MARKDOWN_IT, url) == normalizeLink(url)


@pytest.mark.slow
def test_generated_addresses_normalized_as_markdown_it_normalizes() -> None:
    rnd = random.Random(1202)
    body = "abcXYZ019-._~/?#@&=+$,;!*'():%2Fé[] "
    hosts = ["a", "example.com", "x-y.b.c", "a..b", "a.", "-a.b", "a" * 64, ".".join(["abc"] * 90), "A.B"]
    for _ in range(40_000):
        scheme = rnd.choice(["", "http://", "https://", "HTTPS://", "https:", "//", "mailto:", "ftp://"])
        url = scheme + (rnd.choice(hosts) if scheme.endswith("//") else "")
        url += "".join(rnd.choice(body) for _ in range(rnd.randint(0, 12)))
        assert normalize_link(MARKDOWN_IT, url) == normalizeLink(url), url


_DESTINATION = re.compile(r"\]\(\s*(<[^>\n]*>|[^)\s]*)")


def _notes(clone: Path) -> list[tuple[str, str]]:
    return [
        (decode(path.read_bytes()), path.relative_to(clone).as_posix())
        for path in sorted(clone.rglob("*.md"))
        if ".git" not in path.parts
    ]


@pytest.mark.corpus
def test_a_real_vaults_links_parse_as_with_markdown_it_alone(help_clone: Path) -> None:
    notes = _notes(help_clone)
    found = [(text, m.start(1)) for text, _ in notes for m in _DESTINATION.finditer(text)]
    assert len(found) > 5_000
    for text, pos in found:
        _same(text, pos, len(text))
        plain = helpers.parseLinkDestination(text, pos, len(text))
        if plain.ok:
            assert normalize_link(MARKDOWN_IT, plain.str) == normalizeLink(plain.str)
    # the notes with the most links, parsed whole with our link code and with markdown-it's
    linked = sorted(notes, key=lambda note: -note[0].count("]("))[:150]
    ours = [parse_note(text, path) for text, path in linked]
    fast = MD.helpers, MD.normalizeLink
    try:
        MD.helpers = helpers
        del MD.normalizeLink
        theirs = [parse_note(text, path) for text, path in linked]
    finally:
        MD.helpers, MD.normalizeLink = fast
    assert sum(len(parsed.links) for parsed in ours) > 2_000
    assert ours == theirs

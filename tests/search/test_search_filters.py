"""Every door offers every search filter and applies it as the library does, as of a past time too.

One small vault of notes, a canvas and a base is recorded in two batches; the second gives two files a tag and
one a frontmatter value they did not have before. Each filter (path prefix, tags, frontmatter, file kinds, and a
combination) is asked through every door: ``Vault.search`` (its keywords, and one ``SearchFilter``, on SQLite and
PostgreSQL), ``vaultsync search`` (in process), the MCP tool ``search_notes`` and its whole-hits twin (a signing
server's ``search_notes``) through the official client, and the page's ``/api/search`` over real HTTP. The
expected files come from the facts the vault was written from (``STATES``), never from vaultsync: at the earlier
cutoff a filter must not see what the files were given later.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from support.mcp_helpers import error_text, sc
from support.ui_page import PageApi, in_process

from vaultsync import Vault
from vaultsync.errors import ConfigError
from vaultsync.hardened.manifest import Manifest
from vaultsync.search_filter import KIND_NAMES, KINDS, SearchFilter, kind_of
from vaultsync.server import ServeConfig, build_server

EARLY, LATE = "2024-01-01", "2024-02-01"
BETWEEN = "2024-01-15"
QUERY = "beacon"

# path -> (status in frontmatter or None, tags): what each file says at each batch; every file holds QUERY
STATES: dict[str, dict[str, tuple[str | None, tuple[str, ...]]]] = {
    EARLY: {
        "Projects/Atlas.md": ("draft", ()),
        "Projects/Board.canvas": (None, ()),
        "Views/Beacons.base": (None, ()),
        "Journal/Day.md": ("active", ("urgent",)),
        "Inbox.md": (None, ("misc",)),
    },
    LATE: {
        "Projects/Atlas.md": ("active", ("urgent/now",)),  # a nested tag: "urgent" matches it
        "Projects/Board.canvas": (None, ("urgent",)),  # a tag in a card's text
        "Views/Beacons.base": (None, ()),
        "Journal/Day.md": ("active", ("urgent",)),
        "Inbox.md": (None, ()),  # its tag removed
    },
}

FILTERS: list[dict[str, Any]] = [
    {"tags": ["urgent"]},
    {"tags": ["misc"]},
    {"where": {"status": "active"}},
    {"prefix": "Projects/"},
    {"kinds": ["canvas", "base"]},
    {"kinds": ["note"], "prefix": "Projects/", "tags": ["#Urgent"], "where": {"status": "active"}},
]


def text_of(path: str, status: str | None, tags: tuple[str, ...]) -> str:
    words = " ".join(f"#{t}" for t in tags)
    if path.endswith(".canvas"):
        card = {"id": "a", "type": "text", "text": f"{QUERY} board {words}", "x": 0, "y": 0, "width": 9, "height": 9}
        return json.dumps({"nodes": [card], "edges": []})
    if path.endswith(".base"):
        return f"views:\n  - type: table\n    name: {QUERY} list\n"
    front = f"---\nstatus: {status}\n---\n" if status else ""
    return f"{front}# {path.rpartition('/')[2][:-3]}\n\nthe {QUERY} notes {words}\n"


def expected(filters: dict[str, Any], cutoff: str | None) -> set[str]:
    """The files of the state at ``cutoff`` (None: now) each condition holds for, from the facts."""
    state = STATES[LATE if cutoff is None else max(t for t in STATES if t <= cutoff)]
    found = set()
    for path, (status, tags) in state.items():
        kind = "note" if path.endswith(".md") else path.rpartition(".")[2]
        wanted = [t.lstrip("#").lower() for t in filters.get("tags", [])]
        if not path.startswith(filters.get("prefix", "")):
            continue
        if filters.get("kinds") and kind not in filters["kinds"]:
            continue
        if not all(any(t == w or t.startswith(w + "/") for t in tags) for w in wanted):
            continue
        if any(key != "status" or value != status for key, value in filters.get("where", {}).items()):
            continue
        found.add(path)
    return found


def record(db: str | Path, root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    with Vault.open(db, root=root) as vault:
        for when, state in STATES.items():
            for path, facts in state.items():
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text(text_of(path, *facts), encoding="utf-8")
            vault.sync(known_at=when)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("filters")
    record(base / "vaultsync.db", base / "vault")
    return base / "vaultsync.db"


CUTOFFS = [BETWEEN, None]


def test_the_facts_tell_the_filters_apart() -> None:
    """The test can fail: without a filter every file matches, and each filter keeps a different set, which
    changes between the cutoffs for the tags and the frontmatter."""
    assert expected({}, None) == set(STATES[LATE])
    sets = [frozenset(expected(f, c)) for f in FILTERS for c in CUTOFFS]
    assert len(set(sets)) >= len(FILTERS) + 1
    assert expected(FILTERS[0], BETWEEN) < expected(FILTERS[0], None)
    assert expected(FILTERS[1], BETWEEN) and not expected(FILTERS[1], None)
    assert expected(FILTERS[2], BETWEEN) < expected(FILTERS[2], None)
    assert not expected(FILTERS[-1], BETWEEN) and expected(FILTERS[-1], None)


def test_the_library_applies_every_filter_then_and_now_on_both_engines(db: str, tmp_path: Path) -> None:
    record(db, tmp_path / "vault")
    with Vault.open(db, readonly=True) as vault:
        assert {h["path"] for h in vault.search(QUERY, mode="keyword", limit=50).hits} == set(STATES[LATE])
        for filters in FILTERS:
            for cutoff in CUTOFFS:
                want = expected(filters, cutoff)
                by_keywords = vault.search(QUERY, as_of=cutoff, mode="keyword", limit=50, **filters)
                by_value = vault.search(
                    QUERY, as_of=cutoff, mode="keyword", limit=50, filters=SearchFilter.of(**filters)
                )
                assert {h["path"] for h in by_keywords.hits} == want, (filters, cutoff)
                assert by_value.hits == by_keywords.hits


def _flags(filters: dict[str, Any]) -> list[str]:
    out = ["--prefix", filters["prefix"]] if "prefix" in filters else []
    out += [arg for tag in filters.get("tags", []) for arg in ("--tag", tag)]
    out += [arg for key, value in filters.get("where", {}).items() for arg in ("--where", f"{key}={value}")]
    return out + [arg for kind in filters.get("kinds", []) for arg in ("--kind", kind)]


@pytest.mark.parametrize("cutoff", CUTOFFS)
@pytest.mark.parametrize("filters", FILTERS)
def test_the_command_line_applies_every_filter(history: Path, cli, filters: dict[str, Any], cutoff: str | None) -> None:
    when = ["--as-of", cutoff] if cutoff else []
    done = cli("search", QUERY, "--mode", "keyword", "--limit", "50", "--json", *when, *_flags(filters), db=history)
    assert done.returncode == 0, done.stderr
    assert {h["path"] for h in json.loads(done.stdout)["hits"]} == expected(filters, cutoff)


def test_the_command_line_refuses_a_bad_filter_in_one_line(history: Path, cli) -> None:
    for flags, said in (
        (["--where", "status"], "key=value"),
        (["--tag", "#"], "a tag is a name"),
        (["--prefix", "P" * 2000], "at most 1024 characters"),
    ):
        done = cli("search", QUERY, *flags, db=history)
        assert done.returncode == 1 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    done = cli("search", QUERY, "--kind", "pdf", db=history)
    assert done.returncode == 2 and "'pdf' is not one of" in done.stderr


async def _mcp_paths(history: Path, signed: Path | None) -> dict[tuple[int, str | None], set[str]]:
    """The files each filter finds at each cutoff through search_notes (``signed``: a keystore, whose server
    answers with the whole hits of search_notes' twin), and the errors it gives for bad filters."""
    manifest = (
        None if signed is None else Manifest(path=signed.parent / "m.toml", db_path=history, keystore_path=signed)
    )
    found: dict[tuple[int, str | None], set[str]] = {}
    with Vault.open(history, readonly=True) as vault:
        async with Client(build_server(ServeConfig.of(vault, manifest=manifest))) as c:
            for i, filters in enumerate(FILTERS):
                for cutoff in CUTOFFS:
                    args = {"query": QUERY, "mode": "keyword", "limit": 50, **filters}
                    answer = sc(await c.call_tool("search_notes", {**args, **({"as_of": cutoff} if cutoff else {})}))
                    rows = answer["hits"] if signed else answer["notes"]
                    found[(i, cutoff)] = {row["path"] for row in rows}
            bad = await c.call_tool("search_notes", {"query": QUERY, "kinds": ["pdf"]})
            assert "unknown kind 'pdf'" in error_text(bad)
            bad = await c.call_tool("search_notes", {"query": QUERY, "where": {f"k{i}": "v" for i in range(21)}})
            assert bad.is_error
            boolean = sc(await c.call_tool("search_notes", {"query": QUERY, "where": {"status": True}}))
            assert not boolean["hits" if signed else "notes"]  # a JSON true is YAML's true: no note's status
    return found


@pytest.mark.anyio
@pytest.mark.parametrize("signed", [False, True], ids=["search_notes", "whole_hits"])
async def test_both_search_tools_apply_every_filter(history: Path, tmp_path: Path, signed: bool) -> None:
    keys = None
    if signed:
        keys = tmp_path / "keys.toml"
        keys.write_text(f'key_id = "k1"\nkey_hex = "{secrets.token_hex(32)}"\n', encoding="utf-8")
        keys.chmod(0o600)
    found = await _mcp_paths(history, keys)
    for i, filters in enumerate(FILTERS):
        for cutoff in CUTOFFS:
            assert found[(i, cutoff)] == expected(filters, cutoff), (filters, cutoff)


@pytest.mark.anyio
async def test_both_search_tools_take_the_same_arguments(history: Path, tmp_path: Path) -> None:
    """The whole-hits twin is built on search_notes' arguments: the same schema, without the answer's shape."""
    keys = tmp_path / "keys.toml"
    keys.write_text(f'key_id = "k1"\nkey_hex = "{secrets.token_hex(32)}"\n', encoding="utf-8")
    keys.chmod(0o600)
    schemas = []
    with Vault.open(history, readonly=True) as vault:
        for manifest in (None, Manifest(path=tmp_path / "m.toml", db_path=history, keystore_path=keys)):
            async with Client(build_server(ServeConfig.of(vault, manifest=manifest))) as c:
                tools = {t.name: t for t in (await c.list_tools()).tools}
                schemas.append(tools["search_notes"].input_schema["properties"])
    plain, whole = schemas
    assert {k: v for k, v in plain.items() if k not in ("full_text", "explain")} == whole
    assert {"prefix", "tags", "where", "kinds"} <= set(whole)
    assert whole["kinds"]["anyOf"][0]["items"]["enum"] == list(KIND_NAMES)


@pytest.fixture
def page(history: Path) -> Iterator[PageApi]:
    with in_process(Vault.open(history, readonly=True)) as port:
        yield PageApi(port)


def test_the_page_applies_every_filter(page: PageApi) -> None:
    for filters in FILTERS:
        params = [("prefix", filters["prefix"])] if "prefix" in filters else []
        params += [("tag", tag) for tag in filters.get("tags", [])]
        params += [("where", f"{key}={value}") for key, value in filters.get("where", {}).items()]
        params += [("kind", kind) for kind in filters.get("kinds", [])]
        for cutoff in CUTOFFS:
            status, answer = page.get("/api/search", [("q", QUERY), ("at", cutoff or "now"), *params])
            assert status == 200, answer
            assert {h["path"] for h in answer["hits"]} == expected(filters, cutoff), (filters, cutoff)
    status, answer = page.get("/api/search", [("q", QUERY), ("kind", "pdf")])
    assert status == 400 and "unknown kind 'pdf'" in answer["error"]
    status, answer = page.get("/api/search", [("q", QUERY), ("where", "status")])
    assert status == 400 and "key=value" in answer["error"]


def test_the_filter_value_checks_once_and_names_the_argument() -> None:
    assert not SearchFilter.of() and not SearchFilter.of(prefix="", tags=[], where={}, kinds=[])
    assert SearchFilter.of(where={"done": True, "n": 3}).where == (("done", "true"), ("n", "3"))
    assert SearchFilter.of(kinds=["note", "note"]).kinds == ("note",)
    assert SearchFilter.of(tags="project", kinds="note") == SearchFilter(tags=("project",), kinds=("note",))
    for args, argument in (
        ({"kinds": ["pdf"]}, "kinds"),
        ({"tags": ["x"] * 21}, "tags"),
        ({"tags": [""]}, "tags"),
        ({"where": {"": "x"}}, "where"),
        ({"where": {"k": "v" * 1001}}, "where"),
        ({"where": {"k": 10**2000}}, "where"),
        ({"prefix": "p" * 1025}, "prefix"),
    ):
        with pytest.raises(ConfigError) as caught:
            SearchFilter.of(**args)
        assert caught.value.argument == argument and "\n" not in str(caught.value)


def test_every_kind_is_named_by_its_file() -> None:
    from vaultsync.disk.paths import NOTE_SUFFIX
    from vaultsync.parsers.attachment import TEXT_SUFFIXES

    assert set(KINDS) == {NOTE_SUFFIX, *TEXT_SUFFIXES}  # every kind that is searched by its text has its name
    assert [kind_of(p) for p in ("a/b.md", "x.canvas", "y.base", "z.pdf", "img.png", "v.2/readme", "notes.MD")] == [
        "note",
        "canvas",
        "base",
        "attachment",
        "attachment",
        "attachment",
        "attachment",
    ]


@pytest.mark.anyio
async def test_every_door_declares_every_filter(history: Path) -> None:
    """A filter added to the value and forgotten by a door fails here: the library's keywords, the command's
    options and search_notes' arguments each name every field of ``SearchFilter``."""
    from typing import get_type_hints

    from vaultsync.cli import cli as group
    from vaultsync.search_filter import FILTER_NAMES, FilterArgs

    assert set(get_type_hints(FilterArgs)) == set(FILTER_NAMES)
    assert set(FILTER_NAMES) <= {p.name for p in group.commands["search"].params}
    with Vault.open(history, readonly=True) as vault:
        async with Client(build_server(ServeConfig.of(vault))) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(FILTER_NAMES) <= set(tools["search_notes"].input_schema["properties"])

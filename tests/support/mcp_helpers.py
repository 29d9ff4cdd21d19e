"""Shared by the MCP tests: a small vault with a known history, and client-side helpers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from vaultsync import Vault
from vaultsync.server import registry

T1, T2, T3 = "2024-01-01", "2024-02-01", "2024-03-01"
BIG_CHARS = 300_000
FILLERS = 24


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_history_vault(root: Path, db: Path) -> dict[str, Any]:
    """Three batches: create (T1); modify, rename, add fillers (T2); delete, add a big note (T3)."""
    root.mkdir(parents=True)
    write(root, "Projects/Atlas.md", "---\ntags: [project]\n---\n# Atlas\n\nKickoff on Monday with [[Ana]].\n")
    write(root, "People/Ana.md", "# Ana\n\nWorks on [[Projects/Atlas|Atlas]] and [Inbox](../Inbox.md).\n")
    write(root, "Inbox.md", "# Inbox\n\n- call the plumber\n- read [[Atlas#Risks]]\n")
    write(root, "Old Name.md", "# Renamed later\n\nThis note moves to Archive.\n")
    write(root, "Doomed.md", "# Doomed\n\nDeleted at T3.\n")
    with Vault.open(db, root=root) as vault:
        vault.sync(known_at=T1)
        write(
            root,
            "Projects/Atlas.md",
            "---\ntags: [project]\n---\n# Atlas\n\nKickoff on Monday with [[Ana]].\n"
            "\n## Risks\n\nThe budget is tight.\n",
        )
        (root / "Archive").mkdir()
        os.replace(root / "Old Name.md", root / "Archive" / "New Name.md")
        for i in range(FILLERS):
            write(root, f"Notes/Filler {i:02d}.md", f"# Filler {i}\n\nfiller text number {i} #filler\n")
        vault.sync(known_at=T2)
        (root / "Doomed.md").unlink()
        write(root, "Big.md", "# Big\n\n" + ("0123456789" * (BIG_CHARS // 10)))
        vault.sync(known_at=T3)
        notes = len(vault.ls())
    return {"notes": notes, "name": root.name}


def history_under(base: Path) -> dict[str, Any]:
    """``make_history_vault`` in ``base/vault`` with its database in ``base/db``, plus both paths."""
    db = base / "db" / "vaultsync.db"
    return {**make_history_vault(base / "vault", db), "root": base / "vault", "db": db}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


HTTP_TOKEN = "test-http-token-0123456789abcdef"
"""The bearer token ``start_http`` gives a loopback server (every HTTP server takes one)."""
AUTH = {"Authorization": f"Bearer {HTTP_TOKEN}"}


def http_client(url: str, token: str = HTTP_TOKEN, **options: Any) -> Any:
    """The official client's streamable HTTP transport to ``url``, sending the bearer token."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30, **options)
    return streamable_http_client(url, http_client=client)


def start_http(db: Path, vault: Path, port: int, *extra: str, host: str = "127.0.0.1") -> subprocess.Popen[str]:
    """``vaultsync serve --http`` as a subprocess, returned once it accepts connections. On loopback without
    its own --token-file (or OAuth) it requires ``HTTP_TOKEN``."""
    if host in ("127.0.0.1", "::1") and not {"--token-file", "--oauth-issuer"} & set(extra):
        token_file = Path(tempfile.mkdtemp(prefix="vaultsync-token-")) / "token"
        token_file.write_text(HTTP_TOKEN + "\n", encoding="utf-8")
        token_file.chmod(0o600)
        extra = (*extra, "--token-file", str(token_file))
    proc = subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "--db", str(db), "serve", str(vault), "--http", f"{host}:{port}", *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return listening(proc, port)


def listening(
    proc: subprocess.Popen[str], port: int, what: str = "the HTTP server", timeout: float = 30
) -> subprocess.Popen[str]:
    """``proc`` once it accepts connections on 127.0.0.1:``port`` (AssertionError with its stderr if it exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"{what} did not start within {timeout:g} s")


def stop(proc: subprocess.Popen[str]) -> str:
    """Stop a server subprocess (SIGTERM) and return its stderr."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.stderr.read() if proc.stderr else ""


class Updates:
    """Collects legacy ``notifications/resources/updated`` URIs from a client's message_handler."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self._event.set()

    async def wait_for(self, uri: str, timeout: float = 20, times: int = 1) -> None:
        """Until ``uri`` was reported updated ``times`` times in all."""
        with anyio.fail_after(timeout):
            while self.uris.count(uri) < times:
                self._event = anyio.Event()
                if self.uris.count(uri) >= times:
                    break
                await self._event.wait()


async def next_update(sub: Any, uri: str, timeout: float = 20) -> None:
    """Wait on a 2026 listen subscription until ``uri`` is reported updated."""
    with anyio.fail_after(timeout):
        async for event in sub:
            if getattr(event, "uri", None) == uri:
                return


async def all_pages(fetch: Callable[[str | None], Any]) -> list[Any]:
    """Follow cursors until the last page; returns the pages."""
    pages, cursor = [], None
    while True:
        page = await fetch(cursor)
        pages.append(page)
        cursor = page[1]
        if not cursor:
            return pages


# ---------------------------------------------------------------- the same checks on every transport

READ_TOOLS = list(registry.names(writes=False))
"""The read-only tools every server offers, in tools/list order (``vaultsync.server.registry``)."""
WRITE_TOOLS = list(registry.names(writes=True))
"""The tools ``--allow-writes`` adds."""
SEARCH = hasattr(Vault, "search")


def sc(result: Any) -> dict[str, Any]:
    """The structured content of a successful tool result."""
    assert result.is_error is False, result.content[0].text if result.content else result
    assert result.structured_content is not None
    return result.structured_content


def listed_paths(answer: dict[str, Any]) -> list[str]:
    """The note paths of a list_notes answer (notes grouped by folder), in order."""
    return [folder + row[0] for folder, rows in answer["folders"].items() for row in rows]


def hit_notes(answer: dict[str, Any]) -> list[str]:
    """The note paths of a search_notes answer, in the order of each note's best hit."""
    return [note["path"] for note in answer["notes"]]


def error_text(result: Any) -> str:
    assert result.is_error is True, result.structured_content
    return result.content[0].text


async def check_tool_listing(c: Any, *, writes: bool) -> None:
    tools = {t.name: t for t in (await c.list_tools()).tools}
    assert sorted(tools) == sorted(READ_TOOLS + (WRITE_TOOLS if writes else []))
    for name in READ_TOOLS:
        a = tools[name].annotations
        assert (a.read_only_hint, a.idempotent_hint, a.open_world_hint) == (True, True, False), name
        assert tools[name].output_schema and tools[name].output_schema["type"] == "object", name
        assert "$ref" not in str(tools[name].output_schema) and "anyOf" not in str(tools[name].output_schema)
        assert len(tools[name].description or "") > 40, name
    assert tools["diff_note"].input_schema["required"] == ["path", "from"]
    limit = tools["list_notes"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (1, 500)
    if writes:  # a write that replaces a note's text is destructive; one that only adds is not
        for name in WRITE_TOOLS:
            a = tools[name].annotations
            rewrites = name in ("edit_note", "restore_note")
            assert (a.read_only_hint, a.destructive_hint, a.open_world_hint) == (False, rewrites, False), name


async def check_read_tools(c: Any, root: Path, notes: int) -> None:
    """Every read-only tool, now and as of past times, against make_history_vault's history."""
    import hashlib

    atlas = sc(await c.call_tool("read_note", {"path": "Projects/Atlas.md"}))
    disk = (root / "Projects/Atlas.md").read_bytes()
    assert atlas["content"].encode() == disk and "## Risks" in atlas["content"]
    assert atlas["content_hash"] == hashlib.sha256(disk).hexdigest()
    assert (atlas["known_at"], atlas["title"], atlas["tags"]) == ("2024-02-01T00:00:00Z", "Atlas", ["project"])
    assert atlas["links"][0]["target"] == "Ana" and atlas["truncated"] is False and atlas["next_offset"] is None
    then = sc(await c.call_tool("read_note", {"path": "Projects/Atlas", "as_of": "2024-01-15"}))
    assert "Risks" not in then["content"] and then["known_at"] == "2024-01-01T00:00:00Z"
    old = sc(await c.call_tool("read_note", {"path": "Old Name.md", "as_of": T1}))
    assert old["content"].startswith("# Renamed later")
    assert "renamed to Archive/New Name.md" in error_text(await c.call_tool("read_note", {"path": "Old Name.md"}))

    history = sc(await c.call_tool("note_history", {"path": "Archive/New Name.md"}))
    assert history["path"] == "Archive/New Name.md"  # a row names its path where it had another name
    assert [(r["kind"], r.get("path", history["path"])) for r in history["revisions"]] == [
        ("created", "Old Name.md"),
        ("renamed", "Archive/New Name.md"),
    ]
    assert history["revisions"][1]["renamed_from"] == "Old Name.md"
    window = sc(await c.call_tool("note_history", {"path": "Projects/Atlas.md", "since": T1}))
    assert [r["kind"] for r in window["revisions"]] == ["modified"]

    diff = sc(await c.call_tool("diff_note", {"path": "Projects/Atlas.md", "from": T1, "to": T2}))
    assert "+## Risks" in diff["diff"] and diff["from"] == T1 and diff["truncated"] is False
    same = sc(await c.call_tool("diff_note", {"path": "Projects/Atlas.md", "from": T2}))
    assert same["diff"] == ""

    changes = sc(await c.call_tool("list_changes", {"since": T1, "until": T2}))
    assert changes["counts"] == {"modified": 1, "renamed": 1, "created": FILLERS}
    later = sc(await c.call_tool("list_changes", {"since": T2, "limit": 1}))
    assert later["counts"] == {"deleted": 1, "created": 1} and later["truncated"] is True
    assert len(later["changes"]) == 1

    listing = sc(await c.call_tool("list_notes", {"limit": 10}))
    paths, cursor, pages = listed_paths(listing), listing.get("next_cursor"), 1
    while cursor:
        more = sc(await c.call_tool("list_notes", {"limit": 10, "cursor": cursor}))
        paths += listed_paths(more)
        cursor, pages = more.get("next_cursor"), pages + 1
    assert len(paths) == notes and paths == sorted(paths) and pages == -(-notes // 10)
    past = sc(await c.call_tool("list_notes", {"as_of": T1}))
    assert listed_paths(past) == ["Doomed.md", "Inbox.md", "Old Name.md", "People/Ana.md", "Projects/Atlas.md"]
    assert len(listed_paths(sc(await c.call_tool("list_notes", {"tag": "filler"})))) == FILLERS
    assert len(listed_paths(sc(await c.call_tool("list_notes", {"prefix": "Notes/", "limit": 500})))) == FILLERS
    assert "invalid cursor" in error_text(await c.call_tool("list_notes", {"cursor": "garbage!"}))

    links = sc(await c.call_tool("get_links", {"path": "Projects/Atlas.md", "as_of": T1}))
    assert [(o["target"], o["resolved"]) for o in links["outgoing"]] == [("Ana", "People/Ana.md")]
    assert sorted(b["source"] for b in links["backlinks"]) == ["Inbox.md", "People/Ana.md"]
    inbox = sc(await c.call_tool("get_links", {"path": "Inbox.md"}))
    assert [b["source"] for b in inbox["backlinks"]] == ["People/Ana.md"]

    status = sc(await c.call_tool("vault_status", {}))
    assert (status["notes"], status["batches"], status["last_batch"]) == (notes, 3, "2024-03-01T00:00:00Z")
    assert status["first_batch"] == "2024-01-01T00:00:00Z"

    if SEARCH:
        found = sc(await c.call_tool("search_notes", {"query": "plumber"}))
        top = found["notes"][0]
        assert top["path"] == "Inbox.md" and found["times"][top["time"]] == "2024-01-01T00:00:00Z"
        assert hashlib.sha256((root / "Inbox.md").read_bytes()).hexdigest().startswith(top["revision"])
        heading, first, last, excerpt = top["hits"][0]
        assert (heading, first) == ("Inbox", 1) and last >= first and "call the plumber" in excerpt
        budget_now = sc(await c.call_tool("search_notes", {"query": "budget tight", "mode": "keyword"}))
        assert hit_notes(budget_now)[:1] == ["Projects/Atlas.md"]
        budget_then = sc(await c.call_tool("search_notes", {"query": "budget tight", "mode": "keyword", "as_of": T1}))
        assert budget_then["notes"] == []


async def check_errors(c: Any) -> None:
    """Mistakes a model makes get a tool error saying what to fix, and the server keeps serving."""
    missing = error_text(await c.call_tool("read_note", {"path": "Nope.md"}))
    assert "did not exist" in missing and "list_notes" in missing
    assert "did not exist as of 2023-06-01" in error_text(
        await c.call_tool("read_note", {"path": "Inbox.md", "as_of": "2023-06-01"})
    )
    bad_date = error_text(await c.call_tool("read_note", {"path": "Inbox.md", "as_of": "last tuesday"}))
    assert "invalid as_of 'last tuesday'" in bad_date and "YYYY-MM-DD" in bad_date
    assert "invalid from" in error_text(await c.call_tool("diff_note", {"path": "Inbox.md", "from": "2024-13-01"}))
    assert "outside the vault" in error_text(await c.call_tool("read_note", {"path": "../etc/passwd"}))
    assert "vault-relative" in error_text(await c.call_tool("get_links", {"path": "/etc/passwd"}))
    assert "until is earlier" in error_text(await c.call_tool("list_changes", {"since": T2, "until": T1}))
    wrong_type = error_text(await c.call_tool("list_notes", {"limit": "many"}))
    assert "limit" in wrong_type and "integer" in wrong_type
    assert "less than or equal to 500" in error_text(await c.call_tool("list_notes", {"limit": 10_000}))
    assert "missing argument 'path'" in error_text(await c.call_tool("read_note", {}))
    unknown = await c.call_tool("no_such_tool", {})
    assert unknown.is_error and "Unknown tool" in unknown.content[0].text
    assert sc(await c.call_tool("vault_status", {}))["notes"] > 0


async def check_big_note(c: Any, root: Path) -> None:
    """A note over 256K characters comes back in pages that join to the exact text."""
    text = (root / "Big.md").read_text(encoding="utf-8")
    first = sc(await c.call_tool("read_note", {"path": "Big.md"}))
    assert first["truncated"] is True and first["next_offset"] == 262_144 and len(first["content"]) == 262_144
    assert first["total_chars"] == len(text)
    rest = sc(await c.call_tool("read_note", {"path": "Big.md", "offset": first["next_offset"]}))
    assert rest["truncated"] is False and rest["next_offset"] is None
    assert first["content"] + rest["content"] == text
    small = sc(await c.call_tool("read_note", {"path": "Big.md", "offset": 2, "max_chars": 3}))
    assert small["content"] == text[2:5] and small["next_offset"] == 5


async def check_resources(c: Any, notes: int, page_size: int) -> None:
    """note:// resources are listed a page at a time and read back as the current text."""
    uris, cursor, pages = [], None, 0
    while True:
        page = await c.list_resources(cursor=cursor)
        uris += [str(r.uri) for r in page.resources]
        pages += 1
        cursor = page.next_cursor
        if not cursor:
            break
    assert len(uris) == notes and pages == -(-notes // page_size)
    assert "note://Notes/Filler%2000.md" in uris and "note://Projects/Atlas.md" in uris
    text = (await c.read_resource("note://Notes/Filler%2000.md")).contents[0].text
    assert text.startswith("# Filler 0")
    templates = (await c.list_resource_templates()).resource_templates
    assert sorted(t.uri_template for t in templates) == ["attachment://{revision}/{+path}", "note://{+path}"]


async def watching(c: Any, timeout: float = 30) -> dict[str, Any]:
    """Wait until the server's in-process watcher has caught up and is watching; its status."""
    with anyio.fail_after(timeout):
        while True:
            status = sc(await c.call_tool("vault_status", {}))["watcher"]
            if status["in_process"] and status["running"] and not status.get("starting"):
                return status
            assert not status.get("last_error"), status
            await anyio.sleep(0.05)

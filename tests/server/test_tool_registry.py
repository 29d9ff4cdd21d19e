"""One registry of tools (``vaultsync.server.registry``): what the server lists agrees with it, the scope each tool
needs follows from its annotations (the strictest scope when in doubt, end to end behind OAuth), and the bundle, the
examples and the docs name the tools it holds.

The checks compare against behaviour the registry does not state: which tools ``--allow-writes`` adds (the
server's own code decides that), what a real OAuth resource server answers a token, what the docs say."""

from __future__ import annotations

import re
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from mcp import Client
from mcp.types import ToolAnnotations
from support.hardened_helpers import authed, write_keystore
from support.mcp_helpers import free_port, history_under
from support.oauth_rs import call, challenge, post, signing_issuer

from vaultsync import Vault
from vaultsync.hardened.access import READ, WRITE, OAuthSettings
from vaultsync.hardened.manifest import Manifest
from vaultsync.server import ServeConfig, build_server, registry
from vaultsync.server.app import server_for
from vaultsync.server.served import ServedVault
from vaultsync.server.toolkit import ToolSet
from vaultsync.server.transports import http_app

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return history_under(tmp_path_factory.mktemp("registry"))


async def listed(vault: Vault, **options: Any) -> dict[str, Any]:
    """The tools a server over ``vault`` lists to the official client, by name (in order)."""
    async with Client(build_server(ServeConfig.of(vault, **options))) as c:
        return {t.name: t for t in (await c.list_tools()).tools}


def scope_mismatches(tools: dict[str, Any]) -> list[str]:
    """Each listed tool whose required scope is not the one its listed annotations call for."""
    found = []
    for name, tool in tools.items():
        hint = tool.annotations.read_only_hint if tool.annotations is not None else None
        wanted = READ if hint is True else WRITE
        if registry.required_scope(name) != wanted:
            found.append(
                f"{name}: tools/list says readOnlyHint={hint}, so it needs {wanted}, but OAuth asks "
                f"{registry.required_scope(name)} for it"
            )
    return found


@pytest.mark.anyio
async def test_each_listed_tools_scope_follows_its_annotations_and_writes_add_exactly_the_write_scoped(
    history: dict[str, Any], tmp_path: Path
) -> None:
    keys = write_keystore(tmp_path / "keys.toml")
    signing = Manifest(path=tmp_path / "m.toml", db_path=history["db"], keystore_path=keys)
    with Vault.open(history["db"], root=history["root"]) as vault:
        reads, everything = await listed(vault), await listed(vault, allow_writes=True)
        signed = await listed(vault, manifest=signing)
    assert "verify_receipt" in signed
    for tools in (everything, signed):
        assert not scope_mismatches(tools), "\n".join(scope_mismatches(tools))
    added = [name for name in everything if name not in reads]
    write_scoped = [name for name in everything if registry.required_scope(name) == WRITE]
    assert added == write_scoped, (
        f"--allow-writes adds {added}, but the tools that need {WRITE} are {write_scoped}: "
        "a tool that changes the vault must not be declared read-only in vaultsync/server/registry.py"
    )
    assert list(everything) == [s.name for s in registry.TOOLS if s.name in everything]  # the registry's order
    for name, tool in everything.items():  # the title and the hints are the registry's
        spec = registry.BY_NAME[name]
        assert (tool.title, tool.annotations) == (spec.title, spec.annotations), name


def test_without_a_read_only_hint_a_tool_needs_the_write_scope() -> None:
    assert registry.scope_of(ToolAnnotations(read_only_hint=True)) == READ
    for hints in (None, ToolAnnotations(), ToolAnnotations(read_only_hint=False, destructive_hint=False)):
        assert registry.scope_of(hints) == WRITE, hints
    assert registry.required_scope("no_such_tool") == WRITE  # a name the registry does not know: the strictest


def test_a_function_the_registry_does_not_name_is_refused() -> None:
    def unregistered_tool() -> str:
        """Not a tool of the registry."""
        return "now"

    with pytest.raises(LookupError, match="'unregistered_tool' is not in vaultsync/server/registry.py's TOOLS"):
        ToolSet().add(unregistered_tool)


# ---------------------------------------------------------------- end to end behind OAuth


def stamp_note(path: str) -> str:
    """A tool registered straight with the SDK, as a new write tool might be: annotations without readOnlyHint,
    and no entry in the registry."""
    return f"stamped {path}"


@pytest.fixture(scope="module")
def oauth_server(history: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A real OAuth resource server on loopback (uvicorn in a thread, the small issuer's JWTs) over a read-only
    vault, its MCP server with ``stamp_note`` added beside the registry's tools."""
    with signing_issuer() as issuer, Vault.open(history["db"], root=history["root"]) as vault:
        port = free_port()
        public = f"http://127.0.0.1:{port}"
        served = ServedVault(ServeConfig.of(vault, oauth=True))
        mcp = server_for(served)
        mcp.add_tool(stamp_note, annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
        settings = OAuthSettings(issuer=issuer.url, public_url=public)
        app = http_app(mcp, "127.0.0.1", port, token=None, oauth=settings, served=served)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started, "the OAuth server did not start"
        try:
            yield {"url": f"{public}/mcp", "issuer": issuer}
        finally:
            server.should_exit = True
            thread.join(30)


@pytest.mark.anyio
async def test_behind_oauth_a_tool_without_read_only_hint_needs_write(oauth_server: dict[str, Any]) -> None:
    url, issuer = oauth_server["url"], oauth_server["issuer"]
    reader = issuer.token("reader", url, scope="vault:read")
    async with Client(authed(url, reader)) as c:
        names = {t.name for t in (await c.list_tools()).tools}
    assert "search_notes" in names and "stamp_note" not in names
    answer = post(url, call("stamp_note", {"path": "Inbox.md"}), reader)
    assert answer.status_code == 403, answer.text
    assert 'error="insufficient_scope"' in challenge(answer) and f'scope="{WRITE}"' in challenge(answer)
    writer = issuer.token("writer", url, scope=f"{READ} {WRITE}")
    async with Client(authed(url, writer)) as c:
        assert "stamp_note" in {t.name for t in (await c.list_tools()).tools}
        done = await c.call_tool("stamp_note", {"path": "Inbox.md"})
    assert done.is_error is False and done.content[0].text == "stamped Inbox.md"


# ---------------------------------------------------------------- what is produced from the registry, or checked


def test_the_bundle_lists_the_registry_tools_as_generated() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import docgen_bundle
    finally:
        sys.path.remove(str(REPO / "scripts"))
    page = (REPO / docgen_bundle.PAGE).read_text(encoding="utf-8")
    assert page == docgen_bundle.render(), f"{docgen_bundle.PAGE} is stale: run `make docs-gen`"


OFFERED = registry.names(writes=False) + registry.names(writes=True)
"""The tools every server offers (with writes allowed): what the README and the docs name."""


@pytest.mark.parametrize("page", ["README.md", "docs/assistants.md"])
def test_the_docs_name_every_tool(page: str) -> None:
    text = (REPO / page).read_text(encoding="utf-8")
    missing = [name for name in OFFERED if f"`{name}`" not in text]
    assert not missing, f"{page} does not name {missing}"


def test_the_hosted_page_names_the_write_scope_tools() -> None:
    text = (REPO / "docs/hosted.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith(f"| `{WRITE}` |"))
    assert re.findall(r"`([a-z_]+)`", row.split("|")[2]) == list(registry.names(writes=True)), row


def test_the_example_manifest_names_only_known_tools() -> None:
    text = (REPO / "examples/manifest.toml").read_text(encoding="utf-8")
    settings = tomllib.loads(re.sub(r"(?m)^#: ", "", text))  # every optional setting taken
    rules = settings["role_filter"]
    named = [*settings["allowed_tools"], *rules["allow"], *rules["deny"]]
    assert named and set(named) <= set(registry.names()) | set(registry.names(needs="keystore")), named
    said = next(line for line in text.splitlines() if line.startswith("# Offer the write tools"))
    assert re.findall(r"\b[a-z]+_[a-z_]+\b", said) == list(registry.names(writes=True)), said  # allow_writes' comment

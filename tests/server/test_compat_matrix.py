"""The client compatibility matrix (docs/compatibility.md): the official Python SDK v2 in both protocol eras
(in this process), the newest Python SDK 1.x (in .venv-sdk1, a subprocess) and the TypeScript SDK at its
current release and an older minor line (Node.js, a subprocess) each run the same script against a real
``vaultsync serve`` over stdio and over streamable HTTP with a bearer token. ``make test`` installs every
client; one that is not installed skips, saying why. ``make compat-doc`` rewrites the doc from a run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import traceback
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from support import compat_matrix as cm
from support.mcp_helpers import free_port, history_under, start_http, stop

pytestmark = pytest.mark.client

REPO = Path(__file__).resolve().parents[2]
JS = REPO / "tests" / "js"
SDK1_PYTHON = REPO / ".venv-sdk1" / "bin" / "python"
TS_PACKAGES = {cm.TS_CURRENT: "@modelcontextprotocol/sdk", cm.TS_OLD: "sdk-old"}  # npm aliases, tests/js/package.json
TOKEN = "matrix-token-0123456789abcdef"
WRITE = os.environ.get("VAULTSYNC_WRITE_COMPAT") == "1"


async def v2_row(mode: str, transport: str, stdio: StdioServerParameters, url: str) -> dict[str, Any]:
    """The Python SDK v2 (this venv) runs the script; mode "auto" negotiates 2026-07-28, "legacy" 2025-11-25."""
    row: dict[str, Any] = {
        "client": cm.PY2_AUTO if mode == "auto" else cm.PY2_LEGACY,
        "version": version("mcp"),
        "transport": transport,
    }
    try:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
            target = stdio if transport == "stdio" else streamable_http_client(url, http_client=http)
            async with Client(target, mode=mode) as c:
                tools = (await c.list_tools()).tools
                calls = {}
                for call in cm.SCRIPT:
                    r = await c.call_tool(call["tool"], call["arguments"])
                    calls[call["step"]] = {
                        "isError": r.is_error,
                        "structured": r.structured_content,
                        "text": r.content[0].text if r.content else None,
                    }
                row.update(
                    protocol=c.protocol_version,
                    server=c.server_info.name,
                    calls=calls,
                    tools=[{"name": t.name, "readOnly": t.annotations.read_only_hint} for t in tools],
                )
    except Exception:
        row["error"] = traceback.format_exc()
    return row


def start_subprocess_clients(spec: dict[str, Any], unavailable: dict[str, str]) -> list[subprocess.Popen[str]]:
    """Start the out-of-venv clients that are installed; record why the others cannot run."""
    env = {**os.environ, "VAULTSYNC_TEST_TOKEN": TOKEN}
    started = []
    if SDK1_PYTHON.exists():
        started.append(
            subprocess.Popen(
                [
                    str(SDK1_PYTHON),
                    str(REPO / "tests" / "compat" / "sdk1_client.py"),
                    json.dumps({**spec, "label": cm.PY1}),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
        )
    else:
        unavailable[cm.PY1] = (
            "SKIPPED: .venv-sdk1 is missing; `make test` creates it (pip install from requirements-sdk1.txt)"
        )
    node = shutil.which("node")
    packages = {}
    for label, name in TS_PACKAGES.items():
        if node is None:
            unavailable[label] = "SKIPPED: Node.js is not installed, so the TypeScript SDK clients did not run"
        elif not (JS / "node_modules" / name / "package.json").exists():
            unavailable[label] = f"SKIPPED: {name} is not installed in tests/js; `make test` runs npm ci there"
        else:
            packages[label] = name
    if packages:
        started.append(
            subprocess.Popen(
                [node, str(JS / "client.mjs"), json.dumps({**spec, "packages": packages})],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=JS,
            )
        )
    return started


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every client against one vault: one HTTP server shared by all, one stdio server per client run."""
    history = history_under(tmp_path_factory.mktemp("compat"))
    token_file = history["root"].parent / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    port = free_port()
    server = start_http(history["db"], history["root"], port, "--token-file", str(token_file))
    url = f"http://127.0.0.1:{port}/mcp"
    argv = ["-m", "vaultsync", "--db", str(history["db"]), "serve", str(history["root"])]
    spec = {"stdio": {"command": sys.executable, "args": argv}, "http": url, "script": cm.SCRIPT}
    unavailable: dict[str, str] = {}
    clients: list[subprocess.Popen[str]] = []
    try:
        clients += start_subprocess_clients(spec, unavailable)

        async def in_process() -> list[dict[str, Any]]:
            stdio = StdioServerParameters(command=sys.executable, args=argv)
            return [
                await v2_row(mode, transport, stdio, url) for mode in ("auto", "legacy") for transport in cm.TRANSPORTS
            ]

        rows = anyio.run(in_process)
        for proc in clients:
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0 and out.strip(), f"{proc.args[:2]} exited {proc.returncode}: {err}"
            rows += json.loads(out)
    finally:
        for proc in clients:
            if proc.poll() is None:  # timed out, or this process failed first: stop it (its stdio servers follow)
                proc.kill()
                proc.communicate()
        stderr = stop(server)
    assert "Traceback" not in stderr, stderr
    return {"rows": rows, "unavailable": unavailable}


@pytest.mark.parametrize("client", cm.CLIENTS)
def test_client_runs_the_script_on_both_transports(matrix: dict[str, Any], client: str) -> None:
    if client in matrix["unavailable"]:
        pytest.skip(matrix["unavailable"][client])
    rows = [r for r in matrix["rows"] if r["client"] == client]
    assert [r["transport"] for r in rows] == cm.TRANSPORTS
    for row in rows:
        assert cm.problems(row) == [], (row["transport"], row.get("error") or row)
    versions = {r["version"] for r in rows} | {r["protocol"] for r in rows}
    if client == cm.PY2_AUTO:
        assert versions == {version("mcp"), "2026-07-28"} and version("mcp").startswith("2.")
    elif client == cm.PY2_LEGACY:
        assert versions == {version("mcp"), "2025-11-25"}
    elif client == cm.PY1:
        assert rows[0]["version"].startswith("1.") and rows[0]["protocol"] < "2026-07-28"
    else:
        assert len({r["version"] for r in rows}) == 1 and len({r["protocol"] for r in rows}) == 1


def test_ts_lines_differ(matrix: dict[str, Any]) -> None:
    """The two TypeScript rows are two minor lines, not one package installed twice."""
    missing = [matrix["unavailable"][c] for c in (cm.TS_CURRENT, cm.TS_OLD) if c in matrix["unavailable"]]
    if missing:
        pytest.skip(missing[0])
    current, old = ({r["version"] for r in matrix["rows"] if r["client"] == c} for c in (cm.TS_CURRENT, cm.TS_OLD))
    assert len(current) == len(old) == 1
    assert [int(p) for p in old.pop().split(".")[:2]] < [int(p) for p in current.pop().split(".")[:2]]


def test_checks_flag_each_wrong_answer(matrix: dict[str, Any]) -> None:
    """The row checks are not vacuous: a good row breaks on any one wrong answer."""
    good = next(r for r in matrix["rows"] if r["client"] == cm.PY2_AUTO and r["transport"] == "stdio")
    assert cm.problems(good) == [] and cm.line(good)[-1] == "pass"
    breaks = [
        ("protocol", None),
        ("server", "other"),
        ("tools", good["tools"][1:]),
        ("tools", [{**t, "readOnly": None} for t in good["tools"]]),
    ]
    for step, field, value in [
        ("search", "isError", True),
        ("read", "structured", {**good["calls"]["read"]["structured"], "known_at": "2024-02-01T00:00:00Z"}),
        ("missing", "isError", False),
        ("missing", "text", "no such note"),
    ]:
        breaks.append(("calls", {**good["calls"], step: {**good["calls"][step], field: value}}))
    for key, value in breaks:
        bad = {**good, key: value}
        assert cm.problems(bad) and cm.line(bad)[-1].startswith("FAIL: "), (key, value)
    assert (
        cm.line({**good, "error": "Traceback...\nConnectionError: refused"})[-1] == "FAIL: client error: "
        "ConnectionError: refused"
    )
    assert cm.parse(cm.render({cm.line(good)})) == {cm.line(good)}


def test_doc_lists_exactly_the_tested_rows(matrix: dict[str, Any]) -> None:
    tested = {cm.line(r) for r in matrix["rows"]}
    if WRITE:
        assert not matrix["unavailable"], f"not writing a partial matrix: {matrix['unavailable']}"
        cm.DOC.parent.mkdir(exist_ok=True)
        cm.DOC.write_text(cm.render(tested), encoding="utf-8")
    documented = cm.parse(cm.DOC.read_text(encoding="utf-8")) if cm.DOC.exists() else set()
    unverified = {cells for cells in documented if cells[0] in matrix["unavailable"]}
    missing, untested = tested - documented, documented - tested - unverified
    assert not missing and not untested, (
        "docs/compatibility.md disagrees with the tested rows; run `make compat-doc` and commit it.\n"
        + "".join(f"  tested, not in the doc: {m}\n" for m in sorted(missing))
        + "".join(f"  in the doc, not tested: {u}\n" for u in sorted(untested))
    )
    if unverified:
        pytest.skip(
            f"{len(unverified)} documented row(s) not verified here: "
            + "; ".join(sorted(set(matrix["unavailable"].values())))
        )

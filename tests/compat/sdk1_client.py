"""The newest Python MCP SDK 1.x as a client of ``vaultsync serve``, for tests/server/test_compat_matrix.py.

Runs in .venv-sdk1 (``make test`` builds it from tests/compat/requirements-sdk1.txt), never in the project
venv: it imports only the 1.x SDK. Usage: ``python sdk1_client.py SPEC_JSON`` (token in
$VAULTSYNC_TEST_TOKEN); prints a JSON list, one row per transport, in the shape tests/js/client.mjs prints.
"""

import json
import os
import sys
import traceback
from importlib.metadata import version

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def run_script(session: ClientSession, script: list) -> dict:
    init = await session.initialize()
    tools = (await session.list_tools()).tools
    calls = {}
    for call in script:
        r = await session.call_tool(call["tool"], call["arguments"])
        calls[call["step"]] = {
            "isError": bool(r.isError),
            "structured": r.structuredContent,
            "text": r.content[0].text if r.content else None,
        }
    return {
        "protocol": init.protocolVersion,
        "server": init.serverInfo.name,
        "calls": calls,
        "tools": [{"name": t.name, "readOnly": t.annotations.readOnlyHint if t.annotations else None} for t in tools],
    }


async def over_stdio(spec: dict) -> dict:
    params = StdioServerParameters(command=spec["stdio"]["command"], args=spec["stdio"]["args"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        return await run_script(session, spec["script"])


async def over_http(spec: dict) -> dict:
    headers = {"Authorization": f"Bearer {os.environ['VAULTSYNC_TEST_TOKEN']}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(spec["http"], http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        return await run_script(session, spec["script"])


def main() -> None:
    spec = json.loads(sys.argv[1])
    rows = []
    for name, run in (("stdio", over_stdio), ("streamable HTTP", over_http)):
        head = {"client": spec["label"], "version": version("mcp"), "transport": name}
        try:
            rows.append({**head, **anyio.run(run, spec)})
        except Exception:  # a row that failed still reports, with the error, so the matrix shows it
            rows.append({**head, "error": traceback.format_exc()})
    print(json.dumps(rows))


if __name__ == "__main__":
    main()

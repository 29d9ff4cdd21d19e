"""Many sessions of the newest Python MCP SDK 1.x (protocol 2025-11-25: a session per server) through a proxy.

Runs in .venv-sdk1 (see sdk1_client.py). Usage: ``python sdk1_sessions.py URL CA_FILE N`` with the bearer token in
$VAULTSYNC_TEST_TOKEN: N sessions one after another, session i from the local address 127.0.0.(10+i) (as N
different client machines would come), each initializing, listing the tools and calling search_notes twice.
Prints a JSON object: the protocol negotiated, how many sessions completed, and the first error of each that
did not.
"""

import json
import os
import ssl
import sys
import traceback

import anyio
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def one(url: str, context: ssl.SSLContext, address: str) -> str:
    headers = {"Authorization": f"Bearer {os.environ['VAULTSYNC_TEST_TOKEN']}"}
    transport = httpx.AsyncHTTPTransport(local_address=address, verify=context)
    async with (
        httpx.AsyncClient(headers=headers, timeout=30, transport=transport) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        await session.list_tools()
        for _ in range(2):
            result = await session.call_tool("search_notes", {"query": "kickoff", "mode": "keyword"})
            if result.isError:
                raise RuntimeError(result.content[0].text if result.content else "isError")
        return init.protocolVersion


async def main(url: str, cafile: str, count: int) -> dict:
    context = ssl.create_default_context(cafile=cafile)
    done, errors, protocols = 0, [], set()
    for i in range(count):
        try:
            with anyio.fail_after(60):
                protocols.add(await one(url, context, f"127.0.0.{10 + i}"))
            done += 1
        except BaseException:  # noqa: BLE001 - each failed session is reported, with its error
            errors.append(traceback.format_exc(limit=3)[-600:])
    return {"protocols": sorted(protocols), "completed": done, "errors": errors}


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))))

"""``GET /metrics`` of a hardened HTTP server that asks for it (``[http] metrics = true``), watching its vault:
Prometheus text with the requests by kind and status class, their latency histogram, server errors, and the
watcher's batches and lag; never a note's text, path or the query asked. Without the setting there is none."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from support.hardened_helpers import authed, start_hardened_http, token_entry, write_manifest
from support.mcp_helpers import free_port, stop, write

TOKEN = "metrics-test-token-0123456789abcdef"
pytestmark = pytest.mark.anyio


def metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    found = re.search(rf"^{re.escape(name)}{{{re.escape(wanted)}}} (\S+)$", text, re.M)
    assert found, (name, labels, text)
    return float(found.group(1))


@pytest.mark.slow
async def test_metrics_count_requests_and_batches_and_show_no_note(tmp_path: Path) -> None:
    vault = tmp_path / "notes"
    write(vault, "Projects/Zanzibar.md", "# Zanzibar\n\nThe quokka plan.\n")
    port = free_port()
    body = f'[http]\nbind = "127.0.0.1:{port}"\nmetrics = true\n' + token_entry(TOKEN, "laptop", [])
    manifest = write_manifest(tmp_path / "conf" / "m.toml", tmp_path / "db" / "v.db", body, watch=True)
    proc = start_hardened_http(vault, manifest, port)
    base = f"http://127.0.0.1:{port}"
    try:
        async with Client(authed(base + "/mcp", TOKEN)) as c:
            for _ in range(100):
                found = await c.call_tool("search_notes", {"query": "quokka", "mode": "keyword"})
                if found.structured_content and found.structured_content.get("hits"):
                    break
                time.sleep(0.1)
        assert httpx2.get(base + "/ready").status_code == 200
        answer = httpx2.get(base + "/metrics")
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain; version=0.0.4")
        text = answer.text
        assert metric(text, "vaultsync_http_requests_total", kind="mcp", status="2xx") >= 2
        assert metric(text, "vaultsync_http_requests_total", kind="ready", status="2xx") == 1
        assert metric(text, "vaultsync_http_request_seconds_count", kind="mcp") >= 2
        assert metric(text, "vaultsync_http_request_seconds_bucket", kind="mcp", le="+Inf") >= 2
        assert metric(text, "vaultsync_watcher_batches_total", vault="notes") >= 1
        assert metric(text, "vaultsync_watcher_lag_seconds", vault="notes") >= 0
        assert metric(text, "vaultsync_vault_current", vault="notes") == 1
        assert 0 <= metric(text, "vaultsync_watcher_heartbeat_age_seconds", vault="notes") < 30
        for private in ("quokka", "Zanzibar", "Projects", TOKEN, "laptop"):
            assert private not in text, private
    finally:
        stop(proc)


@pytest.mark.slow
async def test_no_metrics_unless_asked(tmp_path: Path) -> None:
    vault = tmp_path / "notes"
    write(vault, "A.md", "# A\n")
    port = free_port()
    body = f'[http]\nbind = "127.0.0.1:{port}"\n' + token_entry(TOKEN, "laptop", [])
    manifest = write_manifest(tmp_path / "conf" / "m.toml", tmp_path / "db" / "v.db", body, watch=True)
    proc = start_hardened_http(vault, manifest, port)
    try:
        assert httpx2.get(f"http://127.0.0.1:{port}/metrics").status_code in (401, 404)
    finally:
        stop(proc)

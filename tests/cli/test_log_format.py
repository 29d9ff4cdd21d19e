"""``--log-format json``: every log line on stderr is one JSON object (time, level, logger, message), and an
access log line carries its own fields; the default stays text."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from support.mcp_helpers import free_port, listening, stop, write


def serve_and_ask(tmp_path: Path, log_format: str) -> str:
    """A plain HTTP server asked for /health once; its stderr."""
    vault = tmp_path / "notes"
    write(vault, "A.md", "# A\n")
    token = tmp_path / "token"
    token.write_text("log-format-test-token-0123456789\n", encoding="utf-8")
    token.chmod(0o600)
    done = subprocess.run(
        [sys.executable, "-m", "vaultsync", "--db", str(tmp_path / "v.db"), "import", str(vault), "--embedder", "hash"]
    )
    assert done.returncode == 0
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "--db", str(tmp_path / "v.db"), "serve", str(vault)]
        + ["--http", f"127.0.0.1:{port}", "--token-file", str(token)],
        env={**os.environ, "VAULTSYNC_LOG_FORMAT": log_format},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        listening(proc, port, "the server")
        assert httpx2.get(f"http://127.0.0.1:{port}/health").status_code == 200
    finally:
        err = stop(proc)
    return err


@pytest.mark.slow
def test_the_access_log_in_json_has_its_fields(tmp_path: Path) -> None:
    err = serve_and_ask(tmp_path, "json")
    assert not re.search(r"^\d{4}-\d\d-\d\d ", err, re.M), err  # no log line in the text format
    access = [json.loads(x) for x in err.splitlines() if x.startswith("{") and '"vaultsync.access"' in x]
    assert any(
        a["path"] == "/health" and a["status"] == 200 and a["method"] == "GET" and a["client"] == "127.0.0.1"
        for a in access
    ), err


@pytest.mark.slow
def test_the_default_stays_text(tmp_path: Path) -> None:
    err = serve_and_ask(tmp_path, "text")
    assert re.search(r'INFO vaultsync.access: 127\.0\.0\.1 - "GET /health" 200 \d+ ms$', err, re.M), err

"""Hostile protocol input against real ``vaultsync serve`` processes: it is answered, bounded, and
the server keeps serving (stdio fuzzing with hypothesis, pipelined floods, slow HTTP clients, HTTPS)."""

from __future__ import annotations

import json
import queue
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from support.mcp_helpers import free_port, history_under, http_client, sc, start_http, stop

from vaultsync.server import limits

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}},
}


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return history_under(tmp_path_factory.mktemp("hardening"))


class Stdio:
    """``vaultsync serve`` on stdio; its stdout read on a thread, so a flood never blocks the test."""

    def __init__(self, facts: dict, *flags: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vaultsync", "--db", str(facts["db"]), "serve", str(facts["root"]), *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self.raw_lines: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw_lines.append(line)
            self.replies.put(json.loads(line))

    def send(self, data: bytes | dict[str, Any]) -> None:
        raw = data if isinstance(data, bytes) else json.dumps(data).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw.replace(b"\n", b" ") + b"\n")
        self.proc.stdin.flush()

    def reply_to(self, ident: Any, timeout: float = 30) -> dict[str, Any]:
        """The next reply with this id (others are dropped)."""
        deadline = time.monotonic() + timeout
        while True:
            reply = self.replies.get(timeout=max(0.01, deadline - time.monotonic()))
            if reply.get("id") == ident:
                return reply

    def start(self) -> None:
        self.send(INIT)
        assert "result" in self.reply_to(0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        return self.proc.stderr.read().decode()


@pytest.mark.slow
def test_deep_nesting_and_object_ids_are_answered(history: dict) -> None:
    server = Stdio(history)
    try:
        server.start()
        server.send(b"[" * 200_000 + b"]" * 200_000)
        reply = server.reply_to(None)
        assert reply["error"]["code"] == -32600 and "nested too deeply" in reply["error"]["message"]
        nested: Any = "x"
        for _ in range(limits.MAX_JSON_DEPTH + 5):
            nested = {"a": nested}
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "read_note", "arguments": {"path": nested}},
            }
        )
        assert "nested too deeply" in server.reply_to(7)["error"]["message"]
        for ident in ({"an": "object"}, [1, 2], 1.5, True):
            server.send({"jsonrpc": "2.0", "id": ident, "method": "tools/list"})
            reply = server.reply_to(None)
            assert reply["error"]["code"] == -32600 and "id must be a string or an integer" in reply["error"]["message"]
        server.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})
        assert server.reply_to(8)["result"]["tools"]
    finally:
        stderr = server.close()
    assert "Traceback" not in stderr and "RecursionError" not in stderr


@pytest.mark.slow
def test_pipelined_calls_are_bounded_in_flight(history: dict) -> None:
    """3,000 pipelined read_note calls of a 300 kB note: every one is answered (a result, or an error
    saying too many are in flight) and the server's peak memory stays bounded."""
    server = Stdio(history)
    calls = 3000
    try:
        server.start()
        call = {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {"name": "read_note", "arguments": {"path": "Big.md"}},
        }
        assert server.proc.stdin is not None
        server.proc.stdin.write(b"".join(json.dumps({**call, "id": 100 + i}).encode() + b"\n" for i in range(calls)))
        server.proc.stdin.flush()
        answered, refused = set(), 0
        while len(answered) < calls:
            reply = server.replies.get(timeout=60)
            answered.add(reply["id"])
            if "error" in reply:
                assert "too many requests in flight" in reply["error"]["message"]
                refused += 1
        peak = server.peak_rss_mb()
        print(f"\n{calls} pipelined calls: {refused} refused as too many in flight; server peak RSS {peak:.0f} MB")
        assert answered == set(range(100, 100 + calls))
        assert peak < 600, f"peak RSS {peak:.0f} MB"
        server.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert server.reply_to(1)["result"]["tools"]
    finally:
        server.close()


METHODS = [
    "initialize",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "ping",
    "notifications/cancelled",
    "notifications/initialized",
    "prompts/list",
    "completion/complete",
    "logging/setLevel",
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)
ids = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.lists(st.integers(), max_size=3)
    | st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": ids,
        "method": st.sampled_from(METHODS) | st.text(max_size=30),
        "params": json_values
        | st.fixed_dictionaries(
            {"name": st.sampled_from(["read_note", "search_notes", "list_notes", "nope"]), "arguments": json_values}
        ),
        "result": json_values,
        "error": json_values,
    },
)
raw_lines = st.one_of(
    messages.map(lambda m: json.dumps(m).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 50_000).map(lambda n: b"[" * n),  # deep, unterminated
    st.integers(1, 50_000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
    st.binary(max_size=200),
)


@pytest.mark.slow
def test_protocol_fuzz_over_stdio_then_tools_list(history: dict) -> None:
    """Hypothesis-made JSON-RPC (random nesting, types, sizes, ids, methods), bounded in count and
    time, sent to one server: afterwards it still answers tools/list, and never wrote a traceback."""
    server = Stdio(history)
    server.start()
    sent = []

    @settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(batch=st.lists(raw_lines, min_size=1, max_size=5))
    def fuzz(batch: list[bytes]) -> None:
        for line in batch:
            server.send(line)
            sent.append(line)
        assert server.proc.poll() is None, "the server died"

    started = time.monotonic()
    try:
        fuzz()
        server.send({"jsonrpc": "2.0", "id": "after-fuzz", "method": "tools/list"})
        tools = server.reply_to("after-fuzz", timeout=60)["result"]["tools"]
        print(f"\nfuzz: {len(sent)} lines in {time.monotonic() - started:.1f} s, then tools/list answered")
        assert len(tools) >= 8
    finally:
        stderr = server.close()
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in server.raw_lines), "stdout carries only protocol"
    assert "Traceback" not in stderr and "RecursionError" not in stderr


# ---------------------------------------------------------------- HTTP


def slow_client(port: int) -> socket.socket:
    """A connection that sends half a request's headers and then nothing."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n")
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(0.01)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


async def tools_list(url: str) -> int:
    async with Client(http_client(url)) as c:
        return len((await c.list_tools()).tools)


@pytest.mark.slow
def test_http_load_slow_clients_and_concurrent_calls_then_a_fresh_client(history: dict) -> None:
    port = free_port()
    proc = start_http(history["db"], history["root"], port)
    url = f"http://127.0.0.1:{port}/mcp"
    slow: list[socket.socket] = []
    try:
        slow = [slow_client(port) for _ in range(300)]

        async def load() -> list[str]:
            results: list[str] = []

            async def call(i: int) -> None:
                async with Client(http_client(url)) as c:
                    found = sc(await c.call_tool("read_note", {"path": "Inbox.md"}))
                    results.append(found["content"])

            async with anyio.create_task_group() as tg:
                for i in range(40):
                    tg.start_soon(call, i)
            return results

        contents = anyio.run(load)
        assert len(contents) == 40 and all(c.startswith("# Inbox") for c in contents)
        slow += [slow_client(port) for _ in range(100)]  # and more half-sent requests right before the fresh one
        started = time.monotonic()
        assert anyio.run(tools_list, url) >= 8
        took = time.monotonic() - started
        dropped = sum(closed_by_server(s) for s in slow)
        print(
            f"\nHTTP: 400 half-sent requests, 40 concurrent clients; a fresh client served in {took * 1000:.0f} ms; "
            f"{dropped} half-sent connections closed by the server"
        )
        assert dropped >= len(slow) - limits.MAX_WAITING_FOR_HEADERS
    finally:
        for sock in slow:
            sock.close()
        stderr = stop(proc)
    assert "Traceback" not in stderr


def _self_signed(folder: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command makes the test certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.mark.slow
def test_https_with_a_certificate_and_a_private_token_file(history: dict, tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    token = tmp_path / "token"
    token.write_text("a-private-token-0123456789\n")
    token.chmod(0o644)
    port = free_port()
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "vaultsync",
            "--db",
            str(history["db"]),
            "serve",
            str(history["root"]),
            "--http",
            f"127.0.0.1:{port}",
            "--token-file",
            str(token),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "readable or writable by other users (mode 644)" in refused.stderr and "chmod 600" in refused.stderr
    token.chmod(0o600)
    proc = start_http(
        history["db"],
        history["root"],
        port,
        "--token-file",
        str(token),
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        host="0.0.0.0",
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert f"https://0.0.0.0:{port}/mcp" in first
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": "Bearer a-private-token-0123456789",
        }
        with httpx2.Client(verify=ssl.create_default_context(cafile=str(cert))) as client:
            ok = client.post(f"https://127.0.0.1:{port}/mcp", json={**INIT, "id": 1}, headers=headers)
        assert ok.status_code == 200
        with pytest.raises(httpx2.HTTPError):
            httpx2.post(f"http://127.0.0.1:{port}/mcp", json=INIT, headers=headers, timeout=5)
    finally:
        rest = stop(proc)
    assert "clear text" not in first + rest, "no plain-text warning with TLS"


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
def test_legacy_subscriptions_per_connection_are_bounded(history: dict) -> None:
    from mcp.shared.exceptions import MCPError

    from vaultsync import Vault
    from vaultsync.server import ServeConfig, build_server
    from vaultsync.server import feed as n

    limit = 20
    original, n.MAX_SUBSCRIPTIONS = n.MAX_SUBSCRIPTIONS, limit

    async def run() -> None:
        with Vault.open(history["db"], name="vault", readonly=True) as vault:
            async with Client(build_server(ServeConfig.of(vault)), mode="legacy") as c:
                for i in range(limit):
                    await c.session.subscribe_resource(f"note://Notes/Filler {i:02d}.md")
                await c.session.subscribe_resource("note://Notes/Filler 00.md")  # again: not one more
                with pytest.raises(MCPError, match=f"already holds {limit} subscriptions"):
                    await c.session.subscribe_resource("note://Inbox.md")
                await c.session.unsubscribe_resource("note://Notes/Filler 00.md")
                await c.session.subscribe_resource("note://Inbox.md")

    try:
        anyio.run(run)
    finally:
        n.MAX_SUBSCRIPTIONS = original

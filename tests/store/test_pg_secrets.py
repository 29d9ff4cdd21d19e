"""A password in ``--db`` is never stored or shown: not in any table (``pg_dump`` of the schema), not in
``pg_stat_activity`` (what every role sees), not in an error an MCP client gets, not in a log line; and a token
generated for a server beyond loopback is written to a mode-600 file, never printed."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from mcp import Client
from support.mcp_helpers import error_text

from vaultsync.server import ServeConfig, build_server

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")

PLANTED = "Planted-pw-7f3e9c"


def with_password(dsn: str) -> str:
    """The test server trusts its socket: a password in the URI is sent and ignored, as a real one would be used."""
    assert dsn.startswith("postgresql://vaultsync@")
    return dsn.replace("postgresql://vaultsync@", f"postgresql://vaultsync:{PLANTED}@", 1)


def vaultsync(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vaultsync", *args], capture_output=True, text=True, env=env)


def test_a_password_in_the_connection_uri_is_never_stored_or_shown(tmp_path: Path) -> None:
    plain = pgserver.fresh_or_skip("secrets")
    dsn = with_password(plain)
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nthe first note\n", encoding="utf-8")
    env = {**os.environ, "VAULTSYNC_HOME": str(tmp_path / "home")}
    env.pop("VAULTSYNC_DB", None)
    said = [vaultsync("--db", dsn, "import", str(root), env=env)]
    assert said[0].returncode == 0, said[0].stderr

    watcher = subprocess.Popen(
        [sys.executable, "-m", "vaultsync", "--db", dsn, "watch", str(root), "-v"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        activity: list[tuple[object, ...]] = []
        with psycopg.connect(plain, autocommit=True) as con:
            for _ in range(300):  # bounded: 30 s
                activity = con.execute(
                    "SELECT application_name, query, usename FROM pg_stat_activity WHERE datname = current_database()"
                ).fetchall()
                if any(str(row[0]).startswith("vaultsync writer") for row in activity):
                    break
                time.sleep(0.1)
            writers = con.execute("SELECT vault, info FROM writers").fetchall()
        assert any(str(row[0]).startswith("vaultsync writer") for row in activity), activity
        assert writers and "watch" in writers[0][1], writers
        assert PLANTED not in repr(activity) and PLANTED not in repr(writers)
    finally:
        watcher.send_signal(signal.SIGINT)
        out, err = watcher.communicate(timeout=60)
    said.append(subprocess.CompletedProcess(watcher.args, watcher.returncode, out, err))

    dump = pgserver.shared().bin / "pg_dump"
    dumped = subprocess.run([str(dump), "--no-owner", "-d", plain], capture_output=True, text=True)
    assert dumped.returncode == 0 and "CREATE TABLE" in dumped.stdout and "writers" in dumped.stdout
    assert PLANTED not in dumped.stdout  # every table of every schema of the database

    async def refused_call() -> str:
        async with Client(build_server(ServeConfig(db=dsn, root=root))) as c:
            with psycopg.connect(plain, autocommit=True) as con:
                con.execute("ALTER TABLE notes RENAME TO notes_away")  # the next read is refused by the database
            try:
                return error_text(await c.call_tool("read_note", {"path": "a.md"}))
            finally:
                with psycopg.connect(plain, autocommit=True) as con:
                    con.execute("ALTER TABLE notes_away RENAME TO notes")

    import anyio

    message = anyio.run(refused_call)
    assert "refused" in message, message
    for secret in (PLANTED, "postgresql://", "vaultsync@", str(pgserver.shared().socket_dir)):
        assert secret not in message, (secret, message)
    for done in said:  # every line the commands printed or logged
        assert PLANTED not in done.stdout + done.stderr, done.args


def test_a_generated_token_is_written_to_a_private_file_not_printed(tmp_path: Path, monkeypatch) -> None:
    from vaultsync.server import launch

    monkeypatch.setenv("VAULTSYNC_HOME", str(tmp_path / "home"))
    http = launch.plain_http("0.0.0.0:8765", None, None, None)  # (nothing is bound here)
    assert http is not None and http.generated and http.token
    lines: list[str] = []
    launch.tell_token(http, lines.append)
    assert len(lines) == 1 and http.token not in lines[0]
    path = Path(lines[0].split(" written to ", 1)[1].split(" ", 1)[0])
    assert path.read_text(encoding="utf-8").strip() == http.token
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700

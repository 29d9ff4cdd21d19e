"""The ``migrate`` command: apply the migrations a database lacks, by name, and check its whole schema (a thin door
over ``store.upgrade``).

``commands.py`` adds ``COMMANDS`` to its group; this module does not import it.
"""

from __future__ import annotations

import click

from .base import Context, echo_json, friendly, json_option, pass_ctx


@click.command()
@click.option("--dry-run", is_flag=True, help="Say which migrations would run; change nothing.")
@json_option
@pass_ctx
@friendly
def migrate(obj: Context, dry_run: bool, as_json: bool) -> None:
    """Upgrade the database's schema to this vaultsync's, then check every table, column, index and trigger.

    A database records the migrations it has by name: it gets exactly the ones it lacks, whichever
    older version wrote it. On PostgreSQL nothing else changes a schema: a newer vaultsync refuses
    to write an older database until it is migrated, and reads it meanwhile. Upgrade in this order:
    readers (serve without --watch, ui, read commands), then stop the writers (watch, serve --watch),
    run `vaultsync migrate`, and start the writers of the new version. A SQLite file is also
    upgraded when it is first opened for writing.

    \b
    Example:
        vaultsync migrate --db postgresql://vaultsync@db.example/team --dry-run
        vaultsync migrate --db postgresql://vaultsync@db.example/team
    """
    from ..store import is_dsn, upgrade

    had, steps = upgrade(obj.db, dry_run=dry_run)
    if as_json:
        echo_json(
            {
                "engine": "postgresql" if is_dsn(obj.db) else "sqlite",
                "dry_run": dry_run,
                "had": had,
                "migrations": steps,
            }
        )
        return
    if not steps:
        click.echo(f"up to date ({len(had)} migrations): nothing to do")
        return
    verb = "would apply" if dry_run else "applied"
    click.echo(f"{verb} {len(steps)} migration{'s' * (len(steps) != 1)}: {', '.join(steps)}")
    if not dry_run:
        click.echo("the schema has every table, column, index and trigger this vaultsync expects")


COMMANDS = [migrate]

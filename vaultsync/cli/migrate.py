"""The ``migrate`` command: the one way a PostgreSQL database's schema changes (a thin door over ``pg.upgrade``).

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
    """Upgrade the database's schema to this vaultsync's (PostgreSQL), in one transaction.

    On PostgreSQL nothing else changes a schema: a newer vaultsync refuses to write an older
    database until it is migrated, and reads it meanwhile. Upgrade in this order: readers
    (serve without --watch, ui, read commands), then stop the writers (watch, serve --watch),
    run `vaultsync migrate`, and start the writers of the new version. A SQLite file is
    upgraded when it is first opened for writing; there is nothing to run.

    \b
    Example:
        vaultsync migrate --db postgresql://vaultsync@db.example/team --dry-run
        vaultsync migrate --db postgresql://vaultsync@db.example/team
    """
    from ..store import is_dsn

    if not is_dsn(obj.db):
        said = "a SQLite file is upgraded when it is first opened for writing; there is nothing to run"
        if as_json:
            echo_json({"engine": "sqlite", "dry_run": dry_run, "migrations": [], "note": said})
        else:
            click.echo(f"{obj.db}: {said}")
        return
    from ..store.pg import upgrade

    before, after, steps = upgrade(str(obj.db), dry_run=dry_run)
    if as_json:
        echo_json(
            {
                "engine": "postgresql",
                "dry_run": dry_run,
                "schema_before": before,
                "schema_after": after,
                "migrations": steps,
            }
        )
        return
    if not steps:
        click.echo(f"schema {before}: up to date, nothing to do")
        return
    verb = "would apply" if dry_run else "applied"
    click.echo(f"schema {before} -> {before + len(steps)}: {verb} {len(steps)} migration{'s' * (len(steps) != 1)}")
    for step in steps:
        click.echo(f"  {step}")


COMMANDS = [migrate]

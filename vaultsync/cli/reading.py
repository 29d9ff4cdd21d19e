"""The reading commands (read, ls): a note, or the notes, as of a time; thin click commands over ``Vault``.

``commands.py`` adds ``COMMANDS`` to its group; this module does not import ``commands.py``.
"""

from __future__ import annotations

import sys

import click

from ..printable import printable
from ..times import ACCEPTED, format_time
from .base import (
    REVISION_FORMS,
    Context,
    as_of_option,
    echo_json,
    friendly,
    json_option,
    moment_option,
    pass_ctx,
    said_time,
    say,
    validity_option,
)


@click.command()
@click.argument("note")
@moment_option("--as-of", help=f"Knowledge cutoff: {ACCEPTED}, {REVISION_FORMS}. Default: now.")
@validity_option
@json_option
@pass_ctx
@friendly
def read(obj: Context, note: str, as_of: int | str | None, valid_at: int | None, as_json: bool) -> None:
    """Print a note's exact text as of a time or revision (and, with --valid-at, the revision valid then).

    A note renamed since is read at a past time by the name it had then.

    \b
    Example:
        vaultsync read "Projects/Atlas.md" --as-of 2025-03-01
        vaultsync read "Projects/Atlas.md" --as-of r12
        vaultsync read "Team/Remote Work Policy.md" --valid-at 2025-06-01
    """
    found = obj.vault().read(note, as_of=as_of, valid_at=valid_at)
    if as_json:
        echo_json(found.to_json())
    else:
        sys.stdout.buffer.write(found.content.encode("utf-8"))
        sys.stdout.flush()


@click.command()
@as_of_option
@validity_option
@click.option("--prefix", default="", help="Only paths starting with this (e.g. a folder: Projects/).")
@json_option
@pass_ctx
@friendly
def ls(obj: Context, as_of: int | str | None, valid_at: int | None, prefix: str, as_json: bool) -> None:
    """List the notes that existed at a time.

    \b
    Example:
        vaultsync ls --as-of 2025-01-01 --prefix Projects/
        vaultsync ls --as-of r12          # right after batch 12 (as history shows it)
    """
    from ..store.read import LISTED_FIELDS

    vault = obj.vault()
    revisions = vault.ls(as_of=as_of, prefix=prefix, valid_at=valid_at)
    if as_json:
        echo_json([r.summary(LISTED_FIELDS) for r in revisions])
        return
    if not revisions and vault.before_history(as_of):
        from ..store.view import no_history

        click.echo(f"no notes: {no_history(vault.name, format_time(vault.first_known_at))}", err=True)
    elif not revisions:
        under = f" under {printable(prefix)}" if prefix else ""
        click.echo(f"no notes{under} as of {said_time(as_of)}", err=True)
    for r in revisions:
        say(f"{format_time(r.known_at)}  {r.size:>8}  {r.path}")


COMMANDS = (read, ls)

"""The commands that look back (deleted, checkout, blame): thin click commands over ``vaultsync.vault.lookback``.

``history.py`` adds ``COMMANDS`` to its own (the commands over time); this module imports neither it nor
``commands.py``.
"""

from __future__ import annotations

from pathlib import Path

import click

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
    time_option,
)


@click.command()
@time_option("--since", help=f"Only deletions learned after this time: {ACCEPTED}. Default: all.")
@time_option("--until", help="Only deletions learned at or before this time, of notes still absent then. Default: now.")
@json_option
@pass_ctx
@friendly
def deleted(obj: Context, since: int | None, until: int | None, as_json: bool) -> None:
    """The notes deleted in a window and still absent at its end, with the command that brings each back.

    Each line: when it was deleted, the size of its last text, its last revision, its path, and the restore
    command. A renamed note is not listed (it lives on under its new name); nor is a note deleted and created
    again at its path.

    \b
    Example:
        vaultsync deleted
        vaultsync deleted --since 2025-03-01 --json
    """
    from ..vault import lookback

    found = lookback.deleted(obj.vault(), since, until)
    if as_json:
        echo_json([d.to_json() for d in found])
    for d in [] if as_json else found:
        last = d.last
        size = "?" if last is None or last.size is None else f"{last.size} bytes"
        rid = "-" if last is None else d.to_json()["last_revision"]
        click.echo(f"{format_time(d.deleted_at)}  {size:>12}  {rid:<7}  {d.path}  ({d.restore_command})")
    if not found:
        click.echo("no note was deleted in that window (and is still absent)", err=True)


@click.command()
@as_of_option
@click.option(
    "--to",
    "to",
    required=True,
    metavar="DIR",
    type=click.Path(path_type=Path),
    help="An empty (or new) folder outside the vault to write into.",
)
@json_option
@pass_ctx
@friendly
def checkout(obj: Context, as_of: int | str | None, to: Path, as_json: bool) -> None:
    """Write the vault as it was at a moment, byte for byte, into an empty folder outside the vault.

    Every note that existed then, at the path it had then; open the folder in Obsidian or compare it with other
    tools. The vault and its history are not touched. A folder that is not empty, the vault itself or a folder
    inside it is refused.

    \b
    Example:
        vaultsync checkout --as-of 2025-03-01 --to ~/vault-2025-03-01
    """
    from ..vault import lookback

    done = lookback.checkout(obj.vault(), to, as_of)
    if as_json:
        echo_json(done.to_json())
        return
    click.echo(f"{done.notes} files ({done.bytes:,} bytes) as of {format_time(done.as_of)} written to {done.folder}")
    if done.left_out:
        click.echo(f"left out (recorded by hash and size only): {', '.join(done.left_out)}", err=True)


@click.command()
@click.argument("note")
@moment_option("--as-of", help=f"The note as it was at this time: {ACCEPTED}, {REVISION_FORMS}. Default: now.")
@json_option
@pass_ctx
@friendly
def blame(obj: Context, note: str, as_of: int | str | None, as_json: bool) -> None:
    """Each line of a note with the revision and time it last changed, following renames.

    Revision to revision, lines are matched (difflib): a line keeps the revision that brought it while it stays
    unchanged. The revision id (r12) is the one history shows; read --as-of and diff take it.

    \b
    Example:
        vaultsync blame "Projects/Atlas.md"
        vaultsync blame "Projects/Atlas.md" --as-of 2025-03-01
    """
    from ..revisions import revision_id
    from ..vault import lookback

    lines = lookback.blame(obj.vault(), note, as_of)
    if as_json:
        echo_json([line.to_json() for line in lines])
        return
    ids = [revision_id(line.origin) for line in lines]
    width, digits = max(map(len, ids), default=0), len(str(len(lines)))
    for line, rid in zip(lines, ids):
        click.echo(f"{rid:<{width}}  {format_time(line.origin.known_at)}  {line.number:>{digits}}  {line.text}")
    if not lines:
        click.echo("the note is empty", err=True)


COMMANDS = (deleted, checkout, blame)

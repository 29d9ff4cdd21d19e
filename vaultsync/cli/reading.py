"""The reading commands (read, ls): a note, or the notes, as of a time; thin click commands over ``Vault``.

``commands.py`` adds ``COMMANDS`` to its group; this module does not import ``commands.py``.
"""

from __future__ import annotations

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
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    help="Write the bytes to this file instead of standard output (an image, a PDF).",
)
@json_option
@pass_ctx
@friendly
def read(
    obj: Context, note: str, as_of: int | str | None, valid_at: int | None, output: str | None, as_json: bool
) -> None:
    """Print a note's exact text, or an attachment's exact bytes, as of a time or revision (and, with --valid-at,
    the revision valid then).

    A note renamed since is read at a past time by the name it had then.

    \b
    Example:
        vaultsync read "Projects/Atlas.md" --as-of 2025-03-01
        vaultsync read "Projects/Atlas.md" --as-of r12
        vaultsync read "Team/Remote Work Policy.md" --valid-at 2025-06-01
        vaultsync read "Attachments/diagram.png" --as-of 2025-03-01 --output diagram.png
    """
    from ..disk.attachments import is_attachment

    vault = obj.vault()
    if as_json and not is_attachment(note):
        echo_json(vault.read(note, as_of=as_of, valid_at=valid_at).to_json())
        return
    if as_json:  # an attachment's facts, never its bytes
        rev = vault.read(note, as_of=as_of, valid_at=valid_at).revision
        echo_json(
            {
                "path": rev.path,
                "known_at": format_time(rev.known_at),
                "content_hash": rev.content_hash,
                "size": rev.size,
                "kind": rev.kind,
                "renamed_from": rev.renamed_from,
            }
        )
        return
    with click.open_file(output or "-", "wb", atomic=output not in (None, "-")) as sink:
        vault.read_bytes(note, sink.write, as_of=as_of, valid_at=valid_at)
        sink.flush()


@click.command()
@as_of_option
@validity_option
@click.option("--prefix", default="", help="Only paths starting with this (e.g. a folder: Projects/).")
@click.option("--no-attachments", is_flag=True, help="Notes only: leave out images, PDFs, canvases and other files.")
@json_option
@pass_ctx
@friendly
def ls(
    obj: Context, as_of: int | str | None, valid_at: int | None, prefix: str, no_attachments: bool, as_json: bool
) -> None:
    """List the notes and attachments that existed at a time.

    \b
    Example:
        vaultsync ls --as-of 2025-01-01 --prefix Projects/
        vaultsync ls --as-of r12          # right after batch 12 (as history shows it)
        vaultsync ls --no-attachments     # notes only
    """
    from ..store.read import LISTED_FIELDS

    vault = obj.vault()
    revisions = vault.ls(as_of=as_of, prefix=prefix, valid_at=valid_at, attachments=not no_attachments)
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

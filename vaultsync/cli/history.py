"""The commands over time (history, diff, changes): how notes changed; thin click commands over ``Vault``.

``commands.py`` adds ``COMMANDS`` to its group; this module does not import ``commands.py`` (``changes --source``
shows batches as ``restore.py`` does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..printable import printable
from ..times import ACCEPTED, TimeLike, format_time
from . import lookback, restore
from .base import (
    BATCH_FORMS,
    REVISION_FORMS,
    Context,
    cutoff_option,
    echo_json,
    friendly,
    json_option,
    moment_option,
    pass_ctx,
    said_time,
    say,
    validity_option,
)

if TYPE_CHECKING:
    from ..vault import Vault


@click.command()
@click.argument("note")
@cutoff_option("--since", help=f"Only revisions learned after this time: {ACCEPTED}; {BATCH_FORMS}.")
@cutoff_option("--until", help=f"Only revisions learned at or before this time, {BATCH_FORMS}.")
@validity_option
@json_option
@pass_ctx
@friendly
def history(
    obj: Context, note: str, since: int | str | None, until: int | str | None, valid_at: int | None, as_json: bool
) -> None:
    """Every revision of a note, following renames: its time, id, content and kind.

    The id (r12: the revision batch 12 made) names one revision; read --as-of, diff --from/--to and
    restore --revision take it, and any id changes prints (the note as it stood right after that
    batch). The next column is the start of its content's hash (the same when the text came back to
    an earlier state; those commands take it too). With --valid-at: the revisions that in turn
    applied then.

    \b
    Example:
        vaultsync history "Projects/Atlas.md"
        vaultsync history "Projects/Atlas.md" --since 2025-03-01 --until 2025-04-01
    """
    from ..revisions import revision_id, short_revisions

    _, revisions = obj.vault().history_window(note, since, until, valid_at=valid_at)
    if as_json:
        echo_json([r.summary() for r in revisions])
        return
    if not revisions:
        window = f" after {said_time(since)}" if since is not None else ""
        window += f" up to {said_time(until)}" if until is not None else ""
        click.echo(f"no revisions of {printable(note)}{window}", err=True)
    hashes = short_revisions([r.content_hash for r in revisions])
    width = max((len(revision_id(r)) for r in revisions), default=0)
    for r, content in zip(revisions, hashes):
        extra = f" (from {r.renamed_from})" if r.renamed_from else f" (to {r.renamed_to})" if r.renamed_to else ""
        size = "" if r.size is None else f"{r.size} bytes"
        line = f"{format_time(r.known_at)}  {revision_id(r):<{width}}  {content or '-':<8}  {r.kind:<8}  {r.path}"
        say(f"{line}{extra}  {size}".rstrip())


@click.command()
@click.argument("note")
@moment_option("--from", "since", required=True, help=f"Earlier time: {ACCEPTED}, {REVISION_FORMS}.")
@moment_option("--to", "until", help=f"Later time (default now), {REVISION_FORMS}.")
@validity_option
@json_option
@pass_ctx
@friendly
def diff(
    obj: Context, note: str, since: int | str, until: int | str | None, valid_at: int | None, as_json: bool
) -> None:
    """Unified diff of a note between two times or revisions.

    \b
    Example:
        vaultsync diff "Projects/Atlas.md" --from 2025-01-01 --to 2025-06-01
        vaultsync diff "Projects/Atlas.md" --from r3 --to r7
        vaultsync diff "Projects/Atlas.md" --from 2025-01-01 --json
    """
    text = obj.vault().diff(note, since, until, valid_at=valid_at)
    if as_json:
        said = [v if isinstance(v, str) else format_time(v) for v in (since, until)]
        echo_json({"path": note, "from": said[0], "to": said[1], "diff": text})
        return
    if not text:
        click.echo(f"no change in {printable(note)} between {said_time(since)} and {said_time(until)}", err=True)
    click.echo(text, nl=False)


@click.command()
@cutoff_option("--since", help=f"Start of the window (exclusive): {ACCEPTED}; {BATCH_FORMS}. Default: 7 days ago.")
@cutoff_option("--until", help=f"End of the window (inclusive, default now), {BATCH_FORMS}.")
@validity_option
@click.option(
    "--source",
    metavar="NAME",
    help="Instead: the batches this source wrote (mcp: what assistants "
    "wrote; restore, undo, watch, import, git), for undo.",
)
@click.option(
    "--caller",
    metavar="ID",
    help="Instead: the batches MCP tools wrote for this caller (an OAuth token's subject; hardened mode: "
    "a static token's caller_id, or stdio / local; otherwise mcp).",
)
@json_option
@pass_ctx
@friendly
def changes(
    obj: Context,
    since: int | str | None,
    until: int | str | None,
    valid_at: int | None,
    source: str | None,
    caller: str | None,
    as_json: bool,
) -> None:
    """Notes created, modified, renamed or deleted in a time window (or the batches one source wrote).

    Each line names its batch (what undo takes) and the revision it made. Without --since: the last 7 days.

    \b
    Example:
        vaultsync changes
        vaultsync changes --since 2025-03-01 --until 2025-03-08
        vaultsync changes --since r1822     # what came after batch 1822
        vaultsync changes --source mcp
        vaultsync changes --caller alice
    """
    from ..store.read import CHANGE_FIELDS

    if source is not None or caller is not None:
        return restore.show_batches(obj.vault(), source, caller, as_json)
    vault = obj.vault()
    if since is None:
        from ..revisions import resolve_cutoff
        from ..times import RECENT_DAYS, recent

        end = resolve_cutoff(vault, until, "until").as_of
        since = recent(end)
        click.echo(
            f"changes in the {RECENT_DAYS} days up to {format_time(end) or 'now'} (since "
            f"{format_time(since)}; --since for another window)",
            err=True,
        )
    revisions = vault.changes(since, until, valid_at=valid_at)
    if as_json:
        echo_json([r.summary(CHANGE_FIELDS) for r in revisions])
        return
    why = window_note(vault, since, until)
    if why:
        click.echo(f"{'note' if revisions else 'no changes'}: {why}", err=True)
    elif not revisions:
        click.echo(f"no changes after {said_time(since)} up to {said_time(until)}", err=True)
    for r in revisions:
        extra = f" (from {r.renamed_from})" if r.renamed_from else ""
        revision = r.content_hash[:8] if r.content_hash else "-"
        say(f"{format_time(r.known_at)}  r{r.batch_id:<6}  {revision:<8}  {r.kind:<8}  {r.path}{extra}")


def window_note(vault: Vault, since: TimeLike, until: TimeLike = None) -> str | None:
    """What ``changes`` after ``since`` up to ``until`` cannot show, in words: the part of the window before a
    retention horizon or before the vault's first batch (None: nothing)."""
    from ..revisions import resolve_cutoff
    from ..store.view import no_history

    start, end = resolve_cutoff(vault, since, "since").as_of, resolve_cutoff(vault, until, "until").as_of
    horizon = vault.horizon
    if horizon is not None and start is not None and start < horizon:
        return (
            f"vault '{vault.name}' forgot its history before {format_time(horizon)} (a retention purge): "
            "the changes listed start there"
        )
    if vault.before_history(end):
        return no_history(vault.name, format_time(vault.first_known_at))
    return None


COMMANDS = (history, diff, changes, *lookback.COMMANDS)
"""With the commands that look back further (``lookback``: deleted, checkout, blame)."""

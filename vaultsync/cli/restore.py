"""The ``restore`` and ``undo`` commands: bring notes back, thin doors over ``vaultsync.restore``.

``commands.py`` adds ``COMMANDS`` to its group; this module does not import ``commands.py``.
"""

from __future__ import annotations

from typing import Any

import click

from .base import Context, echo_json, friendly, json_option, pass_ctx, time_option
from ..times import ACCEPTED, format_time


def _show(done: Any, as_json: bool) -> None:
    if as_json:
        echo_json(done.to_json())
        return
    for step in done.steps:
        why = step.refused or (f"{step.origin}; {step.note}" if step.note else step.origin)
        click.echo(f"{step.action:<9}  {step.path}  ({why.replace('(follow restores', '(--follow restores')})")
        if done.dry_run and step.changes:
            click.echo(step.diff(), nl=False)
    s = done.summary
    where = f"batch {s.batch_id} ({done.detail})" if s and s.batch_id else "nothing written" if not done.dry_run else "dry run"
    click.echo(f"{sum(x.changes for x in done.steps)} to change, {sum(x.refused is not None for x in done.steps)} "
               f"refused: {where}", err=True)


@click.command()
@click.argument("note", required=False)
@time_option("--as-of", help=f"Put it back as it was at this time: {ACCEPTED}.")
@click.option("--revision", metavar="R", help="Put back this revision: its id as history shows it (8 or more hex "
              "digits of its content hash; the whole hash too).")
@click.option("--to", "to", metavar="NEW_PATH", help="Write it at this path instead.")
@click.option("--prefix", metavar="FOLDER", help="Restore every note under this folder as it was (with --as-of).")
@click.option("--delete-newer", is_flag=True, help="With --prefix: also delete notes created there since "
              "(only files whose bytes the store holds; never a note that existed elsewhere and moved in).")
@click.option("--follow", is_flag=True, help="A note moved since: restore it where it lives now, not as a copy at "
              "the path it had.")
@click.option("--dry-run", is_flag=True, help="Print what would change, with diffs; write nothing.")
@json_option
@pass_ctx
@friendly
def restore(obj: Context, note: str | None, as_of: int | None, revision: str | None, to: str | None,
            prefix: str | None, delete_newer: bool, follow: bool, dry_run: bool, as_json: bool) -> None:
    """Write a note (or a folder) back as it was, recorded as a new revision; history stays.

    NOTE ends up holding exactly what `read NOTE --as-of` shows, whatever note lives there now (its
    text stays in the history). A note moved since is written as a copy at the path it had, and the
    plan says where it lives; --follow restores it where it lives instead. Any refusal exits 1.

    \b
    Example:
        vaultsync restore "Projects/Atlas.md" --as-of 2025-03-01
        vaultsync restore "Projects/Atlas.md" --revision 3f2a9c1d --dry-run
        vaultsync restore --prefix Projects/ --as-of 2025-03-01 --delete-newer
    """
    from .. import restore as r

    if (note is None) == (prefix is None):
        raise click.UsageError("give a NOTE or --prefix FOLDER")
    vault = obj.vault(root=str(obj.vault().root), readonly=False)
    if prefix is not None:
        steps, detail = (r.plan_folder(vault, prefix, as_of=as_of, delete_newer=delete_newer, follow=follow),
                         f"restore of {prefix} as of {format_time(as_of)}")
    else:
        assert note is not None  # exactly one of note and prefix, checked above
        step = r.plan_note(vault, note, as_of=as_of, revision=revision, to=to, follow=follow)
        steps, detail = [step], f"restore of {step.origin}"
    _show(r.apply(vault, steps, source="restore", detail=detail, dry_run=dry_run), as_json)
    if any(s.refused for s in steps):
        raise SystemExit(1)


@click.command()
@click.argument("batch", type=int)
@click.option("--force", is_flag=True, help="Also put back notes that changed again since the batch.")
@click.option("--dry-run", is_flag=True, help="Print what would change, with diffs; write nothing.")
@json_option
@pass_ctx
@friendly
def undo(obj: Context, batch: int, force: bool, dry_run: bool, as_json: bool) -> None:
    """Put every note a batch changed back as it was just before it, as one new batch.

    A note changed again since the batch is refused, with the reason, unless --force.

    \b
    Example:
        vaultsync changes --source mcp
        vaultsync undo 1234
    """
    from .. import restore as r

    vault = obj.vault(root=str(obj.vault().root), readonly=False)
    steps = r.plan_undo(vault, batch, force=force)
    _show(r.apply(vault, steps, source="undo", detail=f"undo of batch {batch}", dry_run=dry_run), as_json)
    if any(s.refused for s in steps):
        raise SystemExit(1)


def show_batches(vault: Any, source: str | None, caller: str | None, as_json: bool) -> None:
    """``changes --source`` / ``--caller``: the batches one source wrote ("mcp": the MCP tools), or the MCP
    tools wrote for one caller, oldest first."""
    found = vault.batches_by_source(source, caller)
    if as_json:
        echo_json([{**b, "known_at": format_time(b["known_at"])} for b in found])
        return
    for b in found:
        who = f"  for {b['caller']}" if b["caller"] else ""
        click.echo(f"batch {b['batch_id']}  {format_time(b['known_at'])}  {b['source']}{who}  {', '.join(b['paths'])}"
                   + (f"  ({b['detail']})" if b["detail"] else ""))


COMMANDS = (restore, undo)

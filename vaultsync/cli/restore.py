"""The ``restore`` and ``undo`` commands: bring notes back, thin doors over ``vaultsync.vault.restore``.

``commands.py`` adds ``COMMANDS`` to its group; this module does not import ``commands.py``.
"""

from __future__ import annotations

from typing import Any

import click

from ..printable import printable
from ..times import ACCEPTED, format_time
from .base import Context, echo_json, friendly, json_option, moment_option, pass_ctx, say


def _show(done: Any, as_json: bool) -> None:
    if as_json:
        echo_json(done.to_json())
        return
    for step in done.steps:
        why = step.refused or (f"{step.origin}; {step.note}" if step.note else step.origin)
        why = why.replace("(follow restores", "(--follow restores").replace(
            "; force overwrites", "; --force overwrites"
        )
        say(f"{step.action:<9}  {step.path}  ({why})")
        if done.dry_run and step.changes:
            click.echo(step.diff(), nl=False)
    s = done.summary
    where = (
        f"batch {s.batch_id} ({done.detail})"
        if s and s.batch_id
        else "nothing written"
        if not done.dry_run
        else "dry run"
    )
    click.echo(
        f"{sum(x.changes for x in done.steps)} to change, {sum(x.refused is not None for x in done.steps)} "
        f"refused: {where}",
        err=True,
    )


@click.command()
@click.argument("note", required=False)
@moment_option(
    "--as-of",
    help=f"Put it back as it was at this time: {ACCEPTED}; for a NOTE also a revision, as --revision takes it.",
)
@click.option(
    "--revision",
    metavar="R",
    help="Put back this revision: a revision id as history and changes show it (r12: the note as it stood right "
    "after batch 12), or 8 or more hex digits of its content hash (the whole hash too).",
)
@click.option(
    "--to",
    "to",
    metavar="NEW_PATH",
    help="Write it at this path instead; with --prefix, a folder: each note is written under it at the same "
    "relative path, and the folder restored is left alone.",
)
@click.option("--prefix", metavar="FOLDER", help="Restore every note under this folder as it was (with --as-of).")
@click.option(
    "--delete-newer",
    is_flag=True,
    help="With --prefix: also delete notes created there since "
    "(only files whose bytes the store holds; never a note that existed elsewhere and moved in).",
)
@click.option(
    "--follow",
    is_flag=True,
    help="A note moved since: restore it where it lives now, not as a copy at the path it had.",
)
@click.option("--dry-run", is_flag=True, help="Print what would change, with diffs; write nothing.")
@json_option
@pass_ctx
@friendly
def restore(
    obj: Context,
    note: str | None,
    as_of: int | str | None,
    revision: str | None,
    to: str | None,
    prefix: str | None,
    delete_newer: bool,
    follow: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Write a note (or a folder) back as it was, recorded as a new revision; history stays.

    NOTE ends up holding exactly what `read NOTE --as-of` shows, whatever note lives there now (its
    text stays in the history). A note moved since is written as a copy at the path it had, and the
    plan says where it lives; --follow restores it where it lives instead. Any refusal exits 1.

    \b
    Example:
        vaultsync restore "Projects/Atlas.md" --as-of 2025-03-01
        vaultsync restore "Projects/Atlas.md" --revision r12 --dry-run
        vaultsync restore --prefix Projects/ --as-of 2025-03-01 --delete-newer
        vaultsync restore --prefix Projects/ --as-of 2025-03-01 --to Archive/Projects/
    """
    from ..live import handoff
    from ..vault import restore as r

    if (note is None) == (prefix is None):
        raise click.UsageError("give a NOTE or --prefix FOLDER")
    if note is not None and (as_of is None) == (revision is None):
        raise click.UsageError("give exactly one of --as-of TIME and --revision R")
    vault = obj.vault(root=str(obj.vault().root), readonly=False)
    args = handoff.restore_args(
        note=note, prefix=prefix, as_of=as_of, revision=revision, to=to, delete_newer=delete_newer, follow=follow
    )
    if dry_run:  # reads only: planned here, whoever holds the vault
        steps, detail = handoff.plan_restore(vault, args)
        done = r.apply(vault, steps, source="restore", detail=detail, dry_run=True)
    else:  # by the process watching the vault, if one does
        done = handoff.restored_of(handoff.perform(vault, "restore", args))
    _show(done, as_json)
    if any(s.refused for s in done.steps):
        raise SystemExit(1)


class BatchId(click.ParamType):
    """A batch as ``changes`` prints it (1234) or as the revision id history prints for what it made (r1234)."""

    name = "BATCH"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from ..revisions import batch_named

        text = str(value).strip()
        number = int(text) if text.isdigit() else batch_named(text)
        if number is None:
            self.fail(f"{value!r} is no batch: give its number as changes shows it (1234) or a revision id (r12)")
        return number


@click.command()
@click.argument("batch", type=BatchId())
@click.option("--force", is_flag=True, help="Also put back notes that changed again since the batch.")
@click.option("--dry-run", is_flag=True, help="Print what would change, with diffs; write nothing.")
@json_option
@pass_ctx
@friendly
def undo(obj: Context, batch: int, force: bool, dry_run: bool, as_json: bool) -> None:
    """Put every note a batch changed back as it was just before it, as one new batch.

    BATCH is its number as changes shows it, or the revision id history shows (r1234: the batch that made it).

    A note changed again since the batch is refused, with the reason, unless --force.

    \b
    Example:
        vaultsync changes --source mcp
        vaultsync undo 1234
        vaultsync undo r1234
    """
    from ..live import handoff
    from ..vault import restore as r

    vault = obj.vault(root=str(obj.vault().root), readonly=False)
    if dry_run:
        done = r.apply(
            vault, r.plan_undo(vault, batch, force=force), source="undo", detail=f"undo of batch {batch}", dry_run=True
        )
    else:  # by the watcher, if one runs
        done = handoff.restored_of(handoff.perform(vault, "undo", {"batch": batch, "force": force}))
    _show(done, as_json)
    if any(s.refused for s in done.steps):
        raise SystemExit(1)


def show_batches(vault: Any, source: str | None, caller: str | None, as_json: bool) -> None:
    """``changes --source`` / ``--caller``: the batches one source wrote ("mcp": the MCP tools), or the MCP
    tools wrote for one caller, oldest first."""
    found = vault.batches_by_source(source, caller)
    if as_json:
        echo_json([{**b, "known_at": format_time(b["known_at"])} for b in found])
        return
    if not found:
        by = [f"source {source}"] if source is not None else []
        by += [f"caller {caller}"] if caller is not None else []
        click.echo(f"no batches written by {printable(' for '.join(by))}", err=True)
    for b in found:
        who = f"  for {b['caller']}" if b["caller"] else ""
        click.echo(
            f"batch {b['batch_id']}  {format_time(b['known_at'])}  {b['source']}{who}  {', '.join(b['paths'])}"
            + (f"  ({b['detail']})" if b["detail"] else "")
        )


COMMANDS = (restore, undo)

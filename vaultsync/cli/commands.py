"""The command line: the ``vaultsync`` click group, its ``import`` command, and the commands of the other modules
(``reading``, ``history``, ``upkeep``, ``serving``, ``search``, ...), each added from its ``COMMANDS``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from .. import dist
from ..config import default_db_path
from ..errors import VaultsyncError
from ..times import ACCEPTED, format_time
from ..vault.parse_warnings import Told
from . import audit, history, logs, migrate, purge, reading, receipt, restore, search, serving, ui, upkeep
from .base import (
    VECTORS_WAIT,
    Bar,
    Context,
    DatabaseParam,
    Group,
    echo_json,
    fill_vectors,
    friendly,
    json_option,
    parse_vectors_wait,
    pass_ctx,
    say,
    time_option,
)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    type=DatabaseParam(),
    envvar="VAULTSYNC_DB",
    help="Database file, or a postgresql:// URI. Default: $VAULTSYNC_DB, else vaultsync.db in the user data directory.",
)
@click.option("--vault", "vault_name", metavar="NAME", help="Which vault, when the database holds several.")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug).")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    envvar="VAULTSYNC_LOG_FORMAT",
    show_default=True,
    help="Log lines on stderr as text, or as one JSON object a line (for a log collector).",
)
@click.version_option(package_name=dist.NAME)
@click.pass_context
def cli(ctx: click.Context, db: Path | None, vault_name: str | None, verbose: int, log_format: str) -> None:
    """vaultsync: a time machine for a Markdown vault, served to AI assistants over MCP.

    \b
    Example:
        vaultsync import ~/notes
        vaultsync read "Projects/Atlas.md" --as-of 2025-03-01
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logs.configure(level, log_format)
    ctx.obj = Context(db or default_db_path(), vault_name)
    ctx.call_on_close(ctx.obj.close)


@cli.command("import")
@click.argument("vault_dir", metavar="VAULT", type=click.Path(file_okay=False, path_type=Path))
@time_option("--known-at", help=f"Assert when this state was known (loading history): {ACCEPTED}.")
@click.option("--from-git", is_flag=True, help="Replay the vault's git history (first parent), one batch per commit.")
@click.option(
    "--strict", is_flag=True, help="Refuse the whole batch if any file cannot be read or has broken frontmatter."
)
@click.option(
    "--embedder",
    default=None,
    metavar="NAME",
    help="Embedder of a new database's vectors: minilm (the semantic extra; the default when it is installed, "
    "its vectors filled after the import) or hash (built in; the default otherwise). Env: VAULTSYNC_EMBEDDER.",
)
@click.option(
    "--allow-mass-delete",
    is_flag=True,
    help="Record it even if most notes are gone at once, or the "
    "vault folder moved to another device (refused by default: a vanished vault is not an empty one).",
)
@click.option(
    "--vectors-wait",
    default=str(int(VECTORS_WAIT)),
    show_default=True,
    callback=parse_vectors_wait,
    metavar="SECONDS|all",
    help="After the batch, fill the semantic model's vectors for at most this long (newest notes first; 0: not "
    "now; all: until done); the vault's watcher or the next import fills the rest, search uses words meanwhile.",
)
@json_option
@pass_ctx
@friendly
def import_(
    obj: Context,
    vault_dir: Path,
    known_at: int | None,
    from_git: bool,
    strict: bool,
    embedder: str | None,
    allow_mass_delete: bool,
    vectors_wait: float | None,
    as_json: bool,
) -> None:
    """Record the vault's current state (or its git history) as one atomic batch.

    \b
    Example:
        vaultsync import ~/notes
        vaultsync import ~/notes --from-git
        vaultsync import ~/notes --embedder minilm
    """
    vault = obj.vault(root=str(vault_dir), readonly=False, embedder=embedder)
    if from_git and known_at:
        raise click.UsageError("--known-at cannot be combined with --from-git (commit times are used)")
    bar = Bar("importing", not as_json)
    try:
        if from_git:
            with _publishing(vault):
                result = vault.import_git(strict=strict, progress=bar)
            summary, payload = result.summary, result.to_json()
        else:
            summary = _scan(vault, known_at=known_at, strict=strict, progress=bar, allow_mass_delete=allow_mass_delete)
            payload = summary.to_json()
    finally:
        bar.close()
    _print_import(vault.name, summary, payload, as_json=as_json, from_git=from_git)
    fill_vectors(vault, not as_json, wait=vectors_wait)


def _scan(vault: Any, *, progress: Any, **options: Any) -> Any:
    """A scan of the whole vault as one batch: here, or by the process watching it (a second import while the
    watcher runs: that process records it, with the same outcome)."""
    from ..errors import LockedError
    from ..live import handoff

    try:
        with _publishing(vault):
            return vault.sync(progress=progress, **options)
    except LockedError:
        holder = vault.lock.holder_info()
        if not holder or not holder.get("watching"):
            raise
    return handoff.summary_of(handoff.perform(vault, "scan", options).answer)


@contextlib.contextmanager
def _publishing(vault: Any) -> Iterator[None]:
    """Hold the writer lock for the whole import and say to every reader of the store that it imports
    (``live.heartbeat.importing``); LockedError while another process holds it."""
    from ..live.heartbeat import importing

    with vault.writing(), importing(vault):
        yield


def _print_import(name: str, summary: Any, payload: dict[str, Any], *, as_json: bool, from_git: bool) -> None:
    # a git backfill meets the same bad file in many commits: name each problem once, a text's warning once
    for path, reason in dict.fromkeys((e.path, e.reason) for e in summary.errors):
        say(f"warning: skipped {path}: {reason}", err=True)
    for path, reason in dict.fromkeys((w.path, w.reason) for w in Told().untold(summary.warnings)):
        say(f"warning: {path}: {reason}", err=True)
    if as_json:
        echo_json(payload)
        return
    where = f"batch {summary.batch_id} known at {format_time(summary.known_at)}" if summary.batch_id else "no change"
    if from_git and summary.batch_id and payload["commits"] > 1:  # one batch a commit: the counts are their sum
        last = format_time(summary.known_at)
        where = f"batches up to {summary.batch_id} (one a commit, the last known at {last}), in all"
    click.echo(
        f"{name}: {where}: {summary.added} added, {summary.modified} modified, {summary.renamed} renamed, "
        f"{summary.deleted} deleted, {summary.unchanged} unchanged, {len(summary.errors)} errors"
    )
    if from_git:
        click.echo(
            f"{payload['commits']} commits imported, {payload['already_imported']} already imported"
            + (f", {payload['lifted']} commit times lifted (clock skew)" if payload["lifted"] else "")
        )


# read, ls; history, diff, changes; stats, check, copy; watch, serve; search, export, reindex, reembed; migrate;
# purge; audit verify; receipt verify; ui; restore, undo
for _command in (
    *reading.COMMANDS,
    *history.COMMANDS,
    *upkeep.COMMANDS,
    *serving.COMMANDS,
    *search.COMMANDS,
    *migrate.COMMANDS,
    *purge.COMMANDS,
    *audit.COMMANDS,
    *receipt.COMMANDS,
    *ui.COMMANDS,
    *restore.COMMANDS,
):
    cli.add_command(_command)


def main() -> None:
    argv = sys.argv[1:]
    if any(arg.startswith("--manifest") for arg in argv):  # hardened: refuse argv configuration before click
        from ..hardened import spawn

        if spawn.wants_hardened(argv):
            try:
                spawn.check_argv(argv)
            except VaultsyncError as exc:
                click.echo(f"Error: {exc}", err=True)
                sys.exit(1)
    cli(prog_name="vaultsync")


if __name__ == "__main__":
    main()

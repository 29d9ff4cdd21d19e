"""The ``purge`` command: forgetting on purpose, a thin door over ``Vault.purge``.

``commands.py`` adds ``COMMANDS`` to its group; this module does not import ``commands.py``.
"""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING

import click

from ..retention import EXAMPLE, Policy, parse_policy
from ..times import ACCEPTED, format_time
from .base import Context, echo_json, friendly, json_option, pass_ctx, time_option

if TYPE_CHECKING:
    from ..results import Purged
    from ..store.values import RetentionPreview


@click.command()
@click.option(
    "--text",
    "texts",
    multiple=True,
    metavar="STRING",
    help="Replace every occurrence in every stored revision by [purged] (repeatable).",
)
@click.option(
    "--text-file",
    type=click.File("r", encoding="utf-8"),
    help="Read the strings to purge from this file, one per line ('-': stdin), keeping them out of "
    "your shell history and the process list.",
)
@click.option("--note", metavar="PATH", help="Remove every revision of this note, under every name it had.")
@time_option("--before", help=f"Retention: drop the revisions no longer visible at this time: {ACCEPTED}.")
@click.option(
    "--policy",
    metavar="POLICY",
    help=f"Retention: thin the history as this policy keeps it, e.g. '{EXAMPLE}' (see docs/running.md).",
)
@click.option(
    "--dry-run", is_flag=True, help="With --policy: say what would go (batches, revisions, bytes), change nothing."
)
@click.option(
    "--also-current",
    is_flag=True,
    help="Purge even though the vault's files still hold the text (or the note file still exists).",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation on a terminal.")
@json_option
@pass_ctx
@friendly
def purge(
    obj: Context,
    texts: tuple[str, ...],
    text_file: IO[str] | None,
    note: str | None,
    before: int | None,
    policy: str | None,
    dry_run: bool,
    also_current: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Forget on purpose: rewrite the stored history without a text, a note, or old revisions.

    The one exception to append-only. Every historical answer afterwards is what the redacted
    history implies; nothing recoverable stays in the database file, its WAL or its indexes.
    A purge record keeps when, which kind and how much, never the text. The vault's own git
    history is not touched (use git filter-repo for that).

    \b
    Example:
        vaultsync purge --text-file secrets.txt
        vaultsync purge --note "Private/Salaries.md"
        vaultsync purge --before 2023-01-01
        vaultsync purge --policy "keep_all=1d hourly=7d daily=90d weekly=forever" --dry-run
    """
    lines = [line.rstrip("\r\n") for line in text_file if line.strip()] if text_file is not None else []
    strings = [*texts, *lines]
    if sum((bool(strings), note is not None, before is not None, policy is not None)) != 1:
        raise click.UsageError("give exactly one of --text/--text-file, --note, --before, --policy")
    if dry_run and policy is None:
        raise click.UsageError("--dry-run previews a --policy")
    chosen = parse_policy(policy) if policy is not None else None
    if dry_run and chosen is not None:
        preview_vault = obj.vault()
        _print_preview(preview_vault.name, chosen, preview_vault.retention_preview(chosen), as_json)
        return
    vault = obj.vault(readonly=False)
    if (
        not yes
        and sys.stdin.isatty()
        and not click.confirm(f"Rewrite the stored history of vault '{vault.name}' for good?", err=True)
    ):
        raise click.Abort()
    result = vault.purge(texts=strings or None, note=note, before=before, policy=chosen, also_current=also_current)
    if as_json:
        echo_json(result.to_json())
    else:
        _print_purge(result)


def _print_purge(result: Purged) -> None:
    click.echo(
        f"{result.vault}: purge ({result.command}): {result.revisions_changed} revisions rewritten, "
        f"{result.revisions_removed} removed, {result.notes} notes, {result.batches_removed} "
        f"batches removed; database {_mb(result.database_bytes_before)} -> "
        f"{_mb(result.database_bytes_after)} in {result.seconds:.1f} s"
    )
    if not result.scrubbed:
        click.echo(
            "warning: a reader was still reading the database as it was before the purge; the purged text "
            "stays in the database file's old pages until that read ends and then a vaultsync command that "
            "only reads the database (ls, search, serve) closes it, or the next sync, import, watch or purge "
            "opens it",
            err=True,
        )
    if result.git is not None:
        click.echo(f"note: {result.git}", err=True)


def _print_preview(name: str, policy: Policy, preview: RetentionPreview, as_json: bool) -> None:
    if as_json:
        echo_json({"vault": name, "policy": policy.text, "dry_run": True, **preview.to_json()})
        return
    click.echo(f"{name}: retention ({policy.text}), dry run: {retention_line(preview)}; nothing changed")


def retention_line(preview: RetentionPreview) -> str:
    """What a retention policy would remove, in one line (``purge --dry-run``, ``stats``)."""
    from ..store.freed import BOUND

    horizon = f", history before {format_time(preview.horizon)} forgotten" if preview.horizon is not None else ""
    return (
        f"would remove {preview.batches_removed} of {preview.batches} batches and {preview.revisions_removed} of "
        f"{preview.revisions} revisions ({preview.notes} notes) and {preview.texts_freed} stored texts, freeing "
        f"about {_size(preview.bytes_freed)} of the database's {_size(preview.database_bytes)} (an estimate, "
        f"within {BOUND:.0%} where measured){horizon}"
    )


def _size(size: int) -> str:
    return _mb(size) if size >= 2**20 else f"{size / 2**10:.1f} KB"


def _mb(size: int | str) -> str:
    """``size`` bytes (an int, or a numeric str from the store) in MB."""
    return f"{int(size) / 2**20:.1f} MB"


COMMANDS = (purge,)

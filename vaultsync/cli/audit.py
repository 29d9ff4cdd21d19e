"""The ``audit`` commands: check a hardened server's audit log (``vaultsync/hardened/verify.py``).

``commands.py`` adds ``COMMANDS`` to its group; this module does not import ``commands.py``.
"""

from __future__ import annotations

from pathlib import Path

import click

from .base import Context, DatabaseParam, echo_json, friendly, json_option, pass_ctx


@click.group()
def audit() -> None:
    """The hardened mode's audit log (a manifest's audit_log_path; see `serve --manifest`).

    \b
    Example:
        vaultsync audit verify audit.jsonl --db vaultsync.db --keystore keys.toml
    """


@audit.command()
@click.argument("log", metavar="PATH", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--db",
    "db_path",
    type=DatabaseParam(),
    help="The database the server used (the manifest's db_path: a file or a postgresql:// URI). "
    "Default: the global --db.",
)
@click.option(
    "--keystore",
    "keystore_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also check every record's HMAC with this keystore (the manifest's keystore_path).",
)
@json_option
@pass_ctx
@friendly
def verify(obj: Context, log: Path, db_path: str | Path | None, keystore_path: Path | None, as_json: bool) -> None:
    """Check an audit log: its hash chain, its HMACs (with --keystore) and its end against the head the
    database keeps. Prints OK and the record count, or one line per finding (the first edited, removed,
    inserted or reordered record; a truncated or rewritten tail), and exits 1.

    \b
    Example:
        vaultsync audit verify /var/log/vaultsync/audit.jsonl --db /srv/vaultsync.db --keystore keys.toml
    """
    from ..hardened.verify import verify_log

    report = verify_log(log, db_path or obj.db, keystore_path)
    if as_json:
        echo_json(report.to_json())
    elif report.ok:
        signed = (
            f", HMACs verified ({', '.join(report.hmac_key_ids)})"
            if report.hmac_key_ids
            else ", HMACs not checked (no --keystore)"
        )
        click.echo(f"{log}: OK, {report.records} records, chain intact, ends at the store's head{signed}")
    if report.unkeyed and not as_json:
        click.echo(
            f"note: {report.unkeyed} records carry an unkeyed SHA-256 of their arguments (written by an older "
            "vaultsync): whoever holds the log can confirm a guess of what those calls asked",
            err=True,
        )
    else:
        for finding in report.findings:
            where = f"line {finding.line}: " if finding.line is not None else ""
            click.echo(f"{log}: {where}{finding.problem}")
    if not report.ok:
        raise SystemExit(1)


COMMANDS = (audit,)

"""The command line: thin click commands over ``Vault``."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..config import default_db_path
from ..errors import VaultsyncError
from ..live.pace import DEBOUNCE_MS, RECONCILE_S, STEP_MS
from ..times import ACCEPTED, TimeLike, format_time
from ..told import Told
from . import audit, migrate, purge, receipt, restore, search, ui
from .base import (
    REVISION_FORMS,
    VECTORS_WAIT,
    Bar,
    Context,
    Group,
    as_of_option,
    echo_json,
    fill_vectors,
    friendly,
    json_option,
    moment_option,
    parse_vectors_wait,
    pass_ctx,
    time_option,
    validity_option,
)

if TYPE_CHECKING:
    from ..vault import Vault


class DatabaseParam(click.Path):
    """A database file (a Path), or a ``postgresql://`` URI kept as it is (a Path would fold its slashes)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.startswith(("postgresql://", "postgres://")):
            return value
        return super().convert(value, param, ctx)

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    type=DatabaseParam(),
    envvar="VAULTSYNC_DB",
    help="Database file, or a postgresql:// URI. Default: $VAULTSYNC_DB, else vaultsync.db in the user data directory.",
)
@click.option("--vault", "vault_name", metavar="NAME", help="Which vault, when the database holds several.")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug).")
@click.version_option(package_name="vaultsync")
@click.pass_context
def cli(ctx: click.Context, db: Path | None, vault_name: str | None, verbose: int) -> None:
    """vaultsync: a time machine for a Markdown vault, served to AI assistants over MCP.

    \b
    Example:
        vaultsync import ~/notes
        vaultsync read "Projects/Atlas.md" --as-of 2025-03-01
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
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
        return vault.sync(progress=progress, **options)
    except LockedError:
        holder = vault.lock.holder_info()
        if not holder or not holder.get("watching"):
            raise
    return handoff.summary_of(handoff.perform(vault, "scan", options).answer)


def _print_import(name: str, summary: Any, payload: dict[str, Any], *, as_json: bool, from_git: bool) -> None:
    # a git backfill meets the same bad file in many commits: name each problem once, a text's warning once
    for path, reason in dict.fromkeys((e.path, e.reason) for e in summary.errors):
        click.echo(f"warning: skipped {path}: {reason}", err=True)
    for path, reason in dict.fromkeys((w.path, w.reason) for w in Told().untold(summary.warnings)):
        click.echo(f"warning: {path}: {reason}", err=True)
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


@cli.command()
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


@cli.command()
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
    for r in revisions:
        click.echo(f"{format_time(r.known_at)}  {r.size:>8}  {r.path}")


@cli.command()
@click.argument("note")
@time_option("--since", help=f"Only revisions learned after this time: {ACCEPTED}.")
@time_option("--until", help="Only revisions learned at or before this time.")
@validity_option
@json_option
@pass_ctx
@friendly
def history(obj: Context, note: str, since: int | None, until: int | None, valid_at: int | None, as_json: bool) -> None:
    """Every revision of a note, following renames: its time, id, content and kind.

    The id (r12: the revision batch 12 made) names one revision; read --as-of, diff --from/--to and
    restore --revision take it. The next column is the start of its content's hash (the same when the
    text came back to an earlier state; those commands take it too). With --valid-at: the revisions that
    in turn applied then.

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
    hashes = short_revisions([r.content_hash for r in revisions])
    width = max((len(revision_id(r)) for r in revisions), default=0)
    for r, content in zip(revisions, hashes):
        extra = f" (from {r.renamed_from})" if r.renamed_from else f" (to {r.renamed_to})" if r.renamed_to else ""
        size = "" if r.size is None else f"{r.size} bytes"
        line = f"{format_time(r.known_at)}  {revision_id(r):<{width}}  {content or '-':<8}  {r.kind:<8}  {r.path}"
        click.echo(f"{line}{extra}  {size}".rstrip())


@cli.command()
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
    click.echo(text, nl=False)


@cli.command()
@time_option("--since", help=f"Start of the window (exclusive): {ACCEPTED}. Default: 7 days ago.")
@time_option("--until", help="End of the window (inclusive, default now).")
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
    since: int | None,
    until: int | None,
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
        vaultsync changes --source mcp
        vaultsync changes --caller alice
    """
    from ..store.read import CHANGE_FIELDS

    if source is not None or caller is not None:
        return restore.show_batches(obj.vault(), source, caller, as_json)
    vault = obj.vault()
    if since is None:
        from ..times import RECENT_DAYS, recent

        since = recent(until)
        click.echo(
            f"changes in the {RECENT_DAYS} days up to {format_time(until) or 'now'} (since "
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
    for r in revisions:
        extra = f" (from {r.renamed_from})" if r.renamed_from else ""
        revision = r.content_hash[:8] if r.content_hash else "-"
        click.echo(f"{format_time(r.known_at)}  batch {r.batch_id:<6}  {revision:<8}  {r.kind:<8}  {r.path}{extra}")


def window_note(vault: Vault, since: TimeLike, until: TimeLike = None) -> str | None:
    """What ``changes`` after ``since`` up to ``until`` cannot show, in words: the part of the window before a
    retention horizon or before the vault's first batch (None: nothing)."""
    from ..store.view import no_history
    from ..times import as_micros

    start, end = as_micros(since, "since"), as_micros(until, "until")
    horizon = vault.horizon
    if horizon is not None and start is not None and start < horizon:
        return (
            f"vault '{vault.name}' forgot its history before {format_time(horizon)} (a retention purge): "
            "the changes listed start there"
        )
    if vault.before_history(end):
        return no_history(vault.name, format_time(vault.first_known_at))
    return None


@cli.command()
@json_option
@pass_ctx
@friendly
def stats(obj: Context, as_json: bool) -> None:
    """Counts and times for a vault in the database.

    \b
    Example:
        vaultsync stats --json
    """
    result = obj.vault().stats().to_json()
    if as_json:
        echo_json(result)
        return
    for key, value in result.items():
        if key == "semantic_vectors" and value:
            value = f"{value['filled']:,} of {value['total']:,} current texts ({value['embedder']})"
        if value is not None or key not in ("vector_search", "semantic_vectors"):
            click.echo(f"{key:>16}: {value}")


@cli.command()
@json_option
@pass_ctx
@friendly
def check(obj: Context, as_json: bool) -> None:
    """Verify the store: SQLite integrity, content hashes, batch order, append-only triggers.

    \b
    Example:
        vaultsync check
    """
    vault = obj.vault()
    problems = vault.check()
    if as_json:
        echo_json({"vault": vault.name, "ok": not problems, "problems": problems})
    else:
        for problem in problems:
            click.echo(f"problem: {problem}", err=True)
        if not problems:
            click.echo(f"{vault.name}: ok")
    if problems:
        sys.exit(1)


@cli.command()
@click.argument("src", type=DatabaseParam())
@click.argument("dst", type=DatabaseParam())
@json_option
@friendly
def copy(src: Any, dst: Any, as_json: bool) -> None:
    """Copy every vault of database SRC, with its whole history, into DST (SQLite and PostgreSQL, either way).

    DST may hold other vaults (they stay, beside the copies), but none of SRC's names.

    \b
    Example:
        vaultsync copy ~/.local/share/vaultsync/vaultsync.db postgresql://vaultsync@db.internal/team
        vaultsync copy postgresql://vaultsync@db.internal/team backup.db
    """
    from ..store.transfer import copy_databases

    done = copy_databases(src, dst)
    if as_json:
        echo_json({"vaults": done.vaults})
    else:
        for name, counts in done.vaults.items():
            click.echo(f"{name}: {counts['batches']} batches, {counts['revisions']} revisions copied")


@cli.command()
@click.argument("vault_dir", metavar="VAULT", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--polling",
    is_flag=True,
    envvar="VAULTSYNC_FORCE_POLLING",
    help="Poll the folder every second instead of OS events (network shares, some containers).",
)
@click.option(
    "--step-ms",
    type=click.IntRange(min=1),
    default=STEP_MS,
    show_default=True,
    help="Quiet period: a batch is written once no change arrived for this long.",
)
@click.option(
    "--debounce-ms",
    type=click.IntRange(min=1),
    default=DEBOUNCE_MS,
    show_default=True,
    help="Maximum wait: a batch is written at the latest this long after its first change. A deletion "
    "no new file joined into a rename waits this long too (at least 1 s) for its other half.",
)
@click.option(
    "--reconcile-s",
    type=click.FloatRange(min=0),
    default=RECONCILE_S,
    show_default=True,
    help="Full rescan this often to repair changes the OS did not report (0: never).",
)
@click.option("-v", "--verbose", count=True, help="Also log every path each batch wrote.")
@click.option("--json", "as_json", is_flag=True, help="Print each batch as one JSON line on stdout.")
@click.option(
    "--wait",
    is_flag=True,
    help="If another process watches the vault (e.g. serve --watch), wait and "
    "take over when it stops, instead of exiting with an error.",
)
@click.option(
    "--max-outage-s",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="Exit with an error (for a service manager to restart) once the database has been unreachable "
    "this long; what changed meanwhile is recorded by the next start.",
)
@pass_ctx
@friendly
def watch(
    obj: Context,
    vault_dir: Path,
    polling: bool,
    step_ms: int,
    debounce_ms: int,
    reconcile_s: float,
    verbose: int,
    as_json: bool,
    wait: bool,
    max_outage_s: float,
) -> None:
    """Keep the store current while you write: one atomic batch per burst of changes.

    Catches up on what changed since the last run, then watches until SIGINT or SIGTERM, which
    write the pending batch and exit 0. One log line per batch on stderr.

    \b
    Example:
        vaultsync watch ~/notes
        vaultsync watch ~/notes --polling --step-ms 1000
        vaultsync watch ~/notes --wait
    """
    import threading

    from ..live.foreground import stop_on_signals
    from ..live.foreground import watch as watch_vault
    from ..live.writer_role import WriterRole

    log = logging.getLogger("vaultsync")
    log.setLevel(min(log.getEffectiveLevel(), logging.DEBUG if verbose else logging.INFO))
    vault = obj.vault(root=str(vault_dir), readonly=False)
    role, stop = WriterRole(vault), threading.Event()
    restore = stop_on_signals(stop)
    try:
        if wait and not role.wait(stop, say=lambda line: _say(f"vaultsync: {line}")):
            return
        watch_vault(
            vault,
            step_ms=step_ms,
            debounce_ms=debounce_ms,
            polling=polling,
            reconcile_s=reconcile_s,
            stop_event=stop,
            on_batch=(lambda s: click.echo(json.dumps(s.to_json()))) if as_json else None,
            role=role,
            describe=_refusal(vault_dir),
            max_outage_s=max_outage_s,
        )
    finally:
        restore()


@cli.command()
@click.argument("vault_dir", metavar="[VAULT]", required=False, type=click.Path(path_type=Path))
@click.option(
    "--http",
    "bind",
    metavar="HOST:PORT",
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of "
    "stdio. Loopback (127.0.0.1) unless you name another address; then a bearer token is required.",
)
@click.option(
    "--watch",
    is_flag=True,
    help="Run the watcher in this process so answers always reflect the folder "
    "(if another process watches this vault, serve as a reader and take over when it stops).",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Offer the write tools, inside the vault only: create_note, "
    "append_to_note, edit_note and restore_note (each recorded as a new revision; history is never "
    "rewritten).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Require the bearer token in this file (--http; mode 600). Beyond loopback one is generated if omitted.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Serve HTTPS with this certificate (PEM; with --tls-key and --http).",
)
@click.option("--tls-key", type=click.Path(dir_okay=False, path_type=Path), help="The certificate's private key (PEM).")
@click.option(
    "--oauth-issuer",
    metavar="URL",
    help="Be an OAuth 2.1 resource server: accept access tokens (JWTs) of this issuer, checked against its "
    "published keys (with --public-url and --http; see docs/hosted.md).",
)
@click.option(
    "--public-url",
    metavar="URL",
    help="The base URL clients reach this server at (through a proxy): the MCP endpoint, and the audience "
    "tokens must name, is URL/mcp.",
)
@click.option(
    "--oauth-allow",
    metavar="WHO",
    multiple=True,
    help="Only these may use the vault over OAuth: a subject (the token's sub), group:NAME (its groups claim) "
    "or * (anyone the issuer signs in). Repeat it; default: anyone holding a valid token, with a warning.",
)
@click.option(
    "--oauth-introspection",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also accept opaque tokens by asking the issuer (RFC 7662), with the client_id and client_secret "
    "in this TOML file (mode 600).",
)
@click.option(
    "--manifest",
    "manifest_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Hardened mode: every privileged setting comes from this TOML file (see examples/manifest.toml); "
    "no other option may set them.",
)
@pass_ctx
@friendly
def serve(
    obj: Context,
    vault_dir: Path,
    bind: str | None,
    watch: bool,
    allow_writes: bool,
    token_file: Path | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    oauth_issuer: str | None,
    public_url: str | None,
    oauth_allow: tuple[str, ...],
    oauth_introspection: Path | None,
    manifest_path: Path | None,
) -> None:
    """Serve the vault to AI assistants over MCP (stdio by default; only protocol on stdout).

    VAULT is the vault folder (or, read-only, a vault name in the database). The database is
    opened read-only unless --watch or --allow-writes is given. A hosted server whose manifest
    lists several vaults ([[oauth.vaults]]) takes no VAULT.

    \b
    Example:
        vaultsync serve ~/notes
        vaultsync serve ~/notes --watch --http 127.0.0.1:8765
        vaultsync serve ~/notes --http 0.0.0.0:8765 --token-file token --tls-cert c.pem --tls-key k.pem
        vaultsync serve ~/notes --manifest /etc/vaultsync/manifest.toml
        vaultsync serve ~/notes --http 127.0.0.1:8765 --oauth-issuer https://id.example.com --public-url https://notes.example.com
        vaultsync serve --manifest /etc/vaultsync/hosted.toml    # several vaults: [[oauth.vaults]]
    """
    if manifest_path is not None:
        from ..hardened import serve as hardened

        given = _privileged_options(
            http=bind,
            watch=watch,
            allow_writes=allow_writes,
            token_file=token_file,
            tls_cert=tls_cert,
            tls_key=tls_key,
            oauth_issuer=oauth_issuer,
            public_url=public_url,
            oauth_introspection=oauth_introspection,
            oauth_allow=oauth_allow,
        )
        manifest = hardened.prepare(manifest_path, given, echo=_say)  # every refusal before the heavy imports
        from ..server import launch

        if manifest.oauth is not None and manifest.oauth.vaults:
            if vault_dir is not None:
                raise click.UsageError("the manifest lists [[oauth.vaults]]: give no VAULT")
            launch.run_hosted(*launch.hosted_configs(manifest), _say)
            return
        if vault_dir is None:
            raise click.UsageError("give the VAULT folder")
        launch.run(*launch.hardened_config(manifest, vault_dir), _say)
        return
    if vault_dir is None:
        raise click.UsageError("give the VAULT to serve (a folder, or a vault name in the database)")
    import dataclasses

    from ..hardened.access import from_flags
    from ..server import launch

    config = launch.plain_config(obj.db, obj.vault_name, vault_dir, watch=watch, allow_writes=allow_writes)
    if watch:  # the in-process watcher says a refusal in the command line's words, as `watch` does
        config = dataclasses.replace(
            config, watcher_options={**(config.watcher_options or {}), "describe": _refusal(vault_dir)}
        )
    oauth = from_flags(oauth_issuer, public_url, oauth_introspection, oauth_allow)
    http = launch.plain_http(bind, token_file, tls_cert, tls_key, oauth)
    launch.run(config, http, _say, warn=lambda line: click.secho(line, err=True, fg="red", bold=True))


def _refusal(vault_dir: Path) -> Any:
    """How ``watch`` says a refusal: a mass deletion names the import that confirms it."""
    from ..errors import MassDeletion

    def describe(exc: VaultsyncError) -> str:
        if isinstance(exc, MassDeletion):
            return f"{exc} (stop watching, then run `vaultsync import {vault_dir} --allow-mass-delete`)"
        return str(exc)  # a vanished folder: the watcher waits for it (no option to give)

    return describe


def _say(line: str) -> None:
    click.echo(line, err=True)


def _privileged_options(**values: object) -> list[str]:
    """What ``serve --manifest`` refuses: the global options and environment, then the serve options given."""
    root = click.get_current_context().find_root()
    given = [
        env if source.name == "ENVIRONMENT" else flag
        for flag, env, source in (
            ("--db", "VAULTSYNC_DB", root.get_parameter_source("db")),
            ("--vault", "--vault", root.get_parameter_source("vault_name")),
        )
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")
    ]
    return given + ["--" + name.replace("_", "-") for name, value in values.items() if value]


# search, export, reindex, reembed; purge; audit verify; receipt verify; ui; restore, undo
for _command in (
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

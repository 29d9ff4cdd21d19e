"""What every CLI command module shares: the group's ``Context``, option decorators, output and errors.

Command modules (``commands.py``, ``reading.py``, ``search.py``, ...) import this module and nothing of each
other's (but ``history.py``, which shows batches as ``restore.py`` does), so the command line has no import cycle.
Like them it imports only click and light modules at load time: ``vaultsync --help`` must not pay for the store,
the parsers or the MCP SDK, so those are imported inside the commands (or, for option choices, by
``LazyChoice``/``Lazy`` when a command is used).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..dsn import is_dsn
from ..errors import VaultsyncError
from ..printable import printable
from ..times import ACCEPTED, format_time

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

    from ..vault import Vault


GLOBAL_OPTIONS = ("--db", "--vault")
"""The group's options that take a value and may also be given after the command."""


class Group(click.Group):
    """The command group: ``--db`` and ``--vault`` are taken before or after the command (unless the command
    has an option of that name itself), and ``--help`` lists each command's whole first sentence."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self.hoist(ctx, args))

    def hoist(self, ctx: click.Context, args: list[str]) -> list[str]:
        """``args`` with the group's options given after the command moved before it."""
        out: list[str] = []
        moved: list[str] = []
        command: click.Command | None = None
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                out += args[i:]
                break
            name = arg.split("=", 1)[0]
            if command is None:
                if name in GLOBAL_OPTIONS and "=" not in arg:  # before the command: keep its value with it
                    out += args[i : i + 2]
                    i += 2
                    continue
                if not arg.startswith("-"):
                    command = self.get_command(ctx, arg) or click.Command(arg)
            elif name in GLOBAL_OPTIONS and name not in _own_options(command):
                width = 1 if "=" in arg else 2
                moved += args[i : i + width]
                i += width
                continue
            out.append(arg)
            i += 1
        return moved + out

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=300)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class DatabaseParam(click.Path):
    """A database file (a Path), or a ``postgresql://`` URI kept as it is (a Path would fold its slashes)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if is_dsn(value):
            return value
        return super().convert(value, param, ctx)

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)


def _own_options(command: click.Command) -> set[str]:
    """Every option name of ``command`` and, for a group, of its commands."""
    names = {opt for param in command.params for opt in getattr(param, "opts", [])}
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            names |= _own_options(sub)
    return names


class Context:
    """Global options, and the vault opened from them on demand."""

    def __init__(self, db: Path, vault: str | None) -> None:
        self.db = db
        self.vault_name = vault
        self._open: list[Vault] = []

    def vault(self, root: str | None = None, readonly: bool = True, embedder: str | None = None) -> Vault:
        from ..sync import default_workers
        from ..vault import Vault

        # our entry points guard their main module, as the parse workers' "spawn" needs
        vault = Vault.open(
            self.db,
            root=root,
            name=self.vault_name,
            readonly=readonly,
            parse_workers=default_workers(),
            embedder=embedder,
        )
        self._open.append(vault)
        return vault

    def close(self) -> None:
        for vault in self._open:
            vault.close()


pass_ctx = click.make_pass_decorator(Context)


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")(fn)


def parse_time_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """Click callback: a time option's value as UTC microseconds; a bad one is one ``Error:`` line naming the flag."""
    if value is None:
        return None
    from ..times import parse_time

    try:
        return parse_time(value, param.opts[0])
    except VaultsyncError as exc:
        raise click.ClickException(str(exc)) from None


def time_option(*decls: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A ``click.option`` taking one of the accepted time forms, handed to the command as UTC microseconds."""
    return click.option(*decls, callback=parse_time_option, **kwargs)


def parse_moment_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | str | None:
    """Click callback for a time of one note: a revision (``r12``: the note right after batch 12, or 8+ hex digits
    of its content) is handed on as it is, anything else must be a time (UTC microseconds)."""
    from ..revisions import looks_like_revision

    if value is not None and looks_like_revision(value):
        return value.strip()
    try:
        return parse_time_option(ctx, param, value)
    except click.ClickException as exc:
        raise click.ClickException(f"{exc.message}, or a revision id as history and changes show it (r12)") from None


def moment_option(*decls: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A ``click.option`` taking a time or a revision of the command's note (``parse_moment_option``)."""
    return click.option(*decls, callback=parse_moment_option, **kwargs)


REVISION_FORMS = (
    "or a revision id from history or changes (r12: the note as it stood right after batch 12), or 8+ hex digits "
    "of its content hash"
)
"""How a note command's time option says it takes a revision too."""


def parse_cutoff_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | str | None:
    """Click callback for a vault-wide cutoff: a revision id (``r12``) is handed on as it is, for ``Vault`` to
    find its batch; anything else must be a time (UTC microseconds)."""
    from ..revisions import CUTOFF_FORMS, batch_named

    if value is not None and batch_named(value) is not None:
        return value.strip()
    try:
        return parse_time_option(ctx, param, value)
    except click.ClickException as exc:
        raise click.ClickException(f"{exc.message}; {CUTOFF_FORMS}") from None


def cutoff_option(*decls: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A ``click.option`` taking a time or a revision id naming a batch (``parse_cutoff_option``)."""
    return click.option(*decls, callback=parse_cutoff_option, **kwargs)


BATCH_FORMS = "or a revision id from history or changes (r12: right after batch 12)"
"""How a window's end says it takes a revision id too."""


def as_of_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--as-of`` of a vault-wide question (ls, search, export): a time, or a revision id naming its batch."""
    return click.option(
        "--as-of",
        callback=parse_cutoff_option,
        help=f"Knowledge cutoff: {ACCEPTED}; or a revision id from history or changes (r12: the vault right "
        "after batch 12, nothing from later batches, even ones sharing its time). Default: now.",
    )(fn)


def validity_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return time_option(
        "--valid-at",
        help=f"Validity time: the revision that applies then, for notes declaring "
        f"valid_from/valid_to (an interval overlay): {ACCEPTED}. Default: the revisions as "
        "recorded.",
    )(fn)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def say(line: str, *, err: bool = False) -> None:
    """One line of human output: the names in it are ``printable`` (a control character in a note's
    name is shown as an escape, never sent to the terminal; a newline in it cannot start a line)."""
    click.echo(printable(line), err=err)


def said_time(moment: int | str | None, default: str = "now") -> str:
    """A time option as the user gave it, for a line about an answer: microseconds as UTC, a typed form (``r12``)
    as typed, None as ``default``."""
    if moment is None:
        return default
    if isinstance(moment, int):
        return format_time(moment) or default
    return printable(str(moment))


def friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Expected failures become one line on stderr and exit status 1, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except VaultsyncError as exc:
            raise click.ClickException(message(exc)) from None

    return wrapper


def message(exc: VaultsyncError) -> str:
    """An error's one line in the command line's words: its option for the error's argument, its
    command for the error's remedy (``message(e)`` may read ``... (run `vaultsync reindex`; --db)``)."""
    said = []
    if exc.remedy in COMMANDS:
        args = dict(exc.remedy_args)
        words = [COMMANDS[exc.remedy].format(root=args.pop("root", "VAULT"))]
        for name, value in args.items():
            flag = OPTIONS.get(name, "--" + name.replace("_", "-"))
            words.append(flag if value is True else f"{flag} {value}")
        said.append(f"run `{' '.join(words)}`")
    option = OPTIONS.get(exc.argument or "")
    if option:
        said.append(option)
    return printable(f"{exc} ({'; '.join(said)})" if said else str(exc))


OPTIONS = {
    "known_at": "--known-at",
    "name": "--vault NAME",
    "also_current": "--also-current",
    "as_of": "--as-of",
    "before": "--before",
    "texts": "--text",
    "note": "--note",
    "db": "--db",
    "watch": "--watch",
    "root": "VAULT",
    "embedder": "--embedder",
    "full": "--full",
    "allow_mass_delete": "--allow-mass-delete",
    "revision": "--revision",
    "since": "--since",
    "until": "--until",
    "prefix": "--prefix",
    "tags": "--tag",
    "where": "--where",
    "kinds": "--kind",
}
"""The command line's option for a library argument named in an error."""

COMMANDS = {
    "sync": "vaultsync import {root}",
    "reindex": "vaultsync reindex",
    "reembed": "vaultsync reembed",
    "migrate": "vaultsync migrate",
}
"""The command line's command for a library remedy named in an error (``root``: the vault folder)."""


class LazyChoice(click.Choice[str]):
    """A ``click.Choice`` whose choices come from a (heavy) module only when the option is used or shown."""

    def __init__(self, load: Callable[[], Iterable[str]], case_sensitive: bool = True) -> None:
        self._load: Callable[[], Iterable[str]] | None = load
        self._choices: tuple[str, ...] = ()
        self.case_sensitive = case_sensitive

    @property
    def choices(self) -> tuple[str, ...]:
        if self._load is not None:
            self._choices, self._load = tuple(self._load()), None
        return self._choices

    @choices.setter
    def choices(self, value: Iterable[str]) -> None:
        self._choices, self._load = tuple(value), None


class Lazy:
    """A click default loaded on first use; ``--help`` shows its value (not "(dynamic)", as for a function)."""

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load

    def __call__(self) -> Any:
        return self._load()

    def __str__(self) -> str:
        return str(self._load())


class Bar:
    """A progress bar on a terminal (stderr), nothing otherwise."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label, self.enabled, self.shown = label, enabled and sys.stderr.isatty(), 0
        self.bar: ProgressBar[int] | None = None

    def __call__(self, done: int, total: int, *_: Any) -> None:
        if not self.enabled or total < 50:
            return
        if self.bar is None:
            self.bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(done - self.shown)
        self.shown = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


VECTORS_WAIT = 30.0
"""Seconds an import goes on filling the semantic vectors after its batch, by default: a first import stays about
as fast as by words alone, a small vault's vectors are complete when it returns, and a large one's rest is the
watcher's (or the next import's, or ``--vectors-wait all``)."""


def parse_vectors_wait(_ctx: Any, _param: Any, value: str) -> float | None:
    """``--vectors-wait``: seconds (0: none), or ``all`` (None: until every current text has its vector)."""
    if value.strip().lower() == "all":
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r}: give seconds (e.g. 30, 0) or 'all'") from None
    if seconds < 0 or seconds != seconds:
        raise click.BadParameter(f"{value!r}: give seconds (e.g. 30, 0) or 'all'")
    return seconds


def fill_vectors(vault: Any, say: bool, wait: float | None = None) -> None:
    """After an import (or a reembed): the semantic vectors it left to fill, before exiting, newest notes first, for
    at most ``wait`` seconds (None: all of them); searching by words works meanwhile. Out of time, interrupted
    (Ctrl-C), or while another process holds the writer role, the rest is left to the vault's next writer (its
    watcher fills them)."""
    import time

    from ..errors import LockedError

    found = vault.vector_progress()
    if not found or found["filled"] >= found["total"] or vault.lock.holder_info() is not None:
        return
    left = found["total"] - found["filled"]
    if wait == 0:
        if say:
            click.echo(f"semantic vectors: {left:,} text{'s' * (left != 1)} to fill; {LEFT_TO}", err=True)
        return
    bar, done = Bar("embedding", say), 0
    until = None if wait is None else time.monotonic() + wait
    try:  # from the line on: a Ctrl-C right after it is this one's too
        if say:
            click.echo(
                f"semantic vectors: filling {left:,} text{'s' * (left != 1)} (search works by words meanwhile; "
                "Ctrl-C leaves the rest to the watcher or the next import)",
                err=True,
            )
        while done < left and (filled := vault.fill_vectors(128)):  # the current texts (the past: the watcher)
            done += filled
            bar(min(done, left), left)
            if until is not None and done < left and time.monotonic() >= until:
                bar.close()
                if say:
                    click.echo(f"semantic vectors: {done:,} filled, {left - done:,} to go; {LEFT_TO}", err=True)
                return
    except KeyboardInterrupt:
        bar.close()
        click.echo("stopped filling semantic vectors: the vault's watcher (or next import) fills the rest", err=True)
        raise SystemExit(130) from None
    except LockedError:  # a watcher started meanwhile: it fills them
        pass
    bar.close()


LEFT_TO = (
    "the vault's watcher (vaultsync watch, or serve) fills them, or the next import "
    "(--vectors-wait all waits for them); search finds those texts by their words meanwhile"
)

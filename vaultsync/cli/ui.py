"""The ``ui`` command: the vault through time in a local web page, a thin door over ``vaultsync.ui``.

``commands.py`` adds ``COMMANDS`` to its group; this module does not import ``commands.py``.
"""

from __future__ import annotations

from pathlib import Path

import click

from .base import Context, friendly, pass_ctx


@click.command()
@click.argument("vault_dir", metavar="[VAULT]", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="Port on 127.0.0.1. Default: a random free one.")
@click.option("--no-browser", is_flag=True, help="Only print the page's URL (with its token); do not open a browser.")
@pass_ctx
@friendly
def ui(obj: Context, vault_dir: Path | None, port: int, no_browser: bool) -> None:
    """See the vault through time: a local, read-only web page with a timeline, the tree, notes and diffs.

    Listens on 127.0.0.1 only; the printed URL carries a random token every request needs.

    \b
    Example:
        vaultsync ui ~/notes
        vaultsync --vault notes ui --port 8765 --no-browser
    """
    from ..ui import serve

    vault = obj.vault(root=str(vault_dir) if vault_dir is not None else None, readonly=True)
    serve(vault, port=port, open_browser=not no_browser, announce=lambda line: click.echo(line, err=True))


COMMANDS = [ui]

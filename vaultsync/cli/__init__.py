"""The command line: the ``vaultsync`` click group (``commands``) and one module per family of commands.

``vaultsync.cli:main`` is the console entry point; ``cli`` is the click group.
"""

from .commands import cli, main

__all__ = ["cli", "main"]

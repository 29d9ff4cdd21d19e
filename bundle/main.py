"""vaultsync as an MCP Bundle: ``vaultsync serve VAULT --watch``, with ``--allow-writes`` when the user allowed writes.

The host runs ``uv run --directory <bundle> main.py <vault> <true|false>`` (manifest.json): uv installs the
published package pyproject.toml names (``vaultsync-mcp[semantic]`` at the bundle's version) for this platform, and
``vaultsync`` is imported from it.
"""

import sys

from vaultsync.cli import cli

vault, writes = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "false")
args = ["serve", vault, "--watch", *(["--allow-writes"] if writes.lower() == "true" else [])]
cli.main(args=args, prog_name="vaultsync")

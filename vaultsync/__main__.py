"""``python -m vaultsync``."""

from .cli import main

main()

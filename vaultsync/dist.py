"""The distribution that installs this package: published as ``vaultsync-mcp`` (PyPI refuses ``vaultsync``, too
similar to an existing project), imported and run as ``vaultsync``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

NAME = "vaultsync-mcp"


def installed_version() -> str:
    """The installed distribution's version (from its git tag at build time); ``0`` in a source tree not installed."""
    try:
        return version(NAME)
    except PackageNotFoundError:
        return "0"

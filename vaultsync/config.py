"""Where things live by default: the user data directory and the database path; the retention policy."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .dsn import is_dsn


def data_dir() -> Path:
    """``$VAULTSYNC_HOME``, else the platform's user data directory for vaultsync."""
    home = os.environ.get("VAULTSYNC_HOME")
    if home:
        return Path(home)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "vaultsync"
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local")) / "vaultsync"
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "vaultsync"


def default_db_path() -> Path:
    """``$VAULTSYNC_DB``, else ``vaultsync.db`` in the user data directory (never inside a vault).
    A ``postgresql://`` URI there stays a string: it names the PostgreSQL engine (``store.open_store``)."""
    env = os.environ.get("VAULTSYNC_DB")
    if is_dsn(env):
        return env  # type: ignore[return-value]  # a postgresql:// URI stays a str (callers take both)
    return Path(env) if env else data_dir() / "vaultsync.db"


RETENTION_ENV = "VAULTSYNC_RETENTION"
"""The environment variable that configures a retention policy (``vaultsync.retention``; unset: history is kept)."""


def default_retention() -> str | None:
    """``$VAULTSYNC_RETENTION`` (a retention policy's text), else None: no retention, every revision is kept."""
    return os.environ.get(RETENTION_ENV) or None

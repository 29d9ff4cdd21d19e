"""A generated bearer token, kept in a file only its owner can read: never printed (a service's journal keeps
every line it prints, for anyone who may read the journal)."""

from __future__ import annotations

import os
from pathlib import Path

from ..config import data_dir
from ..errors import ConfigError


def write_generated(token: str, host: str, port: int) -> Path:
    """Write ``token`` to ``tokens/http-HOST-PORT.token`` in the data directory (mode 600, its folder 700, replaced
    whole); return its path, which is what the server prints."""
    folder = data_dir() / "tokens"
    name = "".join(c if c.isalnum() or c in ".-" else "_" for c in f"http-{host}-{port}") + ".token"
    path = folder / name
    partial = folder / f".{name}.{os.getpid()}"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, f"{token}\n".encode())
        finally:
            os.close(fd)
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ConfigError(f"cannot write the generated token to {path}: {exc.strerror}; give a token file") from None
    return path

"""Observations and live state for the planner's tests (tests/vault/test_plan.py, test_plan_moves.py), built
without a database."""

from __future__ import annotations

import hashlib

from vaultsync.disk.folder import Present

NOW = 10**18


def blob(text: str, mtime_ns: int | None = None) -> Present:
    data = text.encode("utf-8")
    return Present(size=len(data), mtime_ns=mtime_ns, data=data)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def live(**notes: str) -> dict[str, tuple[int, str]]:
    """Path → (revision id, hash); keyword names use __ for / and end without .md."""
    return {k.replace("__", "/") + ".md": (i, sha(v)) for i, (k, v) in enumerate(notes.items(), start=1)}

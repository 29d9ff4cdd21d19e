"""The capability profiles a contract test also runs under (``@pytest.mark.capabilities_off``, tests/conftest.py),
and the promises that are weaker under one of them.

A test marked ``@pytest.mark.capabilities_off("no-dir-fd", ...)`` runs once as the machine is ("full") and once
per named profile, with ``VAULTSYNC_CAPABILITIES_OFF`` set for this process and every subprocess it starts (the
server, the CLI, a watcher): vaultsync.disk.capabilities then reports those capabilities absent and every caller
takes its other path. Nothing inside vaultsync is patched. Where a promise is weaker on that path the test
asserts the weaker promise, naming it (``weaker(...)``).
"""

from __future__ import annotations

CAPABILITY_PROFILES = {
    "no-dir-fd": "dir_fd",  # Windows: every read and write walks paths with lstat and identity re-checks
    "no-nofollow": "no_follow,o_directory",  # Windows: no O_NOFOLLOW / O_DIRECTORY (each open is lstat-checked)
    "no-exchange": "exchange",  # Windows, some network file systems: a rewrite's swap is a checked rename
    "no-fcntl": "fcntl",  # the writer lock without fcntl: the pidfile path (Windows itself uses msvcrt)
}


def weaker(profile: str, promise: str) -> bool:
    """True when ``profile`` takes away what ``promise`` needs: the test then asserts the weaker promise.
    The pairs are the "weaker" cells of docs/security.md's table "What each write promises"."""
    return profile in WEAKER.get(promise, ())


WEAKER = {
    "an editor's save between a rewrite's last check and its replace is kept": ("no-exchange",),
    "nothing at all is created outside the vault during a folder swap": ("no-dir-fd",),
    "a dead holder's lock is released by the OS": ("no-fcntl",),
}

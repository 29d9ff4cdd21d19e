"""Run by tests/hardened/test_hardened_spawn.py as its own process: the hardened start's checks and scrub
(``vaultsync.hardened.serve.prepare``, as ``serve --manifest`` runs them), then the children the
server may start, each reporting the environment it got: a parse worker of vaultsync's "spawn" pool
(``sync.parse_stream``) and a shell run by git through ``gitimport``'s runner. Prints JSON.

    python tests/support/hardened_probe.py MANIFEST VAULT
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def environment(parsed: Any) -> dict[str, Any]:
    """An indexer's ``ahead`` work, run in the parse worker: which process it is, what it inherited."""
    return {"pid": os.getpid(), "env": dict(os.environ)}


class Probe:
    """Stands in for an indexer: hands ``environment`` to the workers and keeps what comes back."""

    ahead = staticmethod(environment)

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def take_ahead(self, payload: dict[str, Any]) -> None:
        self.seen.append(payload)

    def forget_ahead(self) -> None:
        pass


class Writer:
    """Stands in for a batch: its indexers' ``ahead`` work out, their results back (``store.contract.Batch``)."""

    def __init__(self) -> None:
        self.indexers = [Probe()]

    def ahead(self) -> tuple[Any, ...]:
        return tuple(ix.ahead for ix in self.indexers)

    def take_ahead(self, payloads: list[Any]) -> None:
        for indexer, payload in zip(self.indexers, payloads):
            indexer.take_ahead(payload)


def main(manifest_path: str, vault: str) -> None:
    from vaultsync import gitimport, sync
    from vaultsync.hardened.serve import prepare

    prepare(Path(manifest_path), [])
    writer = Writer()
    change = sync.Change(
        path="a.md", kind="created", text="# A\n", hash="0" * 64, size=4, mtime_ns=None, live_id=None, prev_id=None
    )
    with sync.ParsePool(1) as pool:
        list(sync.parse_stream(iter([change]), writer, pool))  # type: ignore[arg-type]
    shell = gitimport._git(vault, "-c", "alias.probe=!env", "probe").decode()
    git_env = dict(line.split("=", 1) for line in shell.splitlines() if "=" in line)
    print(
        json.dumps(
            {"pid": os.getpid(), "server": dict(os.environ), "worker": writer.indexers[0].seen[0], "git": git_env}
        )
    )


if __name__ == "__main__":  # the spawned worker imports this module as __mp_main__ without running it
    main(*sys.argv[1:])

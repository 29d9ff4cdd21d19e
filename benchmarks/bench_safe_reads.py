"""What reading notes without following symlinks costs: ``vaultfs.read_note`` (``openat`` with ``O_NOFOLLOW`` per
path component, ``fstat`` re-check) against a plain ``open().read()``, every note ``scan`` finds, best of 3 rounds
(1 when quick). Vault: the Hub at its newest commit (quick: the sample vault)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from benchmarks.harness import Figures
from benchmarks.inputs import vault_for, workdir


def run(quick: bool) -> Figures:
    from vaultsync.disk import vaultfs
    from vaultsync.disk.folder import MAX_FILE_BYTES, scan

    with workdir("safe-reads") as work:
        root = os.path.realpath(vault_for(quick, work))
        found, _ = scan(Path(root))
        rels = [o.fs_path[len(root) + 1 :] for o in found.values() if getattr(o, "fs_path", None)]
        plain, safe = [], []
        for _ in range(1 if quick else 3):
            started = time.perf_counter()
            for rel in rels:
                with open(os.path.join(root, rel), "rb") as handle:
                    handle.read()
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            for rel in rels:
                vaultfs.read_note(root, rel, MAX_FILE_BYTES)
            safe.append(time.perf_counter() - started)
    best_plain, best_safe = min(plain), min(safe)
    return {
        "notes": len(rels),
        "plain_read_ms": round(best_plain * 1000, 2),
        "safe_read_ms": round(best_safe * 1000, 2),
        "ratio": round(best_safe / best_plain, 2) if best_plain else None,
        "extra_us_per_note": round((best_safe - best_plain) / max(len(rels), 1) * 1e6, 1),
    }

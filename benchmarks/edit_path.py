"""The per-edit path, counted: what one edited note costs before its batch is written.

    .venv/bin/python benchmarks/edit_path.py

Records one note, edits it, and counts (with ``sys.setprofile``, nothing patched) the calls made while
``Vault.sync([path])`` (what the watcher calls per debounced batch) and ``Vault.write_note`` (the write
tools) run: path normalisations (``paths.nfc``, ``paths.note_path``, ``paths.changed_path``) and store
transactions (``Database.atomic``, ``query``, ``one``; the last ``atomic`` is the batch itself).
"""

from __future__ import annotations

import collections
import sys
import tempfile
from pathlib import Path

from vaultsync.vault import Vault

COUNTED = {("paths.py", "nfc"), ("paths.py", "note_path"), ("paths.py", "changed_path"),
           ("db.py", "atomic"), ("db.py", "query"), ("db.py", "one")}


def counted(fn, *args, **kwargs) -> collections.Counter[str]:  # type: ignore[no-untyped-def]
    seen: collections.Counter[str] = collections.Counter()
    started: list[object] = []  # a generator (``atomic``) fires "call" at each resume: count its frame once

    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call":
            key = (Path(frame.f_code.co_filename).name, frame.f_code.co_name)
            if key in COUNTED and not any(f is frame for f in started):
                started.append(frame)
                seen[f"{key[0]}:{key[1]}"] += 1

    sys.setprofile(profile)
    try:
        fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return seen


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, db = Path(tmp) / "vault", Path(tmp) / "v.db"
        root.mkdir()
        (root / "a.md").write_text("# A\n\nfirst\n", encoding="utf-8")
        with Vault.open(db, root=root) as vault:
            vault.sync()
            (root / "a.md").write_text("# A\n\nsecond\n", encoding="utf-8")
            for name, seen in (("sync one edited path", counted(vault.sync, ["a.md"])),
                               ("write_note (append)", counted(vault.write_note, "a.md", "third\n", append=True))):
                print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(seen.items())))


if __name__ == "__main__":
    main()

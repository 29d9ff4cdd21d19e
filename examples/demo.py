"""The `make demo` tour: import the sample vault, change it, import again, then look back in time.

Every step runs the real `vaultsync` command in a subprocess and shows it, so you can type the same.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*args: str, show: bool = True, db: Path) -> str:
    command = [sys.executable, "-m", "vaultsync", "--db", str(db), *args]
    if show:
        print(f"\n$ vaultsync {' '.join(_quote(a) for a in args)}")
    done = subprocess.run(command, capture_output=True, text=True)
    output = done.stdout + done.stderr
    if show:
        print(output.rstrip() or "(no output)")
    if done.returncode not in (0, 1):
        raise SystemExit(f"demo step failed: {' '.join(args)}\n{output}")
    return done.stdout


def _quote(arg: str) -> str:
    return f'"{arg}"' if (" " in arg or not arg) else arg


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="vaultsync-demo-"))
    vault, db = work / "notes", work / "vaultsync.db"
    shutil.copytree(REPO / "notes", vault)
    print(f"Demo vault: a copy of notes/ in {vault}\nDatabase:   {db}")

    first = json.loads(run("import", str(vault), "--json", db=db, show=False))
    print(f"\n$ vaultsync import {vault}\n{vault.name}: batch {first['batch_id']} known at {first['known_at']}: "
          f"{first['added']} notes added")
    t1 = first["known_at"]
    time.sleep(1.1)

    # Change the vault the way a person would: edit, rename, add, delete.
    notes = sorted(p for p in vault.rglob("*.md") if ".obsidian" not in p.parts)
    edited, renamed, deleted = notes[0], notes[1], notes[2]
    with open(edited, "a", encoding="utf-8") as handle:
        handle.write("\n## Added later\n\nThis paragraph was written after the first import.\n")
    renamed_to = renamed.with_name("Renamed " + renamed.name)
    os.replace(renamed, renamed_to)
    deleted.unlink()
    (vault / "New idea.md").write_text("# New idea\n\nWritten between the two imports. #idea\n", encoding="utf-8")
    print("\nEdited:  ", edited.relative_to(vault), "\nRenamed: ", renamed.relative_to(vault), "->",
          renamed_to.relative_to(vault), "\nDeleted: ", deleted.relative_to(vault), "\nAdded:    New idea.md")

    run("import", str(vault), db=db)
    rel = lambda p: str(p.relative_to(vault))  # noqa: E731
    run("ls", "--as-of", t1, "--prefix", rel(deleted).split("/")[0] + "/" if "/" in rel(deleted) else "", db=db)
    run("read", rel(edited), "--as-of", t1, db=db)
    run("diff", rel(edited), "--from", t1, db=db)
    run("history", rel(renamed_to), db=db)
    run("read", rel(deleted), db=db)
    run("read", rel(deleted), "--as-of", t1, db=db)
    run("changes", "--since", t1, db=db)
    run("stats", db=db)
    print(f"\nDone. Try more with: vaultsync --db {db} --help")


if __name__ == "__main__":
    main()

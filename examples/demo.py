"""The `make demo` tour: a dated git history of the sample vault, imported, read, diffed and searched
as of a past date next to today, then asked the same over MCP.

Every step runs the real `vaultsync` command in a subprocess and shows it, so you can type the same;
the MCP step uses the official MCP client against `vaultsync serve`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EDITED = "Projects/Atlas/Atlas Overview.md"
HELD_BACK = "Team/Remote Work Policy.md"
RENAMED = ("Inbox.md", "Inbox (January).md")
DECISION = "\n## Decision, February\n\nWe switch the offline sync to lighthouse beacons for the field crews.\n"
COMMITS = [
    ("2025-01-06T09:00:00Z", "First import of the team vault"),
    ("2025-02-03T09:00:00Z", "Remote work policy; the February decision"),
    ("2025-03-03T09:00:00Z", "Inbox renamed, decision refined"),
]


def run(*args: str, db: Path, show: bool = True) -> str:
    command = [sys.executable, "-m", "vaultsync", *args]
    if show:
        print(f"\n$ vaultsync {' '.join(_quote(a) for a in args)}")
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "VAULTSYNC_DB": str(db)})
    output = done.stdout + done.stderr
    if show:
        print(output.rstrip() or "(no output)")
    if done.returncode not in (0, 1):
        raise SystemExit(f"demo step failed: {' '.join(args)}\n{output}")
    return done.stdout


def _quote(arg: str) -> str:
    return f'"{arg}"' if (" " in arg or not arg) else arg


def git(vault: Path, *args: str, when: str | None = None) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Demo",
        "GIT_AUTHOR_EMAIL": "demo@example.org",
        "GIT_COMMITTER_NAME": "Demo",
        "GIT_COMMITTER_EMAIL": "demo@example.org",
    }
    if when:
        env |= {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    subprocess.run(["git", "-C", str(vault), *args], check=True, env=env, capture_output=True)


def build_history(vault: Path) -> None:
    """Three dated commits written from notes/: the vault without one note, then with it and an edit,
    then a rename and a second edit."""
    shutil.copytree(REPO / "notes", vault)
    policy = (vault / HELD_BACK).read_text(encoding="utf-8")
    (vault / HELD_BACK).unlink()
    git(vault, "init", "-q", "-b", "main")
    git(vault, "add", "-A")
    git(vault, "commit", "-q", "-m", COMMITS[0][1], when=COMMITS[0][0])
    (vault / HELD_BACK).write_text(policy, encoding="utf-8")
    with open(vault / EDITED, "a", encoding="utf-8") as handle:
        handle.write(DECISION)
    git(vault, "add", "-A")
    git(vault, "commit", "-q", "-m", COMMITS[1][1], when=COMMITS[1][0])
    git(vault, "mv", *RENAMED)
    with open(vault / EDITED, "a", encoding="utf-8") as handle:
        handle.write("Beacons go to two crews first; the rest follow in April.\n")
    git(vault, "commit", "-qam", COMMITS[2][1], when=COMMITS[2][0])


async def mcp_round_trip(db: Path, vault: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "vaultsync", "--db", str(db), "serve", str(vault)]
    )
    print(f"\n# MCP: the official client starts `vaultsync serve {vault}` over stdio")
    async with Client(server) as client:
        for name, arguments in (
            ("search_notes", {"query": "beacons", "as_of": "2025-02-10", "limit": 3}),
            ("read_note", {"path": EDITED, "as_of": "2025-01-10"}),
        ):
            result = await client.call_tool(name, arguments)
            data = result.structured_content or {}
            print(f"> {name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})")
            if name == "search_notes":
                for note in data.get("notes", []):  # hits grouped by note: [heading path, first, last, excerpt]
                    for heading, *_ in note["hits"]:
                        known = data["times"][note["time"]]
                        print(f"  {note['path']} › {heading.replace(' > ', ' › ')}  (known {known})")
            else:
                text = data.get("content", "")
                print(
                    f"  {data.get('path')} as known {data.get('known_at')}: {len(text)} characters, "
                    f"{'with' if 'Decision, February' in text else 'without'} the February decision"
                )


def main() -> None:
    if shutil.which("git") is None:
        raise SystemExit("the demo needs git (it builds a small git history of the sample vault)")
    work = Path(tempfile.mkdtemp(prefix="vaultsync-demo-"))
    vault, db = work / "notes", work / "vaultsync.db"
    build_history(vault)
    print(f"Demo vault: notes/ with three dated git commits, in {vault}\nDatabase:   {db}")
    for when, message in COMMITS:
        print(f"  {when}  {message}")
    print(f"To type the commands below yourself, first: {_activate(db)}")

    run("import", str(vault), "--from-git", db=db)
    run("ls", "--as-of", "2025-01-10", "--prefix", "Team/", db=db)
    run("read", RENAMED[0], "--as-of", "2025-01-10", db=db)
    run("diff", EDITED, "--from", "2025-01-10", db=db)
    run("history", RENAMED[1], db=db)
    print("\n# Search the vault as it was in January, next to today:")
    run("search", "beacons", "--as-of", "2025-01-10", db=db)
    run("search", "beacons", "--mode", "keyword", db=db)
    print("\n# Two notes declare valid_from/valid_to: which Team notes apply in March 2025, and in June 2026?")
    run("ls", "--prefix", "Team/", "--valid-at", "2025-03-15", db=db)
    run("ls", "--prefix", "Team/", "--valid-at", "2026-06-01", db=db)
    asyncio.run(mcp_round_trip(db, vault))
    run("changes", "--since", "2025-01-10", db=db)
    print(f"\nDone. Try more in this database: {_activate(db)}; vaultsync --help")


def _activate(db: Path) -> str:
    """The shell line that makes the printed commands reach the demo's database with this venv's program."""
    bin_dir = Path(sys.executable).parent
    return f'export VAULTSYNC_DB={_quote(str(db))} PATH={_quote(str(bin_dir))}:"$PATH"'


if __name__ == "__main__":
    main()

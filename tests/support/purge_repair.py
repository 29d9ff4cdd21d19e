"""Two vaults in one database over several batches, and a search index rebuilt from scratch to compare with."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from support.help_corpus import copy_db
from vaultsync.store.search.rebuild import rebuild_search
from vaultsync.vault import Vault

SECRET = "harlequin-gazebo-7731"


TIMES = [f"2024-01-{d:02d}" for d in range(1, 9)]


def _write(root: Path, files: dict[str, str]) -> None:
    for old in root.rglob("*.md"):
        old.unlink()
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


def _states() -> list[dict[str, str]]:
    """Eight states of a small vault: the secret comes, spreads, is edited around, one note is renamed."""
    base = {
        f"n{i}.md": f"# Note {i}\n\ngarden notes {i}, a lantern by the gate.\n\n## Part\n\nline {i} of text.\n"
        for i in range(6)
    }
    states = []
    for k in range(8):
        files = dict(base)
        if k >= 1:
            files["n1.md"] = base["n1.md"] + f"\n## Secret\n\nthe {SECRET} is here.\n"
        if k >= 3:
            files["n2.md"] = base["n2.md"].replace("lantern", f"lantern ({SECRET})") + f"\nedit {k}\n"
        if 2 <= k < 5:
            files["gone.md"] = f"# Gone\n\n{SECRET} and garden notes.\n"
        if k >= 4:
            files["n3.md"] = base["n3.md"] + f"\nmore garden notes, version {k}\n"
        if k >= 6:
            files["moved/n4.md"] = files.pop("n4.md")
        states.append(files)
    return states


@pytest.fixture
def two_vaults(tmp_path: Path) -> tuple[Path, Path, Path]:
    db = tmp_path / "store.db"
    a, b = tmp_path / "alpha", tmp_path / "beta"
    for root in (a, b):
        root.mkdir()
        with Vault.open(db, root=root) as vault:
            for when, files in zip(TIMES, _states()):
                _write(root, files)
                vault.sync(known_at=when)
    return db, a, b


def _rows(db: Path, sql: str, params: tuple = ()) -> list[tuple]:
    con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def _rebuilt(db: Path, to: Path) -> Path:
    copy_db(db, to)
    con = apsw.Connection(str(to))
    from vaultsync.store.db import _load_vec

    _load_vec(con)
    with con:
        rebuild_search(con)
    con.close()
    return to
